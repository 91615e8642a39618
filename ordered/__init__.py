"""Drop-in ordered producer and consumer over confluent-kafka (KIP-253 in the clients).

``OrderedProducer`` and ``TopicState`` are imported lazily: the layout store
(``coordinator.store``) imports :mod:`ordered.errors`, so importing the producer eagerly
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
    StoreError,
    TransitionInProgressError,
    UsageError,
)

if TYPE_CHECKING:
    from ordered.producer import OrderedProducer, TopicState

__all__ = [
    "ClusterError",
    "ConfigError",
    "LayoutError",
    "LayoutUnavailableError",
    "NotAdoptedError",
    "OrderedError",
    "OrderedKafkaError",
    "OrderedProducer",
    "OrderedSettings",
    "ProducerConfig",
    "StoreError",
    "TopicState",
    "TransitionInProgressError",
    "UsageError",
    "split_producer_config",
]

_LAZY = {"OrderedProducer": "ordered.producer", "TopicState": "ordered.producer"}


def __getattr__(name: str) -> Any:
    """Import ``OrderedProducer``/``TopicState`` on first access (see the module doc)."""
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'ordered' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value
