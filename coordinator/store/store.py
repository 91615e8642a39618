"""``LayoutStore``: topic layouts, epochs, producer registrations and acks in ZooKeeper.

One class over one concern module each: :mod:`~coordinator.store.topics` (topics and
epochs), :mod:`~coordinator.store.epoch_drop` (dropping old epochs),
:mod:`~coordinator.store.producers` (registrations and acks, the barrier's
inputs), :mod:`~coordinator.store.retired` (retired partitions and retention),
:mod:`~coordinator.store.groups` (consumer groups) and :mod:`~coordinator.store.watches`
(watches and the lock), :mod:`~coordinator.store.autoscale` (autoscaling policies),
all over :class:`~coordinator.store.base.StoreBase`, which owns
the ZooKeeper calls.

Errors: a record that fails its check is a :class:`~coordinator.errors.StoreError` naming the
znode; ZooKeeper unreachable (retries exhausted, session closed) is a ``StoreError`` too;
a concurrent change of the topic record is a
:class:`~coordinator.errors.TransitionInProgressError`.
"""

from __future__ import annotations

from coordinator.store.autoscale import AutoscaleStore
from coordinator.store.base import Watch
from coordinator.store.epoch_drop import EpochDropStore
from coordinator.store.groups import GroupStore
from coordinator.store.producers import ProducerStore
from coordinator.store.retired import RetiredStore
from coordinator.store.watches import WatchStore

__all__ = ["LayoutStore", "Watch"]


class LayoutStore(
    RetiredStore, EpochDropStore, ProducerStore, GroupStore, WatchStore, AutoscaleStore
):
    """The layout store of ``docs/protocol.md`` over a started ``KazooClient``.

    Constructed as :class:`~coordinator.store.base.StoreBase` is: ``LayoutStore(client,
    root="/ordered")``, ``ValueError`` for a root that is not an absolute path.
    """
