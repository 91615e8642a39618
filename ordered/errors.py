"""The error classes, under their historical import path.

The hierarchy itself lives in the leaf module :mod:`coordinator.errors`; this module
re-exports it so that ``from ordered.errors import ...`` keeps working.
"""

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

__all__ = [
    "ClusterError",
    "ConfigError",
    "LayoutError",
    "LayoutUnavailableError",
    "NotAdoptedError",
    "OrderViolationError",
    "OrderedError",
    "OrderedKafkaError",
    "RecordCorruptError",
    "StateTransitionError",
    "StoreError",
    "StoreUnavailableError",
    "TopicIdMismatchError",
    "TransitionInProgressError",
    "TrimError",
    "TrimRequestError",
    "UsageError",
]
