"""Drop-in ordered producer and consumer over confluent-kafka (KIP-253 in the clients).

:class:`OrderedProducer` routes keys by the topic's layout and takes part in the
producer barrier; :class:`OrderedConsumer` delivers every key in order across layout
changes; :class:`PartitionKeyRebalanceListener` receives KIP-253's key-rebalance
callbacks. The error classes are those of :mod:`coordinator.errors`.
"""

from __future__ import annotations

from coordinator.errors import (
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
    TopicIdMismatchError,
    TransitionInProgressError,
    TrimError,
    TrimRequestError,
    UsageError,
)
from ordered.config import OrderedSettings
from ordered.consumer import OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener
from ordered.producer import OrderedProducer, TopicState
from ordered.producer_config import ProducerConfig, ProducerSettings, split_producer_config

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
    "ProducerSettings",
    "RecordCorruptError",
    "StateTransitionError",
    "StoreError",
    "StoreUnavailableError",
    "TopicIdMismatchError",
    "TopicState",
    "TransitionInProgressError",
    "TrimError",
    "TrimRequestError",
    "UsageError",
    "split_producer_config",
]
