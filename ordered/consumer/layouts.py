"""Layout loading for the consumer: topic histories, their watcher, the fetch check.

Each subscribed or assigned topic has a :class:`TopicView`: its
:class:`~coordinator.kernel.history.TopicHistory` (read with :func:`load_history`, which syncs
ZooKeeper first) and a :class:`~linear_hash.gating.GateEvaluator` kept across reloads
(it caches satisfied gates). A :class:`~coordinator.kernel.history.HistoryWatcher` marks
topics dirty from kazoo's thread; they are reloaded on the poll thread.

**The fetch check** (``docs/protocol.md``, "Consumers and a new epoch"): a producer may
write a record under epoch ``e`` as soon as ``e`` is published, and the consumer may
fetch that record before its watch has shown it ``e``. Delivered under the older
history, such a record could pass a gate that ``e`` puts in its way. So before a fetched
batch is judged, a check that began after its records were fetched must have answered:
:meth:`LayoutTracker.begin_check` sends a ZooKeeper ``sync`` followed by a read of each
topic's znode, issued asynchronously on the one connection (one round trip, whatever
the batch's size), and :meth:`LayoutTracker.finish_check` compares each znode's
last-write zxid with the one seen before the copy was read: a publish or a seal that
completed before the check began changed it, and the history is read again before the
batch is judged. Records are never inspected for this: no header is needed.

**Coverage** bounds what this costs ZooKeeper. Just before a check is sent, the high
watermark librdkafka last saw for each assigned partition is noted (its *marks*);
every record below a mark was written before the check began, so by a producer that
had already read every epoch it could write under. When the check answers, the marks
become the partitions' *covered* offsets (:meth:`LayoutTracker.below_marks`): a later batch
whose records all lie below them needs no check of its own. A batch that does need
one waits for the next slot (:meth:`LayoutTracker.check_due_in`): at most one check
per ``(1 + topics) / ordered.layout.check.max.requests.per.s`` seconds, so the checks
send at most that many requests per second whatever the throughput. Coverage is
forgotten when a topic is read again (it may have been deleted and adopted anew) and
when a partition moves (:meth:`LayoutTracker.forget`).

**Rewinds** (``docs/consumer.md``, "Replays"): a member that moves the group's progress
back writes the group's rewind marker of the topic before it delivers a replayed record;
the check reads the marker's zxid too, at least once per slot, and a changed one is
reported by :meth:`LayoutTracker.take_rewound`.

**The consumer barrier** (``docs/consumer-barrier.md``, :mod:`ordered.consumer.barrier`):
while it is in force, :meth:`LayoutTracker.begin_check` answers at once without a
request (a *virtual* check, coverage as usual), and the markers are watched instead.
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient

from coordinator.kernel.errors import StateTransitionError, StoreError, TopicIdMismatchError
from coordinator.kernel.history import HistoryWatcher, SessionState, TopicHistory, load_history
from coordinator.kernel.store import GroupMemberRecord, LayoutStore, TopicRecord
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.topic_ids import TopicIds
from linear_hash.gating import EpochInfo, GateEvaluator
from ordered.consumer.barrier import BarrierClient
from ordered.consumer.checks import ANSWERED, AuditSpan, FetchCheck
from ordered.consumer.pacing import CheckPacer

__all__ = [
    "LAYOUT_TRANSITIONS",
    "AuditSpan",
    "FetchCheck",
    "LayoutState",
    "LayoutTracker",
    "TopicView",
    "check_layout_transition",
]


class LayoutState(enum.Enum):
    """Whether the consumer can trust its copy of the layouts.

    Transitions (:data:`LAYOUT_TRANSITIONS`; the consumer's one writer checks them)::

        TRUSTED --(session away, or a reload failed)--> HELD
        HELD --(connected again and every topic re-read)--> TRUSTED

    Attributes:
        TRUSTED: The layouts are current; gates decide as usual.
        HELD: They may be stale: every record of an ordered topic is held.
    """

    TRUSTED = "trusted"
    HELD = "held"


LAYOUT_TRANSITIONS: dict[LayoutState, frozenset[LayoutState]] = {
    LayoutState.TRUSTED: frozenset({LayoutState.HELD}),
    LayoutState.HELD: frozenset({LayoutState.TRUSTED}),
}
"""Every legal ``old -> new`` of :class:`LayoutState`."""


def check_layout_transition(old: LayoutState, new: LayoutState) -> None:
    """Raise :class:`~coordinator.kernel.errors.StateTransitionError` for an unlisted move."""
    if new not in LAYOUT_TRANSITIONS[old]:
        raise StateTransitionError(
            f"consumer layouts: {old.name} -> {new.name} is not a transition"
        )


_log = logging.getLogger(__name__)


@dataclass(slots=True)
class TopicView:
    """One topic's layout as this consumer knows it."""

    name: str
    history: TopicHistory
    gates: GateEvaluator | None = None
    zxid: int = -1  # the topic znode's mzxid before the history was read (-1: no node)
    rewind_zxid: int | None = None  # the group's rewind marker's mzxid (None: unread)
    # partition -> the span of the last audited offset (a cache, cleared on reload)
    audit: dict[int, AuditSpan] = field(default_factory=dict)

    @property
    def record(self) -> TopicRecord | None:
        """The topic record (``None``: not adopted)."""
        return self.history.record

    @property
    def ordered(self) -> bool:
        """Adopted and ordered: gates apply."""
        return self.gates is not None

    @property
    def compacted(self) -> bool:
        """Ordered and compacted: tombstone copies (KIP-253 section 9) may be in it."""
        record = self.history.record
        return self.gates is not None and record is not None and record.compacted

    @property
    def epochs(self) -> tuple[EpochInfo, ...]:
        """Every epoch, ascending (empty when not ordered)."""
        return self.history.epochs

    @property
    def layouts(self) -> Any:
        """Epoch -> layout."""
        return self.history.layouts

    @property
    def pending_givers(self) -> frozenset[int]:
        """Partitions that give keys away in a pending epoch."""
        return self.history.pending_givers

    @property
    def algorithm(self) -> str:
        """The key hash of the topic."""
        record = self.history.record
        return record.algorithm if record is not None else "murmur3"

    def open_limit(self, partition: int) -> float:
        """The partition's next gate not known to be open (``inf``: none)."""
        return self.gates.limit(partition) if self.gates is not None else float("inf")


def _zxid(stat: Any) -> int:
    """The last-write zxid of a znode's stat (-1: no node)."""
    return -1 if stat is None else int(stat.mzxid)


class LayoutTracker:
    """The topics this consumer reads, their histories, and the session state.

    Args:
        client: A started kazoo client (from :mod:`coordinator.kernel.zk`).
        root: The store root.
        check_timeout: How long :meth:`finish_check` waits for ZooKeeper.
        check_rate: ``ordered.layout.check.max.requests.per.s``: the most ZooKeeper
            requests per second the checks send (0: a check for every uncovered batch).
        on_reload: Called with ``(topic, newest epoch or -1)`` after each history read
            (the consumer's ``on_layout_reload`` event).
        on_change: Called on kazoo's thread (must not block) when a watched topic
            changed or the session state did: the consumer's fast path hands over.

    Attributes:
        verify_fetch: Run the fetch check (default ``True``). ``False`` exists only for
            the test that shows the check is what closes the race.
        covered: ``(topic, partition)`` -> the offset below which every record was
            written before a check that answered began.
    """

    last_check_virtual = False
    """Whether the last :meth:`begin_check` sent no request (the barrier vouched)."""

    def __init__(
        self,
        client: KazooClient,
        root: str,
        check_timeout: float,
        ids: TopicIds | None = None,
        group: str | None = None,
        check_rate: int = 0,
        on_reload: Callable[[str, int], None] | None = None,
        on_change: Callable[[], None] | None = None,
        member: GroupMemberRecord | None = None,
    ) -> None:
        self.client = client
        self.store = LayoutStore(client, root)
        self._ids = ids
        self._group = group
        # Written with the first group registration, and again after a reconnect (it is
        # ephemeral): what `ordered describe --group` names this member by.
        self._member = member
        self._member_wanted = False
        self.watcher = HistoryWatcher(self.store, on_change)
        self.topics: dict[str, TopicView] = {}
        self.verify_fetch = True
        self._on_reload = on_reload or (lambda _topic, _epoch: None)
        self._check_timeout = check_timeout
        self._generation = self.watcher.generation
        self._check_failed = False
        self.covered: dict[tuple[str, int], int] = {}
        # Bumped at every change of `covered` (what is derived from it is cached by it).
        self.covered_version = 0
        self._check_rate = check_rate
        self._last_sent = -math.inf
        self._pacer = CheckPacer()
        self._rewound: set[str] = set()
        # Guards the rewind zxids and `_rewound`: the barrier's marker watch writes
        # them on kazoo's thread.
        self._rewind_lock = threading.Lock()
        self.virtual_checks = 0  # checks the barrier answered without a request
        # The requested session timeout (kazoo keeps it in ms): the lease stays below half.
        session_s = getattr(client, "_session_timeout", 10_000) / 1000.0
        self.barrier = BarrierClient(self.store, self.watcher, group, session_s, self._note_rewound)

    @property
    def usable(self) -> bool:
        """Whether the layouts may be trusted now (session up, last check answered)."""
        return self.watcher.state is SessionState.CONNECTED and not self._check_failed

    def topic(self, name: str) -> TopicView:
        """The view of ``name``, read and watched on first use.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        view = self.topics.get(name)
        if view is None:
            view = TopicView(name, TopicHistory(name, None))
            try:
                # Registered before its layout is read: an announcement listed before
                # the registration waits for it, a later one is seen by this read.
                self._register_barrier(name)
                self._load(view)
            except TopicIdMismatchError:
                # Kept and watched (a watch starts dirty): every poll reads the topic
                # again and refuses again, until the layout is replaced.
                self.barrier.unregister_topic(name)
                self.topics[name] = view
                self.watcher.watch(name)
                raise
            self.topics[name] = view
            # The watch starts out dirty: the next service step reads the topic once
            # more, which covers a change between the read above and the arming.
            self.watcher.watch(name)
            if view.ordered and self._group:
                self._register_group(name)
        return view

    def _register_group(self, topic: str) -> None:
        """Register the group as an ordered group of ``topic`` (its trims wait for it)."""
        assert self._group is not None
        try:
            self.store.register_group(self._group, topic, time.time())
        except StoreError as exc:
            # Only the registered-groups-only trim setting reads it; commits still count.
            _log.warning("cannot register group on %s: %s", topic, exc)
        if not self._member_wanted:
            self._member_wanted = True
            self._register_member()

    def _register_member(self) -> None:
        """Write this consumer's member record (read by ``describe --group`` only)."""
        if self._member is None or not self._member_wanted:
            return
        try:
            self.store.register_member(self._member)
        except StoreError as exc:
            _log.debug("cannot register member %s: %s", self._member.member, exc)

    def _load(self, view: TopicView) -> None:
        # The znode's last-write zxid, read *before* the history: if a write lands in
        # between, the copy is newer than the zxid says and the next check reads it
        # again (harmless); the other order could miss a write. A zxid, unlike the
        # znode version, never repeats when a topic is deleted and adopted again.
        path = store_paths.topic_path(self.store.root, view.name)
        zxid = _zxid(self.store.exists(path))
        # Another topic id than the layout's raises TopicIdMismatchError (refused).
        history = load_history(self.store, view.name, ids=self._ids, previous=view.history)
        if view.rewind_zxid is None and self._group:
            # Read once: the fetch check compares later values with it.
            marker = self.rewind_path(view.name)
            view.rewind_zxid = _zxid(self.store.exists(marker))
        view.zxid = zxid
        self._forget_topic(view.name)
        view.history = history
        if not history.adopted:
            view.gates = None
        elif view.gates is None:
            view.gates = history.gates()
        else:
            view.gates.update(list(history.epochs))
        view.audit.clear()
        record = history.record
        # After the layout's sync and read: an announcement made before it is seen.
        self.barrier.read_announcement(view.name, -1 if record is None else record.epoch)
        self._on_reload(view.name, -1 if record is None else record.epoch)

    def reload_dirty(self) -> list[TopicView]:
        """Read again every topic the watcher marked (and all after a reconnect).

        Returns:
            The views that were read.

        Raises:
            StoreError: ZooKeeper is unreachable; the topics stay marked.
        """
        joined = self._join_barrier() if self.barrier.wants_registration() else []
        dirty = self.watcher.take_dirty()
        if self.watcher.generation != self._generation:
            self._generation = self.watcher.generation
            dirty |= set(self.topics)
            self._register_member()  # a new session lost the ephemeral record
        if joined:
            dirty -= {view.name for view in joined}
        return joined + (self.reload(dirty) if dirty else [])

    def reload(self, names: Iterable[str]) -> list[TopicView]:
        """Read ``names`` again; a failure marks them for the next call.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        done = []
        names = list(names)
        for i, name in enumerate(names):
            view = self.topics.get(name)
            if view is None:
                continue
            try:
                self._load(view)
            except (StoreError, TopicIdMismatchError) as exc:
                # A refused topic stays marked, so every poll refuses it again.
                if isinstance(exc, TopicIdMismatchError):
                    self.barrier.unregister_topic(name)
                for rest in names[i:]:
                    self.watcher.mark_dirty(rest)
                raise
            if self.barrier.missing(name):
                # Accepted again (its layout replaced) after a refusal withdrew its
                # registration: register anew, every topic, before relying again.
                self.barrier.lose()
            done.append(view)
        return done

    # --- rewinds ------------------------------------------------------------------------

    def rewind_path(self, topic: str) -> str:
        """The group's rewind marker of ``topic``.

        Raises:
            ValueError: The consumer has no group.
        """
        if not self._group:
            raise ValueError("a consumer without group.id has no rewind marker")
        return store_paths.rewind_path(self.store.root, self._group, topic)

    def mark_rewound(self, topic: str) -> None:
        """Tell the group's other members that progress on ``topic`` went back.

        A synchronous write (a rewind is rare, and must be visible before a replayed
        record is delivered); this consumer's own fetch check then ignores it.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        if not self._group:
            raise ValueError("a consumer without group.id has no rewind marker")
        stat = self.store.mark_rewound(self._group, topic)
        view = self.topics.get(topic)
        if view is not None:
            with self._rewind_lock:
                view.rewind_zxid = _zxid(stat)
        # The members that rely on the barrier see it by a watch; wait for their acks.
        late = self.barrier.wait_rewind_acks(topic, _zxid(stat))
        if late:
            _log.warning("rewind of %s: not acked in time by %s", topic, ", ".join(late))

    def _note_rewound(self, topic: str, zxid: int) -> None:
        """The barrier's marker watch (kazoo's thread) saw the marker at ``zxid``."""
        with self._rewind_lock:
            view = self.topics.get(topic)
            if view is None or view.rewind_zxid is None:
                return  # unread yet: the layout's read takes the marker's zxid then
            if zxid != view.rewind_zxid:
                view.rewind_zxid = zxid
                self._rewound.add(topic)

    @property
    def rewind_waiting(self) -> bool:
        """Whether a rewind was seen and not yet taken (:meth:`take_rewound`)."""
        return bool(self._rewound)

    def _register_barrier(self, name: str) -> None:
        try:
            self.barrier.register_topic(name)
        except StoreError as exc:
            _log.warning("consumer barrier: cannot register on %s: %s", name, exc)
            self.barrier.lose()  # not registered on every topic: checks stay on

    def take_rewound(self) -> set[str]:
        """The topics whose rewind marker changed since the last call."""
        with self._rewind_lock:
            out, self._rewound = self._rewound, set()
        return out

    # --- the fetch check ---------------------------------------------------------------

    def below_marks(self, positions: Iterable[Any]) -> bool:
        """Whether a batch that left librdkafka at ``positions`` needs no check of its own.

        Args:
            positions: ``TopicPartition``s of every assigned partition with its
                position (last record returned + 1; negative: none returned yet).

        Returns:
            ``True`` when every position is at or below its covered offset, so every
            record returned so far lies below it (a group member still reads its rewind
            markers once per slot: :meth:`rewind_read_due`).
        """
        covered = self.covered
        if not covered or not self.verify_fetch or self._rewound:
            return False
        for tp in positions:
            if tp.offset >= 0 and tp.offset > covered.get((tp.topic, tp.partition), -1):
                return False
        return True

    def rewind_read_due(self) -> bool:
        """Whether the group's rewind markers are due to be read (once per slot).

        Records below the marks know their epochs, but a rewind by another member can
        come at any time: it is read at least once per slot.
        """
        if not self._group:
            return False
        if self.barrier.relies(self.topics):
            return bool(self._rewound)  # the markers are watched: nothing to read
        since = time.monotonic() - self._last_sent
        if since < self._slot(0):
            return False  # sooner than the shortest slot (asked at every call)
        reads = self._rewind_reads()
        return reads > 0 and since >= self._slot(reads)

    def check_due_in(self) -> float:
        """Seconds until the next check may be sent (0: now)."""
        if not self.verify_fetch or self.barrier.relies(self.topics):
            return 0.0
        return self._pacer.due_in(self._interval())

    def _rewind_reads(self) -> int:
        """How many rewind markers a check reads (the group's ordered topics)."""
        if not self._group:
            return 0
        return sum(1 for view in self.topics.values() if view.ordered)

    def _interval(self) -> float:
        """The pacing slot: the check's requests at ``check_rate`` (0: no pacing)."""
        return self._slot(self._rewind_reads())

    def _slot(self, rewind_reads: int) -> float:
        """The slot of a check that reads ``rewind_reads`` rewind markers (0: no pacing)."""
        if self._check_rate <= 0:
            return 0.0
        return (1 + len(self.topics) + rewind_reads) / self._check_rate

    def forget(self, key: tuple[str, int]) -> None:
        """Forget the coverage of one partition (it moved: sought, revoked, paused)."""
        self.covered.pop(key, None)
        self.covered_version += 1

    def _forget_topic(self, name: str) -> None:
        for key in [k for k in self.covered if k[0] == name]:
            del self.covered[key]
        self.covered_version += 1

    def begin_check(self, marks: Iterable[tuple[tuple[str, int], int]] = ()) -> FetchCheck | None:
        """Send ``sync`` and a read of each topic's znode (no waiting).

        Every topic this consumer reads is checked, adopted or not: a topic adopted
        and expanded since our copy must not be taken for a plain one either.

        Args:
            marks: ``((topic, partition), high watermark)`` noted just before this
                call; they become covered offsets when the check answers.

        Returns:
            The check in flight, or ``None`` when there is nothing to check.
        """
        self.last_check_virtual = False
        if not self.verify_fetch or not self.topics:
            return None
        if self.barrier.relies(self.topics):
            # Every epoch of a record fetched so far is in our copies: no request.
            self.last_check_virtual = True
            self.virtual_checks += 1
            return FetchCheck(ANSWERED, (), tuple(marks), virtual=True)
        if self.watcher.state is not SessionState.CONNECTED:
            # kazoo would queue the requests until a reconnect: fail the check now.
            self._check_failed = True
            return None
        root = self.store.root
        names = list(self.topics)
        try:
            sync = self.client.sync_async(store_paths.topic_path(root, names[0]))
            reads = tuple(
                (name, self.client.exists_async(store_paths.topic_path(root, name)))
                for name in names
            )
            rewinds = tuple(
                (name, self.client.exists_async(self.rewind_path(name)))
                for name in names
                if self._group and self.topics[name].ordered
            )
        except Exception as exc:  # the connection is closing: the check fails
            _log.debug("fetch check not sent: %s", exc)
            self._check_failed = True
            return None
        self._last_sent = time.monotonic()
        self._pacer.sent(self._interval())
        return FetchCheck(sync, reads, tuple(marks), rewinds)

    def finish_check(self, check: FetchCheck | None) -> list[TopicView] | None:
        """Wait for ``check``; read again every topic whose znode changed since our copy.

        Returns:
            The views read again (empty: every copy was current), or ``None`` when
            ZooKeeper did not answer: nothing fetched may be judged by our copies
            (:attr:`usable` is ``False`` until a later :meth:`recover`).
        """
        if check is None:
            return [] if self.usable else None
        changed = []
        try:
            check.sync.get(timeout=self._check_timeout)
            for name, read in check.reads:
                stat = read.get(timeout=self._check_timeout)
                view = self.topics.get(name)
                # Against the copy now: it may have been read again since the send.
                if view is not None and _zxid(stat) != view.zxid:
                    changed.append(name)
            for name, read in check.rewinds:
                self._note_rewound(name, _zxid(read.get(timeout=self._check_timeout)))
        except Exception as exc:  # connection loss, timeout
            # kazoo's errors (ConnectionLoss, a timeout) carry no text: name the type.
            _log.warning(
                "layout check failed (records held until it succeeds): %s",
                str(exc) or type(exc).__name__,
            )
            self._check_failed = True
            return None
        reloaded: list[TopicView] = []
        if changed:
            try:
                reloaded = self.reload(changed)
            except StoreError as exc:
                _log.warning(
                    "layout reload failed (records held until it succeeds): %s",
                    str(exc) or type(exc).__name__,
                )
                self._check_failed = True
                return None
        # Only now, with every copy at least as new as the check: what lay below the
        # marks when it began is covered (after the reload, which forgets its topics).
        covered = self.covered
        for key, mark in check.marks:
            if key[0] in self.topics and mark > covered.get(key, -1):
                covered[key] = mark
        self.covered_version += 1
        return reloaded

    def _join_barrier(self) -> list[TopicView]:
        """Register in the consumer barrier (or leave it), then read every layout again.

        A failure leaves the barrier out of force: batches are checked until a later
        attempt (at a later service step) succeeds.

        Returns:
            The views read again.
        """
        started = self.barrier.register(list(self.topics))
        if started is None:
            return []
        try:
            done = self.reload(list(self.topics))
        except (StoreError, TopicIdMismatchError) as exc:
            _log.warning("consumer barrier: layouts not read after registering: %s", exc)
            return []
        self.barrier.registered(started)
        return done

    def recover(self) -> list[TopicView] | None:
        """After a failed check: read every topic again; ``None`` if that fails too."""
        try:
            done = self.reload(list(self.topics))
        except StoreError:
            return None
        self._check_failed = False
        return done

    def stop(self) -> None:
        """Stop the watches (never blocks)."""
        self.barrier.stop()
        self.watcher.stop()
