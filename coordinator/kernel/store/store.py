"""``LayoutStore``: topic layouts, epochs, producer registrations and acks in ZooKeeper.

One class over one concern module each: :mod:`~coordinator.kernel.store.topics`
(topics and epochs), :mod:`~coordinator.kernel.store.epoch_drop` (dropping old
epochs), :mod:`~coordinator.kernel.store.producers` (registrations and acks, the
barrier's inputs), :mod:`~coordinator.kernel.store.retired` (retired partitions and
retention), :mod:`~coordinator.kernel.store.groups` (consumer groups),
:mod:`~coordinator.kernel.store.watches` (watches and the lock) and
:mod:`~coordinator.kernel.store.autoscale` (autoscaling policies) and
:mod:`~coordinator.kernel.store.barrier` (the consumer barrier, feature flags), all over
:class:`~coordinator.kernel.store.base.StoreBase`, which owns the ZooKeeper calls.

Errors: a record that fails its check is a :class:`~coordinator.kernel.errors.StoreError` naming the
znode; ZooKeeper unreachable (retries exhausted, session closed) is a ``StoreError`` too;
a concurrent change of the topic record is a
:class:`~coordinator.kernel.errors.TransitionInProgressError`.
"""

from __future__ import annotations

from coordinator.kernel.store.autoscale import AutoscaleStore
from coordinator.kernel.store.barrier import BarrierStore
from coordinator.kernel.store.base import Watch
from coordinator.kernel.store.epoch_drop import EpochDropStore
from coordinator.kernel.store.groups import GroupStore
from coordinator.kernel.store.producers import ProducerStore
from coordinator.kernel.store.retired import RetiredStore
from coordinator.kernel.store.watches import WatchStore

__all__ = ["LayoutStore", "Watch"]


class LayoutStore(
    RetiredStore,
    EpochDropStore,
    ProducerStore,
    GroupStore,
    WatchStore,
    AutoscaleStore,
    BarrierStore,
):
    """The layout store of ``docs/protocol.md`` over a started ``KazooClient``.

    Constructed as :class:`~coordinator.kernel.store.base.StoreBase` is: ``LayoutStore(client,
    root="/ordered")``, ``ValueError`` for a root that is not an absolute path.
    """
