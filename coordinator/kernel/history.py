"""One topic's layout history, and the watcher that keeps a reader's copy fresh.

:class:`TopicHistory` turns the store's records into what every reader needs: the
epochs as the gate rule sees them (:class:`linear_hash.gating.EpochInfo`), the layout of
each epoch, the partitions a pending epoch takes keys from, and a
:class:`~linear_hash.gating.GateEvaluator`. The producer, the consumer, ``ordered
describe`` and the Spark source all read a topic through :func:`load_history`.

:class:`HistoryWatcher` tells a reader *that* a topic changed; the reader reloads on
its own thread. Kazoo's watch callbacks never read ZooKeeper themselves: a read that
retries on kazoo's worker thread blocks ``KazooClient.stop()`` (and interpreter exit)
while ZooKeeper is away.

Session states of a watcher: the shared machine of :mod:`coordinator.kernel.session`
(:class:`SessionState`, re-exported here)::

    CONNECTED --(connection lost)--> SUSPENDED --(reconnected)--> CONNECTED
    CONNECTED | SUSPENDED --(session expired)--> LOST --(new session)--> CONNECTED
    any --(stop)--> STOPPED

A reader that saw ``SUSPENDED`` or ``LOST`` must reload before it trusts its copy
(watches may have missed changes); :attr:`HistoryWatcher.generation` counts every
reconnect so it can tell.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Final

from kazoo.client import KazooClient

from coordinator.kernel.errors import NotAdoptedError
from coordinator.kernel.session import SESSION_TRANSITIONS, SessionMachine, SessionState
from coordinator.kernel.store import LayoutStore, TopicRecord, Watch
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.topic_ids import TopicIds, check_topic_id
from linear_hash import Layout
from linear_hash.gating import EpochInfo, GateEvaluator

__all__ = ["HistoryWatcher", "SessionState", "TopicHistory", "load_history"]


@dataclass(frozen=True)
class TopicHistory:
    """A consistent snapshot of one topic's layout history.

    Attributes:
        topic: The Kafka topic.
        record: The topic record, ``None`` when the topic is not adopted.
        epochs: Every epoch, ascending, as the gate rule sees it (empty when not
            adopted or not ordered).
        layouts: Epoch -> the layout it routes by.
    """

    topic: str
    record: TopicRecord | None
    epochs: tuple[EpochInfo, ...] = ()
    layouts: Mapping[int, Layout] = field(default_factory=dict)

    @property
    def adopted(self) -> bool:
        """Whether the topic is adopted and routed by its layout (``ordered``)."""
        return self.record is not None and self.record.ordered

    @property
    def latest_epoch(self) -> int:
        """The newest epoch, ``-1`` when there is none."""
        return self.epochs[-1].epoch if self.epochs else -1

    @property
    def pending(self) -> EpochInfo | None:
        """The epoch still waiting for its seal, if any."""
        if self.epochs and not self.epochs[-1].sealed:
            return self.epochs[-1]
        return None

    @cached_property
    def pending_givers(self) -> frozenset[int]:
        """Partitions a pending epoch takes keys from (their boundaries are not known yet).

        Worked out once per snapshot (it is frozen): a consumer asks at every delivery.
        """
        return frozenset(a for e in self.epochs if not e.sealed for a, _b in e.edges)

    @property
    def layout(self) -> Layout | None:
        """The layout of the newest epoch (what producers route by), ``None`` if none."""
        return self.layouts.get(self.latest_epoch)

    def gates(self) -> GateEvaluator:
        """A fresh gate evaluator over these epochs (keep and :meth:`update` it)."""
        return GateEvaluator(self.epochs)

    def require_adopted(self) -> TopicRecord:
        """Return the record of an adopted topic.

        Raises:
            NotAdoptedError: The topic is not adopted.
        """
        if self.record is None:
            raise NotAdoptedError(f"topic {self.topic} is not adopted")
        return self.record

    @classmethod
    def from_records(cls, record: TopicRecord | None, epochs: list[Any]) -> TopicHistory:
        """Build from a topic record and its ``EpochRecord``s (any order).

        Args:
            record: The topic record, or ``None`` (not adopted).
            epochs: The epoch records (ignored when ``record`` is ``None`` or the topic
                is not ordered).
        """
        if record is None:
            raise ValueError("from_records needs a record; use TopicHistory(topic, None)")
        return cls.from_infos(record, [EpochInfo.from_record(e) for e in epochs])

    @classmethod
    def from_infos(cls, record: TopicRecord, epochs: Iterable[EpochInfo]) -> TopicHistory:
        """Build from a topic record and its epochs as the gate rule sees them (any order)."""
        if not record.ordered:
            return cls(record.topic, record)
        infos = tuple(sorted(epochs, key=lambda e: e.epoch))
        layouts = {
            e.epoch: Layout(record.initial, e.to_active or record.initial, e.epoch) for e in infos
        }
        return cls(record.topic, record, infos, layouts)


def load_history(
    store: LayoutStore,
    topic: str,
    *,
    sync: bool = True,
    topic_id: str | None = None,
    ids: TopicIds | None = None,
    previous: TopicHistory | None = None,
) -> TopicHistory:
    """Read a topic's history from the store, refusing a layout of another topic id.

    Args:
        store: The layout store.
        topic: The topic.
        sync: Issue a ZooKeeper ``sync`` on the topic's path first, so the read sees
            every write that completed before this call began (the server we read
            from may otherwise lag the leader). Readers that must know every epoch a
            record fetched earlier could carry (consumers, the Spark planner) sync.
        topic_id: Kafka's topic id of ``topic``, if the caller knows it: a record
            bound to another id is refused.
        ids: A :class:`~coordinator.kernel.topic_ids.TopicIds` that asks Kafka for the id
            when the record is bound to one (readers that do not know it yet).
        previous: An earlier snapshot of the topic: its sealed epochs that are still
            there are not read again (a sealed epoch never changes, and an epoch
            number never names two layouts), so a reload after a layout change costs
            the new epochs, not the whole history.

    Returns:
        The snapshot; ``record`` is ``None`` when the topic is not adopted.

    Raises:
        TopicIdMismatchError: The record is bound to another topic id than Kafka's.
        UnknownTopicError: ``ids`` found the topic gone from Kafka.
        OrderedKafkaError: ``ids`` could not ask Kafka.
        StoreError: ZooKeeper is unreachable or a record fails its check.
    """
    if sync:
        path = store_paths.topic_path(store.root, topic)
        store.sync(path)
    record = store.get_topic(topic)
    check_topic_id(record, topic_id)
    if ids is not None:
        ids.verify(record)
    if record is None:
        return TopicHistory(topic, None)
    if not record.ordered:
        return TopicHistory(topic, record)
    known: dict[int, EpochInfo] = {}
    if previous is not None and previous.topic == topic:
        known = {e.epoch: e for e in previous.epochs if e.sealed}
    numbers, records = store.epochs_except(topic, known)
    reused = [known[n] for n in numbers if n in known]
    return TopicHistory.from_infos(record, reused + [EpochInfo.from_record(r) for r in records])


_TRANSITIONS: Final = SESSION_TRANSITIONS  # the shared table, under its first name


class HistoryWatcher:
    """Marks topics dirty when their record changes; tracks the session state.

    Callbacks run on kazoo's thread and only set flags (never read ZooKeeper), so a
    watcher never blocks kazoo's worker. The owner calls :meth:`take_dirty` on its own
    thread and reloads those topics with :func:`load_history`.

    Args:
        store: The layout store whose client is watched.
        on_change: Optional hook called (on kazoo's thread, must not block) after a
            topic is marked dirty or the session state changes.
    """

    def __init__(self, store: LayoutStore, on_change: Callable[[], None] | None = None) -> None:
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()
        self._dirty: set[str] = set()
        self._unarmed: set[str] = set()
        self._watches: dict[str, Watch] = {}
        self._session = _WatcherSession(self)
        store.client.add_listener(self._on_session)

    @property
    def state(self) -> SessionState:
        """The session state now."""
        return self._session.state

    @property
    def generation(self) -> int:
        """Incremented at every reconnect after a suspension or a lost session."""
        return self._session.generation

    def _reconnected(self) -> None:
        # Under self._lock (the machine's lock): watches may have missed changes while
        # away (and a new session has none): everything is dirty and armed again.
        self._dirty.update(self._watches)
        self._unarmed.update(self._watches)

    def _on_session(self, state: Any) -> bool | None:
        if self._session.stopped:
            return True  # removes the listener
        self._session.on_kazoo(state)
        self._poke()
        return None

    def _poke(self) -> None:
        if self._on_change is not None:
            self._on_change()

    def watch(self, topic: str) -> None:
        """Start watching ``topic`` (idempotent); it starts out dirty.

        The watch is a one-shot ZooKeeper watch armed on the caller's thread; when it
        fires (kazoo's thread) it only marks the topic, and :meth:`take_dirty` arms
        it again on the owner's thread. Nothing ever reads on kazoo's thread, so a
        ZooKeeper that went away cannot stall kazoo's worker (kazoo's ``DataWatch``
        re-reads there with unbounded retries, which blocks interpreter exit).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        with self._lock:
            if topic in self._watches:
                return
            self._dirty.add(topic)
            self._watches[topic] = Watch()
        self._arm(topic)

    def _arm(self, topic: str) -> None:
        path = store_paths.topic_path(self._store.root, topic)
        handle = self._watches.get(topic)
        if handle is None or handle.stopped:
            return

        def fired(_event: Any) -> None:
            # kazoo's thread: flags only.
            if handle.stopped:
                return
            with self._lock:
                self._dirty.add(topic)
                self._unarmed.add(topic)
            self._poke()

        try:
            self._store.exists_and_watch(path, fired)
        except Exception:
            with self._lock:
                self._unarmed.add(topic)
                self._dirty.add(topic)
            raise

    def take_dirty(self) -> set[str]:
        """Return the topics changed since the last call, and clear the set.

        Re-arms the watches that fired (or could not be armed), on this thread; one
        that still cannot be armed stays marked, so the owner tries again. Never raises.
        """
        if not self._dirty and not self._unarmed:
            # Read without the lock (consumers call this once per batch): a topic
            # marked by the watch thread just after is taken by the next call, as it
            # would be if marked just after the lock was released.
            return set()
        with self._lock:
            dirty, self._dirty = self._dirty, set()
            unarmed, self._unarmed = self._unarmed, set()
            if self._session.stopped:
                return dirty
        for topic in unarmed:
            try:
                self._arm(topic)
            except Exception:  # marked again by _arm: the next call retries
                dirty.add(topic)
        return dirty

    @property
    def marked(self) -> bool:
        """Whether a topic waits to be read again or a watch to be armed (:meth:`take_dirty`)."""
        return bool(self._dirty or self._unarmed)

    def mark_dirty(self, topic: str) -> None:
        """Mark ``topic`` for a reload (for example after a failed one)."""
        with self._lock:
            self._dirty.add(topic)

    def stop(self) -> None:
        """Stop every watch and the session listener; never blocks."""
        self._session.stop()
        with self._lock:
            watches = list(self._watches.values())
            self._watches.clear()
        for watch in watches:
            watch.stop()  # a one-shot watch that fires later finds it stopped
        client: KazooClient = self._store.client
        client.remove_listener(self._on_session)


class _WatcherSession(SessionMachine):
    """A watcher's session: the shared machine; a reconnect marks every topic dirty."""

    def __init__(self, watcher: HistoryWatcher) -> None:
        super().__init__("history watcher", watcher._lock)
        self._watcher = watcher

    def _entered(self, old: SessionState, new: SessionState) -> None:
        if new is SessionState.CONNECTED:
            self._watcher._reconnected()
