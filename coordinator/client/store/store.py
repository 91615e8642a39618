"""``LayoutStore``: topic layouts, epochs, producer registrations and acks in ZooKeeper.

One class over one concern module each: :mod:`~coordinator.client.store.topics`
(topics and epochs), :mod:`~coordinator.client.store.epoch_drop` (dropping old
epochs), :mod:`~coordinator.client.store.producers` (registrations and acks, the
barrier's inputs), :mod:`~coordinator.client.store.retired` (retired partitions and
retention), :mod:`~coordinator.client.store.groups` (consumer groups),
:mod:`~coordinator.client.store.watches` (watches and the lock) and
:mod:`~coordinator.client.store.autoscale` (autoscaling policies) and
:mod:`~coordinator.client.store.barrier` (the consumer barrier, feature flags), all over
:class:`~coordinator.client.store.base.StoreBase`, which owns the ZooKeeper calls.

Errors: a record that fails its check is a :class:`~coordinator.client.errors.StoreError` naming the
znode; ZooKeeper unreachable (retries exhausted, session closed) is a ``StoreError`` too;
a concurrent change of the topic record is a
:class:`~coordinator.client.errors.TransitionInProgressError`.
"""

from __future__ import annotations

from coordinator.client.store.autoscale import AutoscaleStore
from coordinator.client.store.barrier import BarrierStore
from coordinator.client.store.base import Watch
from coordinator.client.store.epoch_drop import EpochDropStore
from coordinator.client.store.groups import GroupStore
from coordinator.client.store.producers import ProducerStore
from coordinator.client.store.retired import RetiredStore
from coordinator.client.store.watches import WatchStore

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

    Constructed as :class:`~coordinator.client.store.base.StoreBase` is: ``LayoutStore(client,
    root="/ordered")``, ``ValueError`` for a root that is not an absolute path.
    """
