"""The error classes, under their historical import path.

The hierarchy itself lives in the leaf module :mod:`coordinator.client.errors`; this module
re-exports all of it, so ``from ordered.errors import ...`` reaches every public error.
"""

from coordinator.client.errors import (
    BarrierTimeoutError,
    ClusterError,
    CommandLineError,
    ConfigError,
    DataLossError,
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

__all__ = [
    "BarrierTimeoutError",
    "ClusterError",
    "CommandLineError",
    "ConfigError",
    "DataLossError",
    "LayoutError",
    "LayoutUnavailableError",
    "NotAdoptedError",
    "OrderViolationError",
    "OrderedError",
    "OrderedKafkaError",
    "RecordCorruptError",
    "RunInterruptedError",
    "StateTransitionError",
    "StoreAuthError",
    "StoreError",
    "StoreUnavailableError",
    "SwitchDrainingError",
    "TopicIdMismatchError",
    "TransitionInProgressError",
    "TrimError",
    "TrimRequestError",
    "UnknownTopicError",
    "UsageError",
]
