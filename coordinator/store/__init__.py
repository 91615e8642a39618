"""The layout store: topic layouts, epochs, producers and acks in ZooKeeper.

Schema and protocol: ``docs/protocol.md``. :class:`LayoutStore` is the API; the records
are in :mod:`coordinator.store.records`, the znode paths in :mod:`coordinator.store.paths`.
"""

from coordinator.store.paths import DEFAULT_ROOT
from coordinator.store.producers import DEFAULT_DELIVERY_TIMEOUT_MS
from coordinator.store.records import (
    EPOCH_STATES,
    RECORD_VERSION,
    RETIRED_STATES,
    AckRecord,
    EpochRecord,
    EpochsRecord,
    GroupRegistration,
    GroupSeenRecord,
    ProducerRecord,
    RetentionRecord,
    RetiredRecord,
    TopicRecord,
)
from coordinator.store.store import LayoutStore, Watch

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "DEFAULT_ROOT",
    "EPOCH_STATES",
    "RECORD_VERSION",
    "RETIRED_STATES",
    "AckRecord",
    "EpochRecord",
    "EpochsRecord",
    "GroupRegistration",
    "GroupSeenRecord",
    "LayoutStore",
    "ProducerRecord",
    "RetentionRecord",
    "RetiredRecord",
    "TopicRecord",
    "Watch",
]
