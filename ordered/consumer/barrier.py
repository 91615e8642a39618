"""The consumer's side of the consumer barrier (``docs/consumer-barrier.md``).

With the barrier in force, a controller publishes an epoch only after every consumer
registered on the topic acked its announcement (or its session ended, or it was evicted
and its lease ran out). A consumer acks only once it has stopped relying on the barrier
for the topic, until it has read the epoch published. So while :meth:`BarrierClient.relies`
is true, every epoch of every record it fetched is in its copy, and a fetched batch
needs no ZooKeeper check of its own (:mod:`ordered.consumer.layouts` answers the check
at once).

It relies only while all of this holds, and falls back to the fetch check otherwise:

- the feature flag ``consumer-barrier`` is on (read from a watch);
- it is registered (member node, a registration per topic it reads) in the session it
  has now, and read every layout after registering (so it saw any announcement its
  registration came too late to be waited for);
- its *lease* runs: a ``sync`` + ``exists`` of its member node, sent less than
  :attr:`BarrierClient.lease_s` ago, found it (a controller that evicts a consumer
  deletes that node, then waits the lease out before it publishes; the lease is shorter
  than the session timeout, so a process frozen past its session's end stops relying
  before its session is declared gone);
- no announcement it read names an epoch newer than its copy of the topic;
- no topic waits to be read again (a watch fired).

Acks and the group's rewind markers are handled on kazoo's event thread with
asynchronous calls only, whatever the application does between its calls: a watch
event first records what it saw (the announcement, a rewind), then writes the ack.
"""

from __future__ import annotations

import contextlib
import enum
import logging
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from kazoo.exceptions import NoNodeError

from coordinator.kernel.errors import StateTransitionError, StoreError
from coordinator.kernel.history import HistoryWatcher, SessionState
from coordinator.kernel.identity import host_name, random_token
from coordinator.kernel.store import (
    CONSUMER_BARRIER,
    AnnouncementRecord,
    BarrierAck,
    BarrierRegistration,
    FeatureRecord,
    LayoutStore,
    RewindAck,
)
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.store.base import Watch

__all__ = [
    "BARRIER_TRANSITIONS",
    "LEASE_MOST_S",
    "REGISTER_RETRY_S",
    "BarrierClient",
    "BarrierState",
    "check_barrier_transition",
]

_log = logging.getLogger(__name__)

LEASE_MOST_S: Final = 5.0
"""The longest lease (and never more than half the session timeout)."""

REGISTER_RETRY_S: Final = 1.0
"""Seconds before a failed registration is tried again (doubling, up to a minute)."""

_REGISTER_RETRY_MOST_S: Final = 60.0

_UNREADABLE: Final = 1 << 62  # an announcement that fails its check: never resolved


class BarrierState(enum.Enum):
    """Whether this consumer takes part in the barrier.

    Transitions (:data:`BARRIER_TRANSITIONS`; :meth:`BarrierClient._set` is the one
    writer)::

        OFF --(flag on)--> REGISTERING --(registered, layouts read)--> IN_FORCE
        IN_FORCE --(evicted, session away, a write failed)--> LOST --> REGISTERING
        any --(flag off, stopped)--> OFF

    Attributes:
        OFF: Not registered (flag off, or stopped): every fetch is checked.
        REGISTERING: Registering and reading the layouts: still checked.
        IN_FORCE: Registered in this session: :meth:`BarrierClient.relies` may be true.
        LOST: Was registered, no longer counts (evicted, or the session changed).
    """

    OFF = "off"
    REGISTERING = "registering"
    IN_FORCE = "in_force"
    LOST = "lost"


BARRIER_TRANSITIONS: Final[dict[BarrierState, frozenset[BarrierState]]] = {
    BarrierState.OFF: frozenset({BarrierState.REGISTERING}),
    BarrierState.REGISTERING: frozenset(
        {BarrierState.IN_FORCE, BarrierState.LOST, BarrierState.OFF}
    ),
    BarrierState.IN_FORCE: frozenset({BarrierState.LOST, BarrierState.OFF}),
    BarrierState.LOST: frozenset({BarrierState.REGISTERING, BarrierState.OFF}),
}
"""Every legal ``old -> new`` of :class:`BarrierState`."""


