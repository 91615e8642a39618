"""Drop-in ordered producer and consumer over confluent-kafka (KIP-253 in the clients).

``OrderedProducer``, ``TopicState``, ``OrderedConsumer`` and
``PartitionKeyRebalanceListener`` are imported lazily: the layout store
(``coordinator.store``) imports :mod:`ordered.errors`, so importing the clients eagerly
here would be circular.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ordered.config import OrderedSettings, ProducerConfig, split_producer_config
from ordered.errors import (
    ClusterError,
    ConfigError,
    LayoutError,
    LayoutUnavailableError,
    NotAdoptedError,
    OrderedError,
    OrderedKafkaError,
    OrderViolationError,
    StoreError,
    TransitionInProgressError,
    UsageError,
)

if TYPE_CHECKING:
    from ordered.consumer import OrderedConsumer
    from ordered.listener import PartitionKeyRebalanceListener
    from ordered.producer import OrderedProducer, TopicState

__all__ = [
    "ClusterError",
    "ConfigError",
    "LayoutError",
    "LayoutUnavailableError",
    "NotAdoptedError",
    "OrderViolationError",
    "OrderedConsumer",
    "OrderedError",
    "OrderedKafkaError",
    "OrderedProducer",
    "OrderedSettings",
    "PartitionKeyRebalanceListener",
    "ProducerConfig",
    "StoreError",
    "TopicState",
    "TransitionInProgressError",
    "UsageError",
    "split_producer_config",
]

_LAZY = {
    "OrderedConsumer": "ordered.consumer",
    "OrderedProducer": "ordered.producer",
    "PartitionKeyRebalanceListener": "ordered.listener",
    "TopicState": "ordered.producer",
}


def __getattr__(name: str) -> Any:
    """Import the clients on first access (see the module doc)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ordered' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
