"""The layout store: topic layouts, epochs, producers and acks in ZooKeeper.

Schema and protocol: ``docs/protocol.md``. :class:`LayoutStore` is the API; the records
are in :mod:`coordinator.kernel.store.records`, the znode paths in
:mod:`coordinator.kernel.store.paths`.
"""

from coordinator.kernel.store.barrier_records import (
    CONSUMER_BARRIER,
    FEATURES,
    FIRST_ADOPTION,
    AnnouncementRecord,
    BarrierAck,
    BarrierRegistration,
    FeatureRecord,
    RewindAck,
)
from coordinator.kernel.store.paths import DEFAULT_ROOT
from coordinator.kernel.store.producers import DEFAULT_DELIVERY_TIMEOUT_MS
from coordinator.kernel.store.records import (
    EPOCH_STATES,
    RECORD_VERSION,
    RETIRED_STATES,
    AckRecord,
    EpochRecord,
    EpochsRecord,
    GroupMemberRecord,
    GroupRegistration,
    GroupSeenRecord,
    ProducerRecord,
    RetentionRecord,
    RetiredRecord,
    TopicRecord,
)
from coordinator.kernel.store.store import LayoutStore, Watch

__all__ = [
    "CONSUMER_BARRIER",
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "DEFAULT_ROOT",
    "EPOCH_STATES",
    "FEATURES",
    "FIRST_ADOPTION",
    "RECORD_VERSION",
    "RETIRED_STATES",
    "AckRecord",
    "AnnouncementRecord",
    "BarrierAck",
    "BarrierRegistration",
    "EpochRecord",
    "EpochsRecord",
    "FeatureRecord",
    "GroupMemberRecord",
    "GroupRegistration",
    "GroupSeenRecord",
    "LayoutStore",
    "ProducerRecord",
    "RetentionRecord",
    "RetiredRecord",
    "RewindAck",
    "TopicRecord",
    "Watch",
]