def check_barrier_transition(old: BarrierState, new: BarrierState) -> None:
    """Raise :class:`~coordinator.kernel.errors.StateTransitionError` for an unlisted move."""
    if new not in BARRIER_TRANSITIONS[old]:
        raise StateTransitionError(
            f"consumer barrier: {old.name} -> {new.name} is not a transition"
        )


class _View(Protocol):
    """What the barrier reads of a topic's view (:class:`~ordered.consumer.layouts.TopicView`)."""

    @property
    def record(self) -> Any: ...

    @property
    def ordered(self) -> bool: ...


class BarrierClient:
    """One consumer's registration, acks and lease.

    Args:
        store: The layout store (the consumer's ZooKeeper client).
        watcher: The layouts' watcher (its session state, generation and marks).
        group: The consumer's ``group.id`` (``None``: none; no rewind markers).
        session_timeout_s: The ZooKeeper session timeout (the lease stays below half).
        on_rewound: Called on kazoo's thread with ``(topic, marker zxid)`` when the
            group's rewind marker of a topic changed; must not block.
    """

    def __init__(
        self,
        store: LayoutStore,
        watcher: HistoryWatcher,
        group: str | None,
        session_timeout_s: float,
        on_rewound: Callable[[str, int], None],
    ) -> None:
        self._store = store
        self._watcher = watcher
        self._group = group
        self._on_rewound = on_rewound
        self.id = f"c-{random_token(32)}"
        self.lease_s = min(LEASE_MOST_S, session_timeout_s / 2.0)
        self.state = BarrierState.OFF
        self.flag = False  # the feature flag, as the watch last read it
        self._lock = threading.Lock()
        # topic -> newest announced epoch read (kazoo's thread writes, the poll thread prunes)
        self._announced: dict[str, int] = {}
        self._registered: set[str] = set()  # topics registered in this registration
        self._watches: dict[str, list[Watch]] = {}
        self._generation = -1
        self._lease_until = 0.0  # monotonic
        self._renewal: tuple[float, Any, Any] | None = None  # (sent at, sync, exists)
        self._next_attempt = 0.0
        self._retry_s = REGISTER_RETRY_S  # grows while registrations keep failing
        self._stopped = False
        # Watches are one-shot chains re-armed after each event; kazoo keeps them across
        # a reconnect of the same session, and the poll thread arms them afresh at every
        # new generation (the flag's here, the topics' at the next registration).
        self._flag_generation = watcher.generation
        self._flag_watch = self._watch_flag()

    # --- the poll thread ---------------------------------------------------------------

    def relies(self, views: Mapping[str, _View]) -> bool:
        """Whether a batch taken now needs no fetch check (see the module's list).

        Cheap (no ZooKeeper round trip): called for every batch. Also sends the lease's
        renewal when due and takes its answer when it came.
        """
        if self.state is not BarrierState.IN_FORCE or not self.flag:
            return False
        watcher = self._watcher
        if (
            watcher.state is not SessionState.CONNECTED
            or watcher.generation != self._generation
            or watcher.marked
        ):
            return False
        now = time.monotonic()
        if self._renewal is not None:
            self._take_renewal()
            if self.state is not BarrierState.IN_FORCE:
                return False
        if self._renewal is None and now >= self._lease_until - self.lease_s / 2.0:
            self._renew(now)
        if now >= self._lease_until:
            return False
        if self._announced and not self._resolved(views):
            return False
        return len(self._registered) >= len(views) and self._registered.issuperset(views)

    def _resolved(self, views: Mapping[str, _View]) -> bool:
        """Whether every announcement read is published in our copy (pruning those)."""
        for topic, epoch in list(self._announced.items()):
            view = views.get(topic)
            record = None if view is None else view.record
            if record is not None and record.epoch >= epoch:
                with self._lock:
                    if self._announced.get(topic) == epoch:
                        del self._announced[topic]
                continue
            if view is not None:
                return False
        return True

    def _renew(self, now: float) -> None:
        path = store_paths.barrier_member_path(self._store.root, self.id)
        client = self._store.client
        try:
            sync = client.sync_async(path)
            exists = client.exists_async(path)
        except Exception as exc:  # the connection is closing: the lease runs out
            _log.debug("barrier lease not renewed: %r", exc)
            return
        self._renewal = (now, sync, exists)

    def _take_renewal(self) -> None:
        renewal = self._renewal
        assert renewal is not None
        sent, sync, exists = renewal
        if not (sync.ready() and exists.ready()):
            return
        self._renewal = None
        try:
            sync.get()
            stat = exists.get()
        except Exception as exc:  # connection loss: the lease runs out
            _log.debug("barrier lease renewal failed: %r", exc)
            return
        if stat is None:
            _log.warning(
                "consumer barrier: this consumer was evicted (it did not ack an "
                "announcement in time); checking every fetch until it registers again"
            )
            self._set(BarrierState.LOST)
            return
        self._lease_until = max(self._lease_until, sent + self.lease_s)

    def wants_registration(self) -> bool:
        """Whether :meth:`register` should run now (flag on, not registered in this session)."""
        if self._stopped:
            return False
        generation = self._watcher.generation
        if generation != self._flag_generation and self._watcher.state is SessionState.CONNECTED:
            self._flag_generation = generation
            self._flag_watch.stop()
            self._flag_watch = self._watch_flag()
        if not self.flag:
            return self.state is not BarrierState.OFF  # to leave
        if self._watcher.state is not SessionState.CONNECTED:
            return False
        if self.state is BarrierState.IN_FORCE and self._watcher.generation == self._generation:
            return False
        return time.monotonic() >= self._next_attempt

    def register(self, topics: list[str]) -> float | None:
        """Register (member node and one registration per topic), or leave when the flag is off.

        The caller then reads every layout (a ``sync`` first) and calls
        :meth:`registered` with the time returned here.

        Returns:
            The monotonic time before the member node was written (the lease's start),
            or ``None`` when not registered (flag off, or a failure: retried later).
        """
        if not self.flag or self._stopped:
            self._leave()
            return None
        if self.state is not BarrierState.REGISTERING:
            if self.state is BarrierState.IN_FORCE:
                self._set(BarrierState.LOST)
            self._set(BarrierState.REGISTERING)
        self._next_attempt = time.monotonic() + self._retry_s
        self._generation = self._watcher.generation
        started = time.monotonic()
        for watches in self._watches.values():  # armed again below, in this session
            for watch in watches:
                watch.stop()
        self._watches.clear()
        try:
            self._store.create_member(self.id)
            self._registered = set()
            for topic in topics:
                self.register_topic(topic)
        except (StoreError, ValueError) as exc:
            # Once per streak of failures (an ACL that forbids it fails every time).
            log = _log.warning if self._retry_s == REGISTER_RETRY_S else _log.debug
            log("consumer barrier: cannot register (fetches are checked): %s", exc)
            self._retry_s = min(_REGISTER_RETRY_MOST_S, self._retry_s * 2)
            self._set(BarrierState.LOST)
            return None
        self._retry_s = REGISTER_RETRY_S
        return started

    def register_topic(self, topic: str) -> None:
        """Register on ``topic`` and watch its announcement (and rewind marker); idempotent.

        Called before the topic's layout is read.

        Raises:
            StoreError: ZooKeeper failed.
        """
        if self.state not in (BarrierState.REGISTERING, BarrierState.IN_FORCE):
            return
        record = BarrierRegistration(
            id=self.id,
            group=self._group or "",
            host=host_name(),
            pid=os.getpid(),
            lease_ms=int(self.lease_s * 1000),
            registered_at=time.time(),
        )
        self._store.register_barrier_consumer(topic, record)
        self._registered.add(topic)
        if topic not in self._watches:
            self._watches[topic] = self._watch(topic)

    def unregister_topic(self, topic: str) -> None:
        """Withdraw the registration on ``topic``, whose layout was refused (another topic
        id): no transition of it may wait for a consumer that reads none of it."""
        if topic not in self._registered:
            return
        self._registered.discard(topic)
        for watch in self._watches.pop(topic, []):
            watch.stop()
        try:
            self._store.unregister_barrier_topic(self.id, topic)
        except StoreError as exc:
            # Left in place, it is evicted after the bound like any consumer that never acks.
            _log.warning("consumer barrier: cannot unregister from %s: %s", topic, exc)

    def missing(self, topic: str) -> bool:
        """Whether the barrier is being relied on without a registration on ``topic``."""
        active = self.state in (BarrierState.REGISTERING, BarrierState.IN_FORCE)
        return active and topic not in self._registered

    def registered(self, started: float) -> None:
        """Every layout was read after :meth:`register` (which returned ``started``)."""
        if self.state is BarrierState.REGISTERING and self._generation == self._watcher.generation:
            self._lease_until = started + self.lease_s
            self._set(BarrierState.IN_FORCE)

    def read_announcement(self, topic: str, epoch: int) -> None:
        """Read ``topic``'s announcement after its layout (at ``epoch``) was read; ack it.

        Called after every read of a layout while registered: a registration that came
        after an announcement was listed is not waited for, and this read (after the
        layout's ``sync``) sees it.

        Raises:
            StoreError: ZooKeeper failed.
        """
        if self.state not in (BarrierState.REGISTERING, BarrierState.IN_FORCE):
            return
        record, _ = self._store.get_announcement(topic)
        if record is not None:
            self._note_announcement(topic, record)
            if record.epoch > epoch:
                self._store.ack_announcement(topic, self._ack(record))

    def lose(self) -> None:
        """Stop relying until a new registration (a registration write failed)."""
        if self.state in (BarrierState.REGISTERING, BarrierState.IN_FORCE):
            self._set(BarrierState.LOST)

    def stop(self) -> None:
        """Stop the watches (never blocks; the session's end removes the nodes)."""
        self._stopped = True
        self._flag_watch.stop()
        for watches in self._watches.values():
            for watch in watches:
                watch.stop()
        self._watches.clear()

    def _leave(self) -> None:
        if self.state is BarrierState.OFF:
            return
        self._set(BarrierState.OFF)  # first: nothing relies on the registration any more
        with contextlib.suppress(StoreError):
            self._store.unregister_barrier_consumer(self.id, sorted(self._registered))
        self._registered = set()

    def _set(self, new: BarrierState) -> None:
        """The one writer of :attr:`state`."""
        check_barrier_transition(self.state, new)
        self.state = new

    # --- kazoo's thread ----------------------------------------------------------------

    def _watch_flag(self) -> Watch:
        path = store_paths.feature_path(self._store.root, CONSUMER_BARRIER)
        return _chain(self._store.client, path, True, lambda _stat, data: self._on_flag(data))

    def _watch(self, topic: str) -> list[Watch]:
        root = self._store.root
        client = self._store.client
        path = store_paths.barrier_announcement_path(root, topic)
        watches = [_chain(client, path, True, lambda _s, data: self._on_announcement(topic, data))]
        if self._group:
            marker = store_paths.rewind_path(root, self._group, topic)
            watches.append(_chain(client, marker, False, lambda s, _d: self._on_marker(topic, s)))
        return watches

    def _on_flag(self, data: bytes | None) -> None:
        path = store_paths.feature_path(self._store.root, CONSUMER_BARRIER)
        try:
            self.flag = data is not None and FeatureRecord.from_json(data, path).enabled
        except StoreError as exc:
            _log.warning("consumer barrier: %s (taken as off)", exc)
            self.flag = False

    def _on_announcement(self, topic: str, data: bytes | None) -> None:
        if data is None:
            return  # withdrawn or never written: what was read stays until resolved
        path = store_paths.barrier_announcement_path(self._store.root, topic)
        try:
            record = AnnouncementRecord.from_json(data, path)
        except StoreError as exc:
            _log.warning("consumer barrier: %s (the topic's fetches are checked)", exc)
            with self._lock:
                self._announced[topic] = _UNREADABLE
            return
        # Recorded before the ack is sent: from the ack on, no batch relies on a copy
        # without this epoch.
        self._note_announcement(topic, record)
        if self.state in (BarrierState.REGISTERING, BarrierState.IN_FORCE):
            self._store.ack_announcement_async(topic, self._ack(record))

    def _note_announcement(self, topic: str, record: AnnouncementRecord) -> None:
        with self._lock:
            if record.epoch > self._announced.get(topic, -1):
                self._announced[topic] = record.epoch

    def _ack(self, record: AnnouncementRecord) -> BarrierAck:
        return BarrierAck(
            id=self.id, announcement=record.id, epoch=record.epoch, acked_at=time.time()
        )

    def _on_marker(self, topic: str, stat: Any) -> None:
        zxid = -1 if stat is None else int(stat.mzxid)
        self._on_rewound(topic, zxid)  # first: acted on before any later batch is judged
        registered = self.state in (BarrierState.REGISTERING, BarrierState.IN_FORCE)
        if zxid >= 0 and self._group and registered:
            ack = RewindAck(id=self.id, group=self._group, zxid=zxid, acked_at=time.time())
            self._store.ack_rewind_async(topic, ack)

    # --- the rewinding member ----------------------------------------------------------

    def wait_rewind_acks(self, topic: str, zxid: int) -> list[str]:
        """After this member wrote the rewind marker (``zxid``): wait for the group's acks.

        Waits, at most one lease, until every other member of the group registered on
        ``topic`` acked a marker write at or after ``zxid``, or its registration is
        gone. Does nothing unless this consumer is in the barrier.

        Returns:
            The members still not acked when the wait ended (they learn of the rewind
            at their next check, as without the barrier).
        """
        if self.state is not BarrierState.IN_FORCE or not self._group:
            return []
        deadline = time.monotonic() + self.lease_s
        while True:
            try:
                members = {
                    cid
                    for cid, (reg, _czxid) in self._store.barrier_consumers(topic).items()
                    if reg.group == self._group and cid != self.id
                }
                acks = self._store.rewind_acks(topic) if members else {}
            except StoreError as exc:
                _log.warning("rewind of %s: cannot read the group's acks: %s", topic, exc)
                return ["?"]
            waiting = sorted(c for c in members if c not in acks or acks[c].zxid < zxid)
            if not waiting or time.monotonic() >= deadline:
                return waiting
            time.sleep(0.005)


