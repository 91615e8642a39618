"""Drop-in ordered producer and consumer over confluent-kafka (KIP-253 in the clients).

:class:`OrderedProducer` routes keys by the topic's layout and takes part in the
producer barrier; :class:`OrderedConsumer` delivers every key in order across layout
changes; the asyncio ones (:class:`OrderedAIOProducer`, :class:`OrderedAIOConsumer`
and the serializing pair, :mod:`ordered.aio`) run them in an executor;
:class:`PartitionKeyRebalanceListener` receives KIP-253's key-rebalance callbacks. Every
error class of :mod:`coordinator.kernel.errors` is importable from here.

The clients are imported on first use (module ``__getattr__``): importing a submodule
such as :mod:`ordered.settings` or :mod:`ordered.producer` runs this file, and the
Spark source and sink (which read the settings table or build a producer in every
Python worker) must not pay for the consumer's import, nor the source for the
producer's.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from coordinator.kernel.errors import (
    BarrierTimeoutError,
    BatchStoppedError,
    ClusterError,
    CommandLineError,
    ConfigError,
    DataLossError,
    JarNotBuiltError,
    LayoutError,
    LayoutUnavailableError,
    NotAdoptedError,
    OrderedError,
    OrderedKafkaError,
    OrderViolationError,
    RecordCorruptError,
    RunInterruptedError,
    StateTransitionError,
    StoreAuthError,
    StoreError,
    StoreUnavailableError,
    SwitchDrainingError,
    TopicIdMismatchError,
    TransitionInProgressError,
    TrimError,
    TrimRequestError,
    UnknownTopicError,
    UsageError,
)

if TYPE_CHECKING:
    from ordered.aio import (
        OrderedAIOConsumer,
        OrderedAIOProducer,
        OrderedAsyncDeserializingConsumer,
        OrderedAsyncSerializingProducer,
    )
    from ordered.consumer import OrderedConsumer
    from ordered.deserializing import OrderedDeserializingConsumer
    from ordered.listener import PartitionKeyRebalanceListener
    from ordered.producer import OrderedProducer, TopicState
    from ordered.producer.config import ProducerConfig, ProducerSettings, split_producer_config
    from ordered.producer.config import ProducerSettings as OrderedSettings
    from ordered.serializing import OrderedSerializingProducer

__all__ = [
    "BarrierTimeoutError",
    "BatchStoppedError",
    "ClusterError",
    "CommandLineError",
    "ConfigError",
    "DataLossError",
    "JarNotBuiltError",
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
    "RunInterruptedError",
    "StateTransitionError",
    "StoreAuthError",
    "StoreError",
    "StoreUnavailableError",
    "SwitchDrainingError",
    "TopicIdMismatchError",
    "TopicState",
    "TransitionInProgressError",
    "TrimError",
    "TrimRequestError",
    "UnknownTopicError",
    "UsageError",
    "split_producer_config",
]

# Public name -> the module that defines it (imported when the name is first read).
_LAZY = {
    "OrderedAIOConsumer": "ordered.aio",
    "OrderedAIOProducer": "ordered.aio",
    "OrderedAsyncDeserializingConsumer": "ordered.aio",
    "OrderedAsyncSerializingProducer": "ordered.aio",
    "OrderedSettings": "ordered.producer.config",
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

# A public name kept from before its class was renamed -> the name it has now.
_FIRST_NAMES = {"OrderedSettings": "ProducerSettings"}


def __getattr__(name: str) -> Any:
    """Import a client's module when one of its public names is first read (PEP 562)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ordered' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), _FIRST_NAMES.get(name, name))
    globals()[name] = value  # later reads skip this function
    return value


def __dir__() -> list[str]:
    """The module's names, the lazy ones included."""
    return sorted(set(globals()) | set(__all__))
