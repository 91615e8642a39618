"""Drop-in ordered producer and consumer over confluent-kafka (KIP-253 in the clients).

:class:`OrderedProducer` routes keys by the topic's layout and takes part in the
producer barrier; :class:`OrderedConsumer` delivers every key in order across layout
changes; the asyncio ones (:class:`OrderedAIOProducer`, :class:`OrderedAIOConsumer`
and the serializing pair, :mod:`ordered.aio`) run them in an executor;
:class:`PartitionKeyRebalanceListener` receives KIP-253's key-rebalance callbacks. The
error classes are those of :mod:`coordinator.client.errors`.

The clients are imported on first use (module ``__getattr__``): importing a submodule
such as :mod:`ordered.settings` or :mod:`ordered.producer` runs this file, and the
Spark source and sink (which read the settings table or build a producer in every
Python worker) must not pay for the consumer's import, nor the source for the
producer's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from coordinator.client.errors import (
    ClusterError,
    ConfigError,
    LayoutError,
    LayoutUnavailableError,
    NotAdoptedError,
    OrderedError,
    OrderedKafkaError,
    OrderViolationError,
    RecordCorruptError,
    StateTransitionError,
    StoreError,
    StoreUnavailableError,
    SwitchDrainingError,
    TopicIdMismatchError,
    TransitionInProgressError,
    TrimError,
    TrimRequestError,
    UsageError,
)

if TYPE_CHECKING:
    from ordered.aio import (
        OrderedAIOConsumer,
        OrderedAIOProducer,
        OrderedAsyncDeserializingConsumer,
        OrderedAsyncSerializingProducer,
    )
    from ordered.config import OrderedSettings
    from ordered.consumer import OrderedConsumer
    from ordered.deserializing import OrderedDeserializingConsumer
    from ordered.listener import PartitionKeyRebalanceListener
    from ordered.producer import OrderedProducer, TopicState
    from ordered.producer.config import ProducerConfig, ProducerSettings, split_producer_config
    from ordered.serializing import OrderedSerializingProducer

__all__ = [
    "ClusterError",
    "ConfigError",
    "LayoutError",
    "LayoutUnavailableError",
    "NotAdoptedError",
    "OrderViolationError",
    "OrderedAIOConsumer",
    "OrderedAIOProducer",
    "OrderedAsyncDeserializingConsumer",
    "OrderedAsyncSerializingProducer",
    "OrderedConsumer",
    "OrderedDeserializingConsumer",
    "OrderedError",
    "OrderedKafkaError",
    "OrderedProducer",
    "OrderedSerializingProducer",
    "OrderedSettings",
    "PartitionKeyRebalanceListener",
    "ProducerConfig",
    "ProducerSettings",
    "RecordCorruptError",
    "StateTransitionError",
    "StoreError",
    "StoreUnavailableError",
    "SwitchDrainingError",
    "TopicIdMismatchError",
    "TopicState",
    "TransitionInProgressError",
    "TrimError",
    "TrimRequestError",
    "UsageError",
    "split_producer_config",
]

# Public name -> the module that defines it (imported when the name is first read).
_LAZY = {
    "OrderedAIOConsumer": "ordered.aio",
    "OrderedAIOProducer": "ordered.aio",
    "OrderedAsyncDeserializingConsumer": "ordered.aio",
    "OrderedAsyncSerializingProducer": "ordered.aio",
    "OrderedSettings": "ordered.config",
    "OrderedConsumer": "ordered.consumer",
    "OrderedDeserializingConsumer": "ordered.deserializing",
    "PartitionKeyRebalanceListener": "ordered.listener",
    "OrderedProducer": "ordered.producer",
    "OrderedSerializingProducer": "ordered.serializing",
    "TopicState": "ordered.producer",
    "ProducerConfig": "ordered.producer.config",
    "ProducerSettings": "ordered.producer.config",
    "split_producer_config": "ordered.producer.config",
}


def __getattr__(name: str) -> Any:
    """Import a client's module when one of its public names is first read (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ordered' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones included."""
    return sorted(set(globals()) | set(__all__))