def _chain(
    client: Any, path: str, with_data: bool, deliver: Callable[[Any, bytes | None], None]
) -> Watch:
    """Call ``deliver(stat, data)`` now and after every change of ``path``, until stopped.

    An exists-watch re-armed after each event, every call asynchronous (results on
    kazoo's thread, where ``deliver`` runs and must not block); ``stat`` ``None``: no
    node; ``data`` only ``with_data``. A read lost to a dropped connection is not retried
    here: the owner arms a new chain at the next generation of the session.
    """
    handle = Watch()

    def arm(_event: Any = None) -> None:
        if handle.stopped:
            return
        try:
            client.exists_async(path, watch=arm).rawlink(got_stat)
        except Exception as exc:  # the client is closing
            _log.debug("watch of %s not armed: %r", path, exc)

    def got_stat(result: Any) -> None:
        if handle.stopped:
            return
        try:
            stat = result.get()
        except Exception as exc:  # connection lost: armed again at the next generation
            _log.debug("watch of %s: %r", path, exc)
            return
        if stat is None or not with_data:
            deliver(stat, None)
            return
        try:
            client.get_async(path).rawlink(got_data)
        except Exception as exc:
            _log.debug("watch of %s: %r", path, exc)

    def got_data(result: Any) -> None:
        if handle.stopped:
            return
        try:
            data, stat = result.get()
        except NoNodeError:
            deliver(None, None)  # deleted meanwhile: the exists-watch reports it too
            return
        except Exception as exc:
            _log.debug("watch of %s: %r", path, exc)
            return
        deliver(stat, data)

    arm()
    return handle
