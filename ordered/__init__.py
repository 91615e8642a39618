"""Drop-in ordered producer and consumer over confluent-kafka (KIP-253 in the clients)."""

from ordered.errors import (
    ClusterError,
    ConfigError,
    LayoutError,
    NotAdoptedError,
    OrderedError,
    OrderedKafkaError,
    StoreError,
    TransitionInProgressError,
    UsageError,
)

__all__ = [
    "ClusterError",
    "ConfigError",
    "LayoutError",
    "NotAdoptedError",
    "OrderedError",
    "OrderedKafkaError",
    "StoreError",
    "TransitionInProgressError",
    "UsageError",
]
