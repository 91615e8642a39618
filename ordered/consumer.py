"""``OrderedConsumer``: a drop-in wrapper of ``confluent_kafka.Consumer`` that keeps key order.

It reads each subscribed topic's layout history from the layout store (ZooKeeper,
``docs/protocol.md``) and applies the gate rule of ``docs/consumer.md``
(:mod:`linear_hash.gating`): a record of partition ``b`` at or past a boundary ``B_b(e)`` is
delivered only once the group has delivered and committed everything that must precede
it. A record that meets a closed gate is not returned: the partition is paused, and
that record with the rest of its partition's records from the same batch is kept in a
per-partition stash (at most one batch: a paused partition fetches nothing more, and
librdkafka resumes right after the last record it handed over). When the gate opens,
the stash is delivered first and the partition resumed. This is instead of seeking
back: librdkafka refetches a sought partition only at its next fetch cycle, up to a
second later. Closed gates are re-checked from the group's committed offsets in Kafka
every ``ordered.gate.poll.interval.ms`` while something is blocked.

A consumer whose position on a partition ``a`` reaches a boundary where keys of ``a``
moved elsewhere calls ``on_partition_key_maybe_revoked([a])`` at the start of its next
``poll``/``consume`` (the application has processed the records returned so far), then
commits ``a`` synchronously at that position, so the destination's consumer can
proceed. Before the first record past a gate is delivered, ``on_partition_key_assigned``
runs. Both callbacks run in the thread that calls ``poll``/``consume``.

New partitions: librdkafka's group rejoins onto new partitions at its periodic metadata
refresh, so an ordered consumer defaults ``topic.metadata.refresh.interval.ms`` to 2 s
(:data:`ordered.consumer_config.METADATA_REFRESH_MS`); the ZooKeeper watch on the
topic record makes the new epoch (and its gates) known at once, before any record of a
new partition can be fetched.

Commits and the guarantee:

* The group's *committed* offset is what gates read, so it is what the guarantee rests
  on. A record counts as "delivered" for the rest of the group once its offset is
  committed.
* With ``enable.auto.commit=true`` (the default), librdkafka commits the offsets of
  records returned to the application every ``auto.commit.interval.ms``; a crash may
  then lose records that were returned but not yet processed (at-most-once for those),
  exactly as with a plain consumer. Order is still kept: a destination never starts
  before its sources' tails were returned *and* committed.
* With ``enable.auto.commit=false``, the application commits as it likes; the only
  commits the wrapper adds are the boundary commits after
  ``on_partition_key_maybe_revoked``. Those mark everything returned from the source
  partition so far as done: process (or flush) those records in the callback, or before
  calling ``poll``/``consume`` again. A crash before the boundary commit re-delivers the
  source's tail to the replacement consumer, and the destination keeps waiting for it
  (at-least-once, order kept).
* ``enable.auto.offset.store`` is handled by the wrapper (librdkafka would store offsets
  of records a gate holds back): when it is true, the wrapper stores the offset of each
  record it returns; when false, ``store_offsets`` works as usual.
* KIP order holds whatever commits: until ``on_partition_key_maybe_revoked`` has run for
  a source boundary, the offset stored for that partition stays one below it (so an
  auto-commit or a ``commit()`` of stored offsets cannot open the destination's gate
  first), and :meth:`OrderedConsumer.commit` runs due announcements before it commits.
  While an epoch in which a partition gives keys away is pending (its boundary is not
  known yet), that partition's stored offset does not advance.
  Only ``commit(offsets=...)`` from another thread, offsets the application stores
  itself (``enable.auto.offset.store=false``) under auto-commit, or a commit by a plain
  client of the group can still open a gate before the callback ran (the order of
  records is kept even then; only the callback comes late).

Violations (a record whose key routes elsewhere under every layout that may have
placed it at its offset, or whose epoch header contradicts the boundaries) are counted
in :attr:`OrderedConsumer.violations` and logged, or raised as
:class:`~coordinator.errors.OrderViolationError` with ``ordered.violation.policy=raise``.

Limitations: a record with an epoch header newer than the consumer's history makes the
consumer re-read the history before delivering it, which closes the race between a new
epoch and the consumer's ZooKeeper watch; without headers (or with the header audit
off) that race is only as short as the watch's latency. A source partition whose
position passes a boundary only through a gap in offsets (transaction markers,
compaction) with no record at ``B - 1`` announces it when the next record arrives.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition
from kazoo.client import KazooClient, KazooState

from coordinator import identity  # issue 8: one identity builder
from coordinator.errors import OrderViolationError, StoreError
from coordinator.positions import PositionService, Progress
from coordinator.store import LayoutStore, TopicRecord, Watch
from coordinator.topic_ids import TopicIds  # issue 8: topic identity
from linear_hash import Layout
from linear_hash.gating import EpochInfo, GateEvaluator, Wait, epoch_range
from ordered.compaction import is_tombstone_copy
from ordered.consumer_config import ConsumerConfig, split_consumer_config
from ordered.listener import PartitionKeyRebalanceListener

__all__ = [
    "GateState",
    "GateStatus",
    "OrderedConsumer",
]

_log = logging.getLogger(__name__)

_NO_LIMIT = math.inf
_HOLD_ALL = -1.0  # a limit below every offset: every record takes the slow path
_LOG_START_TTL = 5.0  # seconds a log start offset is reused (it only grows)
_NOTIFY_SLICE = 0.01  # longest inner poll while a gate waits on the position service
_KEY_MEMO = 100_000  # keys whose partition is memoised per layout before the memo restarts

# (first offset, end offset, the header a producer writes, the layout, key -> partition)
_FastSpan = tuple[int, float, list[tuple[str, bytes]], Layout, dict[Any, int]]


class GateState(Enum):
    """The gate state of one assigned partition.

    A partition is paused (confluent ``pause``) exactly while it is ``BLOCKED`` or
    ``DRAINING``. Pausing makes librdkafka drop what it pre-fetched for the partition and
    restart, on resume, right after the last record it handed to the wrapper; the
    records of the current batch that could not be delivered are kept in the
    partition's *stash* (at most one batch: nothing more is fetched while paused) and
    delivered first. The stash saves the refetch after a seek, which librdkafka only
    starts at its next fetch cycle (up to a second).

    Transitions (all made by ``OrderedConsumer._set_state``):

    * (assigned) -> ``FREE`` or ``GATED``: from the topic's history.
    * ``FREE`` <-> ``GATED``: a new epoch puts a gate ahead of the partition, or the
      last gate ahead was found open.
    * ``GATED`` -> ``GATED`` / ``FREE``: a record reached the gate and it was open; the
      limit moves to the next gate not known to be open.
    * ``FREE`` / ``GATED`` / ``DRAINING`` -> ``BLOCKED``: a record reached a closed gate
      (or the layout became unavailable: ZooKeeper session suspended or lost): paused,
      the record and the rest of its batch stashed.
    * ``BLOCKED`` -> ``DRAINING``: a re-check found the gate open; the stash goes out
      first, through the same gate logic.
    * ``FREE`` / ``GATED`` -> ``DRAINING``: a callback raised (or a violation was raised)
      while a batch was being delivered: the batch is stashed for the next call.
    * ``DRAINING`` -> ``FREE`` / ``GATED``: the stash is empty: resumed.
    * ``BLOCKED`` / ``DRAINING`` -> ``FREE`` / ``GATED``: the application sought the
      partition: the stash is dropped and the partition resumed.
    * any -> (removed): the partition is revoked, lost or unassigned.
    """

    FREE = "free"
    GATED = "gated"
    BLOCKED = "blocked"
    DRAINING = "draining"


_PAUSED = frozenset({GateState.BLOCKED, GateState.DRAINING})


@dataclass(frozen=True, slots=True)
class GateStatus:
    """What :meth:`OrderedConsumer.gate_status` reports for one assigned partition.

    Attributes:
        topic: The topic.
        partition: The partition.
        state: Its :class:`GateState`.
        limit: The lowest boundary of a gate not known to be open (``None``: none).
        held: The offset it is paused at while ``BLOCKED``.
        waits: What the gate waits for (progress of other partitions, pending epochs).
    """

    topic: str
    partition: int
    state: GateState
    limit: int | None
    held: int | None
    waits: tuple[Wait, ...] = ()


@dataclass(slots=True)
class _Part:
    """Per-partition bookkeeping, owned by the poll thread."""

    topic: str
    partition: int
    state: GateState = GateState.FREE
    limit: float = _NO_LIMIT
    held: int | None = None
    start: int | None = None  # first offset fetched in this assignment
    position: int | None = None  # last delivered offset + 1
    announced: int = -1  # highest boundary announced (maybe_revoked + commit)
    hold: int | None = None  # a boundary reached but not announced: store below it
    stored: int | None = None  # the offset last stored for a commit
    assigned_upto: int = -1  # highest boundary on_partition_key_assigned ran for
    user_paused: bool = False
    reason: str = ""
    stash: list[Any] = field(default_factory=list)  # undelivered records, by offset


@dataclass(slots=True)
class _Topic:
    """One topic's layout as this consumer knows it."""

    name: str
    record: TopicRecord | None = None
    gates: GateEvaluator | None = None
    history: list[EpochInfo] = field(default_factory=list)
    layouts: dict[int, Layout] = field(default_factory=dict)
    # partition -> (first offset, end offset, layouts that may have placed records there)
    audit: dict[int, tuple[int, float, tuple[Layout, ...], int, int]] = field(default_factory=dict)
    watch: Watch | None = None
    # Partitions that give keys away in a pending epoch: their boundary is not known yet.
    pending_givers: frozenset[int] = frozenset()

    @property
    def ordered(self) -> bool:
        return self.gates is not None

    @property
    def compacted(self) -> bool:
        """Ordered and compacted: tombstone copies (KIP-253 section 9) may be in it."""
        return self.gates is not None and self.record is not None and self.record.compacted


class _KafkaView:
    """Committed offsets (one request per check) and log starts (lazily) from Kafka."""

    def __init__(self, owner: OrderedConsumer, topic: str, partitions: Iterable[int]) -> None:
        self._owner = owner
        self._topic = topic
        self._committed: dict[int, int] = {}
        self._starts: dict[int, int] = {}
        wanted = sorted(set(partitions))
        if wanted:
            got = owner._consumer.committed(
                [TopicPartition(topic, p) for p in wanted], timeout=owner._request_timeout
            )
            for tp in got:
                if tp.error is None and tp.offset >= 0:
                    self._committed[tp.partition] = tp.offset
        for (t, p), offset in owner._known_commits.items():
            if t == topic and offset > self._committed.get(p, -1):
                self._committed[p] = offset

    def committed(self, partition: int) -> int | None:
        return self._committed.get(partition)

    def log_start(self, partition: int) -> int:
        if partition not in self._starts:
            self._starts[partition] = self._owner._log_start(self._topic, partition)
        return self._starts[partition]


Callback = Callable[..., Any]


class OrderedConsumer:
    """A ``confluent_kafka.Consumer`` that delivers each key's records in order across layouts.

    Takes the same configuration dict as ``confluent_kafka.Consumer`` plus the
    ``ordered.`` settings of :mod:`ordered.consumer_config` (``ordered.zookeeper.connect``
    is required). Methods have confluent's signatures, errors and callback thread.
    Topics that are not adopted (or adopted with ``ordered: false``) are consumed as
    with a plain consumer.

    Args:
        config: The configuration dict.
        **kwargs: Extra settings (``logger=...`` as confluent accepts), passed on.

    Attributes:
        violations: The number of records found to contradict the layout.

    Raises:
        ConfigError: A malformed ``ordered.`` setting.
        StoreError: ZooKeeper could not be reached.
    """

    def __init__(self, config: dict[str, Any], **kwargs: Any) -> None:
        logger = kwargs.pop("logger", None)
        split: ConsumerConfig = split_consumer_config(config, kwargs)
        self._config = split
        settings = split.ordered
        self._interval = settings.gate_poll_interval_ms / 1000.0
        self._request_timeout = 10.0
        extra = {"logger": logger} if logger is not None else {}
        self._consumer = Consumer(split.kafka, **extra)
        self._zk = KazooClient(
            hosts=settings.zookeeper_connect,
            timeout=settings.zookeeper_session_timeout_ms / 1000.0,
        )
        try:
            self._zk.start(timeout=15)
        except Exception as exc:
            self._consumer.close()
            raise StoreError(f"ZooKeeper unreachable at {settings.zookeeper_connect}") from exc
        self._zk.add_listener(self._on_zk_state)
        self._store = LayoutStore(self._zk, settings.zookeeper_root)
        self._topic_ids = TopicIds.for_client(split.kafka)  # issue 8: topic identity
        self._lock = threading.Lock()  # guards the two sets the kazoo thread writes
        self._dirty: set[str] = set()
        self._zk_ok = True
        self._zk_was_lost = False
        self._topics: dict[str, _Topic] = {}
        self._parts: dict[tuple[str, int], _Part] = {}
        self._known_commits: dict[tuple[str, int], int] = {}
        self._announce: dict[tuple[str, int], int] = {}
        self._revoke_told: set[tuple[str, int, int]] = set()  # callback ran, commit pending
        self._listener: PartitionKeyRebalanceListener | None = None
        self._user_on_assign: Callback | None = None
        self._user_on_revoke: Callback | None = None
        self._user_on_lost: Callback | None = None
        self._next_check = 0.0
        self._poked = False  # set by a position-service watch: re-check gates now
        self._member = identity.member_id()  # issue 8: one identity builder
        self._positions: PositionService | None = None
        if settings.positions and split.group_id:
            self._positions = PositionService(self._zk, settings.zookeeper_root, split.group_id)
        self._declared: dict[str, dict[int, int]] = {}
        self._probe: Any = None  # a group-less client for log start offsets
        self._log_starts: dict[tuple[str, int], tuple[int, float]] = {}
        self._stale_applied = False
        self._single: str | None = None
        self._fast_spans: dict[int, _FastSpan] = {}
        self._key_memos: dict[tuple[str, Layout], dict[Any, int]] = {}
        self._closed = False
        self.violations = 0
        self._metrics: dict[str, int] = {
            "delivered": 0,
            "held": 0,
            "gate_checks": 0,
            "gates_opened": 0,
            "blocks": 0,
            "announcements": 0,
            "violations": 0,
            "layout_reloads": 0,
            "tombstone_copies_dropped": 0,
        }

    # --- public API: subscription and assignment ------------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
        key_listener: PartitionKeyRebalanceListener | None = None,
    ) -> None:
        """Subscribe to ``topics``, as ``confluent_kafka.Consumer.subscribe``.

        Args:
            topics: Topic names (a ``^`` prefix is a regex, as in confluent).
            on_assign: ``on_assign(consumer, partitions)``; ``consumer`` is this wrapper.
            on_revoke: ``on_revoke(consumer, partitions)``.
            on_lost: ``on_lost(consumer, partitions)``; without it, lost partitions go
                to ``on_revoke`` (as in confluent).
            key_listener: KIP-253's :class:`PartitionKeyRebalanceListener`.

        Raises:
            KafkaException: From confluent.
            RuntimeError: The consumer is closed.
            StoreError: ZooKeeper is unreachable.
        """
        self._check_open()
        self._user_on_assign = on_assign
        self._user_on_revoke = on_revoke
        self._user_on_lost = on_lost
        self._listener = key_listener
        for name in topics:
            if not name.startswith("^"):
                self._topic(name)
        self._consumer.subscribe(
            topics,
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def unsubscribe(self) -> None:
        """Remove the subscription, as ``confluent_kafka.Consumer.unsubscribe``."""
        self._check_open()
        self._consumer.unsubscribe()

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Assign ``partitions`` (optionally with start offsets); gates still apply.

        Raises:
            KafkaException: From confluent.
            RuntimeError: The consumer is closed.
        """
        self._check_open()
        # A new assignment restarts every partition at its given (or committed) offset:
        # old gate state, pauses included, does not carry over.
        for key in list(self._parts):
            self._drop(key)
        self._consumer.assign(partitions)
        self._track(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add ``partitions`` to the assignment; gates apply to them."""
        self._check_open()
        self._consumer.incremental_assign(partitions)
        self._track(partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Remove ``partitions`` from the assignment."""
        self._check_open()
        self._consumer.incremental_unassign(partitions)
        for tp in partitions:
            self._drop((tp.topic, tp.partition))

    def unassign(self) -> None:
        """Remove the whole assignment."""
        self._check_open()
        self._consumer.unassign()
        for key in list(self._parts):
            self._drop(key)

    def assignment(self) -> list[TopicPartition]:
        """Return the current assignment, as confluent does."""
        self._check_open()
        result: list[TopicPartition] = self._consumer.assignment()
        return result

    # --- public API: consuming ---------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Any:
        """Return one deliverable message, an error event, or ``None`` on timeout.

        Args:
            timeout: Seconds; ``None`` or negative waits forever (as confluent).

        Raises:
            RuntimeError: The consumer is closed.
            OrderViolationError: A misplaced record with ``ordered.violation.policy=raise``.
            Exception: Whatever a callback (``on_assign``..., the key listener) raised.
        """
        self._check_open()
        deadline = _deadline(timeout)
        while True:
            self._service()
            stashed = self._take_stash(1)
            if stashed:
                out = self._filter(stashed, from_stash=True)
                if out:
                    return out[0]
                continue
            message = self._consumer.poll(self._slice(deadline))
            if message is not None:
                out = self._filter([message])
                if out:
                    return out[0]
            if _expired(deadline):
                return None

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """Return up to ``num_messages`` deliverable messages (possibly empty on timeout).

        Args:
            num_messages: The maximum number of messages (confluent's limits apply).
            timeout: Seconds; negative waits forever (as confluent).

        Raises:
            RuntimeError: The consumer is closed.
            ValueError: ``num_messages`` out of confluent's range.
            OrderViolationError: A misplaced record with ``ordered.violation.policy=raise``.
            Exception: Whatever a callback raised.
        """
        self._check_open()
        if not 0 <= num_messages <= 1_000_000:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        deadline = _deadline(timeout)
        while True:
            self._service()
            stashed = self._take_stash(num_messages)
            if stashed:
                out = self._filter(stashed, from_stash=True)
                if out:
                    return out
                continue
            batch = self._consumer.consume(num_messages, self._slice(deadline))
            if batch:
                out = self._filter(batch)
                if out:
                    return out
            if _expired(deadline):
                return []

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        """Commit, with confluent's arguments (``message``, ``offsets``, ``asynchronous``).

        Boundary announcements due (a source partition delivered up to a boundary) run
        first, on this thread: ``on_partition_key_maybe_revoked``, then their commit.

        Raises:
            KafkaException: From confluent.
            RuntimeError: The consumer is closed.
        """
        self._check_open()
        # KIP order: a source's maybe_revoked runs (and its boundary is committed)
        # before any commit can let a destination past that boundary.
        announced = self._run_announcements() if self._announce else []
        try:
            result = self._consumer.commit(*args, **kwargs)
        except KafkaException as exc:
            stored_only = not args and "offsets" not in kwargs and "message" not in kwargs
            if announced and stored_only and exc.args[0].code() == KafkaError._NO_OFFSET:
                # The announcement just committed what was stored: the application's
                # commit succeeded, as it would have without the announcement.
                return None if kwargs.get("asynchronous", True) else announced
            raise
        if result:
            for tp in result:
                if tp.error is None and tp.offset >= 0:
                    self._remember_commit(tp.topic, tp.partition, tp.offset)
        return result

    def store_offsets(self, *args: Any, **kwargs: Any) -> None:
        """Store offsets for a later commit (``enable.auto.offset.store=false``)."""
        self._check_open()
        self._consumer.store_offsets(*args, **kwargs)

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> Any:
        """Return the group's committed offsets, as confluent does."""
        self._check_open()
        if timeout is None:
            return self._consumer.committed(partitions)
        return self._consumer.committed(partitions, timeout=timeout)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """Return the positions (last delivered offset + 1) of ``partitions``.

        A partition held at a closed gate reports the offset it is held at.
        """
        self._check_open()
        result: list[TopicPartition] = self._consumer.position(partitions)
        for tp in result:
            part = self._parts.get((tp.topic, tp.partition))
            if part is not None and part.stash:
                tp.offset = part.stash[0].offset()
            elif part is not None and part.position is not None:
                tp.offset = part.position
        return result

    def seek(self, partition: TopicPartition) -> None:
        """Set the consume position of an assigned partition, as confluent does.

        A partition held at a closed gate is released (its stash dropped) and its
        records are checked again as they arrive from the new position.
        """
        self._check_open()
        part = self._parts.get((partition.topic, partition.partition))
        self._consumer.seek(partition)
        if part is not None:
            part.start = None
            part.position = partition.offset if partition.offset >= 0 else None
            part.stash = []
            if part.state in _PAUSED:
                self._set_state(part, self._open_state(part), "sought")

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Pause ``partitions``; a gate never resumes a partition the application paused."""
        self._check_open()
        self._consumer.pause(partitions)
        for tp in partitions:
            part = self._parts.get((tp.topic, tp.partition))
            if part is not None:
                part.user_paused = True

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Resume ``partitions``; one held at a closed gate stays paused until it opens."""
        self._check_open()
        go = []
        for tp in partitions:
            part = self._parts.get((tp.topic, tp.partition))
            if part is not None:
                part.user_paused = False
                if part.state in _PAUSED:
                    continue
            go.append(tp)
        if go:
            self._consumer.resume(go)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> Any:
        """Return ``(low, high)`` offsets of ``partition``, as confluent does."""
        self._check_open()
        if timeout is None:
            return self._consumer.get_watermark_offsets(partition, cached=cached)
        return self._consumer.get_watermark_offsets(partition, timeout=timeout, cached=cached)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Request metadata from the cluster, as confluent does."""
        self._check_open()
        return self._consumer.list_topics(topic, timeout)

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> Any:
        """Look up offsets by timestamp, as confluent does."""
        self._check_open()
        if timeout is None:
            return self._consumer.offsets_for_times(partitions)
        return self._consumer.offsets_for_times(partitions, timeout=timeout)

    def memberid(self) -> Any:
        """Return the group member id, as confluent does."""
        self._check_open()
        return self._consumer.memberid()

    def consumer_group_metadata(self) -> Any:
        """Return the group metadata for a transactional producer, as confluent does."""
        self._check_open()
        return self._consumer.consumer_group_metadata()

    def close(self) -> None:
        """Close the consumer (commits stored offsets with auto-commit) and ZooKeeper.

        Calling it again does nothing.
        """
        if self._closed:
            return
        self._closed = True
        try:
            self._consumer.close()
            if self._probe is not None:
                self._probe.close()
        finally:
            for topic in self._topics.values():
                if topic.watch is not None:
                    topic.watch.stop()
            with contextlib.suppress(Exception):
                self._zk.stop()
                self._zk.close()

    def __enter__(self) -> OrderedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __getattr__(self, name: str) -> Any:
        # Anything not wrapped behaves as confluent's (set_sasl_credentials, ...).
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self._consumer, name)

    # --- public API: the ordering layer ----------------------------------------------

    @property
    def key_listener(self) -> PartitionKeyRebalanceListener | None:
        """The KIP-253 listener; settable, for consumers that ``assign`` partitions."""
        return self._listener

    @key_listener.setter
    def key_listener(self, listener: PartitionKeyRebalanceListener | None) -> None:
        self._listener = listener

    @property
    def metrics(self) -> dict[str, int]:
        """Counters: delivered, held, gate checks, gates opened, blocks, announcements..."""
        out = dict(self._metrics)
        out["blocked_partitions"] = sum(
            1 for p in self._parts.values() if p.state is GateState.BLOCKED
        )
        out["violations"] = self.violations
        return out

    def gate_status(self, waits: bool = True) -> list[GateStatus]:
        """Describe the gate of every assigned partition of an ordered topic.

        Args:
            waits: Also read the group's committed offsets to list what each blocked
                partition waits on.

        Returns:
            One :class:`GateStatus` per assigned partition, sorted.
        """
        self._check_open()
        out = []
        for (topic, partition), part in sorted(self._parts.items()):
            found: tuple[Wait, ...] = ()
            state = self._topics.get(topic)
            if waits and part.held is not None and state is not None and state.gates:
                gates = state.gates
                view = _KafkaView(self, topic, gates.required_partitions(partition, part.held))
                found = tuple(gates.waiting_on(partition, part.held, view))
            limit = None if part.limit == _NO_LIMIT or part.limit < 0 else int(part.limit)
            out.append(GateStatus(topic, partition, part.state, limit, part.held, found))
        return out

    # --- rebalance callbacks (poll thread) ------------------------------------------------

    def _on_assign(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        self._track(partitions)
        if self._user_on_assign is not None:
            self._user_on_assign(self, partitions)

    def _on_revoke(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        # Boundary commits still pending for revoked partitions go out while the
        # assignment is still ours.
        keys = {(tp.topic, tp.partition) for tp in partitions}
        self._run_announcements(only=keys)
        for key in keys:
            self._drop(key)
        if self._user_on_revoke is not None:
            self._user_on_revoke(self, partitions)

    def _on_lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self._drop((tp.topic, tp.partition))
        if self._user_on_lost is not None:
            self._user_on_lost(self, partitions)
        elif self._user_on_revoke is not None:
            self._user_on_revoke(self, partitions)

    # --- ZooKeeper (kazoo thread: never blocks) ---------------------------------------

    def _on_zk_state(self, state: str) -> None:
        with self._lock:
            if state == KazooState.CONNECTED:
                self._zk_ok = True
                # After a lost session every watch may have missed changes.
                self._dirty.update(self._topics)
            else:
                self._zk_ok = False
                self._zk_was_lost = self._zk_was_lost or state == KazooState.LOST

    def _on_topic_change(self, topic: str) -> Callable[[TopicRecord | None], None]:
        def changed(_record: TopicRecord | None) -> None:
            with self._lock:
                self._dirty.add(topic)

        return changed

    # --- layout loading (poll thread) ---------------------------------------------

    def _topic(self, name: str) -> _Topic:
        state = self._topics.get(name)
        if state is None:
            state = _Topic(name)
            self._topics[name] = state
            try:  # issue 8: topic identity (a refused first load still gets its watch)
                self._load(state)
            finally:
                state.watch = self._store.watch_topic(name, self._on_topic_change(name))
            if state.record is not None and state.record.ordered and self._config.group_id:
                self._register_group(name)
        return state

    def _register_group(self, topic: str) -> None:
        """Register the group as an ordered group of ``topic`` (once; its trims wait for it)."""
        try:
            self._store.register_group(self._config.group_id, topic, time.time())
        except StoreError as exc:
            # Only the registered-groups-only trim setting reads it; commits still count.
            _log.warning("cannot register group on %s: %s", topic, exc)

    def _load(self, state: _Topic) -> None:
        record = self._store.get_topic(state.name)
        self._topic_ids.verify(record)  # issue 8: topic identity (another topic id: refused)
        self._metrics["layout_reloads"] += 1
        state.record = record
        if record is None or not record.ordered:
            state.gates = None
            state.history = []
            state.layouts = {}
            state.pending_givers = frozenset()
        else:
            history = [EpochInfo.from_record(e) for e in self._store.epochs(state.name)]
            if state.gates is None:
                state.gates = GateEvaluator(history)
            else:
                state.gates.update(history)
            state.history = list(state.gates.history)
            state.pending_givers = frozenset(
                a for e in state.history if not e.sealed for a, _b in e.edges
            )
            state.layouts = {
                e.epoch: Layout(record.initial, e.to_active or record.initial, e.epoch)
                for e in state.history
            }
        state.audit.clear()
        self._fast_spans.clear()
        for part in self._parts.values():
            if part.topic == state.name:
                self._relimit(part)
                self._check_marks(part)

    def _reload_dirty(self) -> None:
        with self._lock:
            dirty = self._dirty
            self._dirty = set()
        names = sorted(dirty)  # issue 8: topic identity (a refused load keeps the rest dirty)
        for i, name in enumerate(names):
            state = self._topics.get(name)
            if state is not None:
                try:  # issue 8
                    self._load(state)
                except BaseException:  # issue 8
                    with self._lock:  # issue 8
                        self._dirty.update(names[i:])  # issue 8
                    raise  # issue 8

    # --- per-partition state ---------------------------------------------------------

    def _track(self, partitions: Iterable[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key in self._parts:
                continue
            part = _Part(tp.topic, tp.partition)
            self._parts[key] = part
            self._topic(tp.topic)
            self._relimit(part)
        self._update_single()

    def _update_single(self) -> None:
        """Remember the one assigned topic, if there is exactly one (the fast path)."""
        topics = {topic for topic, _partition in self._parts}
        single = topics.pop() if len(topics) == 1 and not self._stale_applied else None
        if single != self._single:
            self._fast_spans.clear()
        self._single = single

    def _drop(self, key: tuple[str, int]) -> None:
        part = self._parts.pop(key, None)
        self._update_single()
        self._announce.pop(key, None)
        if part is not None and part.state in _PAUSED and not part.user_paused:
            # librdkafka keeps an application pause across a reassignment: a partition
            # that comes back must not stay paused by a gate we no longer track.
            with contextlib.suppress(KafkaException, RuntimeError):
                self._consumer.resume([TopicPartition(part.topic, part.partition)])

    def _open_state(self, part: _Part) -> GateState:
        state = self._topics.get(part.topic)
        if state is None or state.gates is None:
            return GateState.FREE
        return GateState.FREE if state.gates.limit(part.partition) == _NO_LIMIT else GateState.GATED

    def _relimit(self, part: _Part) -> None:
        """Recompute the limit of a partition after a new history."""
        if part.state is GateState.BLOCKED:
            self._next_check = 0.0  # re-check it at once against the new history
            return
        self._set_state(part, self._unheld_state(part), "history")

    def _set_state(
        self,
        part: _Part,
        new: GateState,
        reason: str,
        held: int | None = None,
        limit: int | None = None,
    ) -> None:
        """The one place a partition's gate state changes (see :class:`GateState`).

        Args:
            part: The partition.
            new: The state to enter.
            reason: Why, for the debug log and :meth:`OrderedConsumer.gate_status`.
            held: ``BLOCKED`` only: the offset of the record held back.
            limit: Lower the limit of an open state (default: the next gate of the
                partition not known to be open), so the record at ``limit`` runs the
                gate crossing again.
        """
        old = part.state
        if new is GateState.BLOCKED:
            assert held is not None
            part.held = held
            part.limit = _HOLD_ALL
            if old is not GateState.BLOCKED:
                self._metrics["blocks"] += 1
        else:
            part.held = None
            state = self._topics.get(part.topic)
            gates = state.gates if state is not None else None
            part.limit = gates.limit(part.partition) if gates is not None else _NO_LIMIT
            if limit is not None:
                part.limit = min(part.limit, limit)
        tp = TopicPartition(part.topic, part.partition)
        if new in _PAUSED and old not in _PAUSED:
            self._consumer.pause([tp])
        elif new not in _PAUSED and old in _PAUSED and not part.user_paused:
            self._consumer.resume([tp])
        part.state = new
        part.reason = reason
        if old is not new:
            _log.debug("%s[%d]: %s -> %s (%s)", part.topic, part.partition, old, new, reason)

    def _unheld_state(self, part: _Part) -> GateState:
        """The state of a partition that is not held at a gate."""
        return GateState.DRAINING if part.stash else self._open_state(part)

    def _stash(self, part: _Part, messages: list[Any]) -> None:
        """Keep undelivered records of ``part`` (in offset order) and pause it."""
        merged = {m.offset(): m for m in part.stash}
        merged.update((m.offset(), m) for m in messages)
        part.stash = [merged[o] for o in sorted(merged)]
        if part.state not in _PAUSED:
            self._set_state(part, GateState.DRAINING, "stashed")

    def _take_stash(self, limit: int) -> list[Any]:
        """Stashed records of partitions whose gate is open, oldest first, up to ``limit``."""
        out: list[Any] = []
        for part in self._parts.values():
            if len(out) >= limit:
                break
            if part.state is GateState.DRAINING and part.stash and not part.user_paused:
                take = part.stash[: limit - len(out)]
                del part.stash[: len(take)]
                out += take
        return out

    # --- the service step at the start of every poll/consume -----------------------------

    def _service(self) -> None:
        if self._dirty:
            self._reload_dirty()
        if not self._zk_ok and not self._stale_applied:
            self._stale_applied = True
            # Records may have been routed by an epoch we cannot see: hold everything
            # of ordered topics from the next record on.
            for part in self._parts.values():
                state = self._topics.get(part.topic)
                if state is not None and state.ordered and part.state is not GateState.BLOCKED:
                    part.limit = _HOLD_ALL
                    self._single = None  # keeps every batch on the checked path
        elif self._zk_ok and self._stale_applied:
            self._stale_applied = False
            with self._lock:
                self._dirty.update(self._topics)
            self._reload_dirty()
            for part in self._parts.values():
                if part.state is not GateState.BLOCKED:
                    self._set_state(part, self._unheld_state(part), "layout available")
            self._update_single()
            self._next_check = 0.0
        if self._announce:
            self._run_announcements()
        if self._poked:
            self._poked = False
            self._next_check = 0.0
        if time.monotonic() >= self._next_check:
            self._recheck_blocked()

    def _recheck_blocked(self) -> None:
        self._next_check = time.monotonic() + self._interval
        if not self._zk_ok:
            return
        by_topic: dict[str, list[_Part]] = {}
        for part in self._parts.values():
            if part.state is GateState.BLOCKED:
                by_topic.setdefault(part.topic, []).append(part)
        for topic in [t for t in self._declared if t not in by_topic]:
            self._declare(topic, {})
        for topic, parts in by_topic.items():
            state = self._topics[topic]
            gates = state.gates
            if gates is None:
                for part in parts:
                    self._set_state(part, self._unheld_state(part), "not ordered")
                continue
            needed: set[int] = set()
            for part in parts:
                assert part.held is not None
                needed |= gates.required_partitions(part.partition, part.held)
            view = self._view(topic, needed)
            if view is None:
                continue
            waits: dict[int, int] = {}
            for part in parts:
                assert part.held is not None
                self._metrics["gate_checks"] += 1
                if gates.may_deliver(part.partition, part.held, view):
                    self._metrics["gates_opened"] += 1
                    # The limit stays at the held record, so its delivery runs the
                    # crossing (and on_partition_key_assigned) like any other record.
                    self._set_state(part, self._unheld_state(part), "gate opened", limit=part.held)
                elif self._positions is not None:
                    for wait in gates.waiting_on(part.partition, part.held, view):
                        if wait.partition >= 0:
                            waits[wait.partition] = max(waits.get(wait.partition, 0), wait.offset)
            self._declare(topic, waits)

    def _declare(self, topic: str, waits: dict[int, int]) -> None:
        """Tell the position service what this consumer waits on, and watch it."""
        if self._positions is None or self._declared.get(topic, {}) == waits:
            return
        if waits:
            self._declared[topic] = waits
        else:
            self._declared.pop(topic, None)
        self._positions.declare(topic, self._member, waits)
        for partition in waits:
            self._positions.watch(topic, partition, self._on_progress)

    def _on_progress(self, _progress: Progress) -> None:
        # kazoo's thread: only raise a flag; the poll thread re-checks from Kafka.
        self._poked = True

    # --- boundary announcements: maybe_revoked, then a synchronous commit ----------------

    def _check_marks(self, part: _Part) -> None:
        """Schedule an announcement if the position reached a boundary of a source."""
        if part.position is None:
            return
        state = self._topics.get(part.topic)
        if state is None or state.gates is None:
            return
        known = self._known_commits.get((part.topic, part.partition), -1)
        start = part.start if part.start is not None else part.position
        for mark in state.gates.source_marks(part.partition):
            # Only a boundary this assignment delivered up to: a consumer that started
            # past it has nothing of the tail to announce.
            if max(part.announced, known) < mark <= part.position and start < mark:
                self._announce[(part.topic, part.partition)] = part.position
                if part.hold is None:
                    part.hold = mark
                return

    def _run_announcements(self, only: set[tuple[str, int]] | None = None) -> list[Any]:
        """Call ``on_partition_key_maybe_revoked``, then commit the boundary positions.

        A listener exception leaves the announcement pending (the next call runs it
        again). A failed commit (a rebalance in progress, the coordinator moving) is
        logged and retried at the next call without calling the listener again; a
        revoked partition's announcement is dropped with the partition.

        Returns:
            The boundary positions committed now.
        """
        due = {
            key: pos
            for key, pos in self._announce.items()
            if (only is None or key in only) and key in self._parts
        }
        done: list[Any] = []
        if not due:
            return done
        tps = [TopicPartition(t, p, pos) for (t, p), pos in sorted(due.items())]
        fresh = [tp for tp in tps if (tp.topic, tp.partition, tp.offset) not in self._revoke_told]
        if self._listener is not None and fresh:
            self._listener.on_partition_key_maybe_revoked(fresh)
        self._revoke_told.update((tp.topic, tp.partition, tp.offset) for tp in tps)
        try:
            result = self._consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as exc:
            _log.warning("boundary commit failed, retrying at the next call: %s", exc)
            return done
        for tp in result or ():
            key = (tp.topic, tp.partition)
            if tp.error is not None:
                _log.warning("boundary commit of %s[%d] failed: %s", *key, tp.error)
                continue
            self._metrics["announcements"] += 1
            self._announce.pop(key, None)
            held = self._parts.get(key)
            if held is not None and held.hold is not None:
                held.hold = None
                held.stored = tp.offset
                if self._config.store_offsets:
                    self._consumer.store_offsets(offsets=[tp])
            self._revoke_told.discard((tp.topic, tp.partition, tp.offset))
            self._remember_commit(tp.topic, tp.partition, tp.offset)
            if self._positions is not None:
                self._positions.publish_if_wanted(tp.topic, tp.partition, tp.offset)
            part = self._parts.get(key)
            if part is not None:
                part.announced = max(part.announced, tp.offset)
            done.append(tp)
        return done

    def _log_start(self, topic: str, partition: int) -> int:
        """The log start offset of a partition, at most :data:`_LOG_START_TTL` old.

        Asked of a separate, fetch-less client: on the consumer's own connection a
        ListOffsets request waits behind the broker's long-poll of the running fetch
        (up to ``fetch.wait.max.ms``). A log start only grows, so an older value is a
        safe lower bound.
        """
        key = (topic, partition)
        now = time.monotonic()
        cached = self._log_starts.get(key)
        if cached is not None and now - cached[1] < _LOG_START_TTL:
            return cached[0]
        known = cached[0] if cached is not None else 0
        if self._probe is None:
            config = {
                k: v
                for k, v in self._config.kafka.items()
                if k not in ("on_commit", "stats_cb", "enable.auto.commit")
            }
            self._probe = Consumer({**config, "enable.auto.commit": False})
        try:
            low, _high = self._probe.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self._request_timeout
            )
            known = max(known, int(low))
        except KafkaException as exc:
            # Unknown counts as "nothing more trimmed": the safe reading.
            _log.debug("log start of %s[%d] unknown: %s", topic, partition, exc)
        self._log_starts[key] = (known, now)
        return known

    def _view(self, topic: str, partitions: Iterable[int]) -> _KafkaView | None:
        """Read the group's progress; ``None`` (gates stay closed) if Kafka did not answer."""
        try:
            return _KafkaView(self, topic, partitions)
        except KafkaException as exc:
            _log.warning("cannot read committed offsets of %s (gates stay closed): %s", topic, exc)
            return None

    def _remember_commit(self, topic: str, partition: int, offset: int) -> None:
        key = (topic, partition)
        if offset > self._known_commits.get(key, -1):
            self._known_commits[key] = offset

    # --- filtering a fetched batch -------------------------------------------------

    def _filter(self, batch: list[Any], from_stash: bool = False) -> list[Any]:
        """Return the deliverable part of ``batch``; stash the rest at closed gates.

        Args:
            batch: Messages from librdkafka, or from a stash (``from_stash``).
            from_stash: The batch comes from stashes of partitions whose gate opened.
        """
        if self._dirty:
            # A new epoch must be known before any record of this batch is judged.
            self._reload_dirty()
        settings = self._config.ordered
        audit = settings.key_audit or settings.header_audit
        if not from_stash and self._single is not None:
            fast = self._filter_fast(batch, self._single)
            if fast is not None:
                return fast
        return self._filter_checked(batch, audit, from_stash)

    def _filter_fast(self, batch: list[Any], topic: str) -> list[Any] | None:
        """The whole batch when nothing in it can reach a gate or fail an audit, else ``None``.

        One topic is assigned: within a batch a partition's offsets grow, so if each
        partition's last record is below its limit, every record is. The audits here
        only confirm the common case (one layout in force at the offset, the header
        exactly as the producer writes it, the key's partition from a memo); anything
        else returns ``None`` and :meth:`_filter_checked` judges the batch.
        ``Message.topic()`` builds a new string per call, so it is not called here.
        """
        settings = self._config.ordered
        state = self._topics[topic]
        if state.compacted:
            return None  # every record is looked at: tombstone copies are dropped
        header_audit = settings.header_audit and state.ordered
        key_audit = settings.key_audit and state.ordered
        last: dict[int, Any] = {}
        if not (header_audit or key_audit):
            for m in batch:
                last[m.partition()] = m
        else:
            spans = self._fast_spans
            for m in batch:
                last[m.partition()] = m
            every = settings.audit_every
            for m in batch if every == 1 else batch[::every]:
                partition = m.partition()
                offset = m.offset()
                if offset is None:
                    # An error event (no offset): the checked path passes it on.
                    return None
                span = spans.get(partition)
                if span is None or not span[0] <= offset < span[1]:
                    span = self._fast_span(state, partition, offset)
                    if span is None:
                        return None
                    spans[partition] = span
                if header_audit:
                    headers = m.headers()
                    if headers is not None and headers != span[2]:
                        return None
                if key_audit:
                    key = m.key()
                    if key is not None:
                        memo = span[4]
                        placed = memo.get(key)
                        if placed is None:
                            if len(memo) >= _KEY_MEMO:
                                memo.clear()
                            placed = memo[key] = self._place(state, span[3], key)
                        if placed != partition:
                            return None
        parts = self._parts
        offsets: dict[tuple[str, int], int] = {}
        for partition, m in last.items():
            part = parts.get((topic, partition))
            if part is None or m.error() is not None:
                return None
            offset = m.offset()
            if offset >= part.limit or part.state in _PAUSED:
                return None
            offsets[(topic, partition)] = offset
        starting = {p for p in last if parts[(topic, p)].start is None}
        if starting:
            # First batch of an assignment: where it starts decides which boundaries
            # this consumer crossed (callbacks), so find each partition's first record.
            for m in batch:
                partition = m.partition()
                if partition in starting:
                    parts[(topic, partition)].start = m.offset()
                    starting.discard(partition)
                    if not starting:
                        break
        self._delivered(offsets)
        self._metrics["delivered"] += len(batch)
        return batch

    def _fast_span(self, state: _Topic, partition: int, offset: int) -> _FastSpan | None:
        """The offsets around ``offset`` where one layout is in force, for the fast audit."""
        below, above, layouts, lo, hi = self._audit_span(state, partition, offset)
        if len(layouts) != 1 or lo != hi:
            return None
        layout = layouts[0]
        algorithm = state.record.algorithm if state.record is not None else "murmur3"
        memo = self._key_memos.setdefault((algorithm, layout), {})
        header = [(self._config.ordered.header_name, str(layout.epoch).encode())]
        return below, above, header, layout, memo

    def _filter_checked(self, batch: Sequence[Any], audit: bool, from_stash: bool) -> list[Any]:
        """Judge every record: audit, gates, stashes."""
        parts = self._parts
        out: list[Any] = []
        last: dict[tuple[str, int], int] = {}
        crossed: list[tuple[_Part, int]] = []
        withheld: dict[tuple[str, int], list[Any]] = {}
        try:
            for m in batch:
                if m.error() is not None:
                    out.append(m)
                    continue
                key = (m.topic(), m.partition())
                part = parts.get(key)
                offset = m.offset()
                if part is None:
                    # Not tracked (an assignment we were not told of): deliver as is.
                    out.append(m)
                    last[key] = offset
                    continue
                if part.start is None:
                    part.start = offset
                if (
                    key in withheld
                    or part.state is GateState.BLOCKED
                    or (part.state is GateState.DRAINING and not from_stash)
                ):
                    # Behind a held record, or fetched before the pause took effect.
                    withheld.setdefault(key, []).append(m)
                    continue
                if offset >= part.limit and not self._reach_gate(part, offset, crossed):
                    withheld.setdefault(key, []).append(m)
                    continue
                if m.value() is None and self._topics[key[0]].compacted and is_tombstone_copy(m):
                    # For compaction only: the key's newer value lives elsewhere. Passed
                    # over like a delivered record, so positions and commits cover it.
                    self._metrics["tombstone_copies_dropped"] += 1
                    last[key] = offset
                    continue
                if (
                    audit
                    and self._topics[key[0]].ordered
                    and self._audit(part, m, offset)
                    and offset >= part.limit
                    and not self._reach_gate(part, offset, crossed)
                ):
                    # The audit read a newer history that puts a gate in the way.
                    withheld.setdefault(key, []).append(m)
                    continue
                out.append(m)
                last[key] = offset
            if crossed and self._listener is not None:
                tps = [TopicPartition(p.topic, p.partition, b) for p, b in crossed]
                self._listener.on_partition_key_assigned(tps)
        except BaseException:
            # Nothing of this batch is delivered: stash it all for the next call, and
            # make the gates crossed in it run their callback again.
            for part, boundary in crossed:
                part.limit = min(part.limit, boundary)
            by_key: dict[tuple[str, int], list[Any]] = {}
            for m in batch:
                if m.error() is None:
                    by_key.setdefault((m.topic(), m.partition()), []).append(m)
            for key, messages in by_key.items():
                if key in parts:
                    self._stash(parts[key], messages)
            raise
        for part, boundary in crossed:
            part.assigned_upto = max(part.assigned_upto, boundary)
        for key, messages in withheld.items():
            self._metrics["held"] += len(messages)
            self._stash(parts[key], messages)
        if from_stash:
            for part in list(parts.values()):
                if part.state is GateState.DRAINING and not part.stash:
                    self._set_state(part, self._open_state(part), "stash delivered")
        if last:
            self._delivered(last)
        self._metrics["delivered"] += len(out)
        return out

    def _delivered(self, last: dict[tuple[str, int], int]) -> None:
        store = []
        for key, offset in last.items():
            part = self._parts.get(key)
            stored: int | None = offset + 1
            if part is not None:
                part.position = offset + 1
                state = self._topics[key[0]]
                if state.ordered:
                    self._check_marks(part)
                if part.hold is not None:
                    # KIP order: no commit (auto-commit, or commit() of the stored
                    # offsets) may reach a source's boundary before maybe_revoked ran;
                    # the announcement stores the position itself.
                    stored = min(offset + 1, part.hold - 1)
                elif key[1] in state.pending_givers:
                    # The boundary of a pending epoch is not known yet: the stored
                    # offset does not move until the seal tells where it is.
                    stored = part.stored
                if stored is not None:
                    part.stored = stored
            if stored is not None:
                store.append(TopicPartition(key[0], key[1], stored))
        if self._config.store_offsets and store:
            self._consumer.store_offsets(offsets=store)

    def _reach_gate(self, part: _Part, offset: int, crossed: list[tuple[_Part, int]]) -> bool:
        """A record at or past the partition's limit arrived: open the gate or hold it."""
        state = self._topics[part.topic]
        gates = state.gates
        if not self._zk_ok or self._stale_applied:
            self._set_state(part, GateState.BLOCKED, "layout unavailable", held=offset)
            self._next_check = 0.0
            return False
        if gates is None:
            self._set_state(part, self._unheld_state(part), "not ordered")
            return True
        self._metrics["gate_checks"] += 1
        view = self._view(part.topic, gates.required_partitions(part.partition, offset))
        if view is None or not gates.may_deliver(part.partition, offset, view):
            self._set_state(part, GateState.BLOCKED, "gate closed", held=offset)
            # With the position service, re-check at once: that declares the interest
            # and sets the watches that make later re-checks prompt.
            self._next_check = (
                0.0 if self._positions is not None else time.monotonic() + self._interval
            )
            return False
        start = part.start if part.start is not None else offset
        for boundary, _epoch in gates.gates_of(part.partition):
            if start <= boundary <= offset and boundary > part.assigned_upto:
                crossed.append((part, boundary))
        self._set_state(part, self._unheld_state(part), "gate open")
        return True

    # --- violation audit ----------------------------------------------------------------

    def _audit(self, part: _Part, message: Any, offset: int) -> bool:
        """Check one record against the layout; count, log or raise a contradiction.

        Returns:
            ``True`` if the record's epoch header made the history be read again.
        """
        reloaded = False
        state = self._topics[part.topic]
        settings = self._config.ordered
        problem = ""
        header_epoch: int | None = None
        if settings.header_audit:
            headers = message.headers()
            if headers:
                value = next((v for k, v in headers if k == settings.header_name), None)
                if value is not None:
                    try:
                        header_epoch = int(value)
                    except (TypeError, ValueError):
                        problem = f"epoch header {value!r} is not an epoch number"
                    if (
                        header_epoch is not None
                        and state.gates is not None
                        and header_epoch > state.gates.latest_epoch
                    ):
                        # A producer already routes by an epoch our watch has not shown
                        # us yet: read the history before deciding anything about it.
                        self._load(state)
                        reloaded = True
        span = state.audit.get(part.partition)
        if span is None or not span[0] <= offset < span[1]:
            span = self._audit_span(state, part.partition, offset)
            state.audit[part.partition] = span
        _lo_off, _hi_off, layouts, lo, hi = span
        key = message.key() if settings.key_audit else None
        if header_epoch is not None and not problem:
            if not lo <= header_epoch <= hi:
                problem = f"epoch header {header_epoch} outside epochs {lo}..{hi} at this offset"
            elif key is not None:
                layout = state.layouts.get(header_epoch)
                if layout is not None and self._place(state, layout, key) != part.partition:
                    problem = f"key routes elsewhere under its header epoch {header_epoch}"
        if (
            not problem
            and key is not None
            and layouts
            and all(self._place(state, layout, key) != part.partition for layout in layouts)
        ):
            problem = f"key routes elsewhere under every epoch {lo}..{hi}"
        if problem:
            self.violations += 1
            self._metrics["violations"] += 1
            if settings.violation_policy == "raise":
                raise OrderViolationError(part.topic, part.partition, offset, problem)
            _log.warning(
                "order violation in %s[%d]@%d: %s", part.topic, part.partition, offset, problem
            )
        return reloaded

    @staticmethod
    def _place(state: _Topic, layout: Layout, key: Any) -> int:
        algorithm = state.record.algorithm if state.record is not None else "murmur3"
        return layout.partition_for(key, algorithm)

    @staticmethod
    def _audit_span(
        state: _Topic, partition: int, offset: int
    ) -> tuple[int, float, tuple[Layout, ...], int, int]:
        """The offsets around ``offset`` with the same epoch range, and its layouts."""
        lo, hi = epoch_range(state.history, partition, offset)
        below = 0
        above: float = math.inf
        for info in state.history:
            bound = info.boundaries.get(partition)
            if bound is None:
                continue
            if bound <= offset:
                below = max(below, bound)
            else:
                above = min(above, bound)
        layouts = tuple(state.layouts[e] for e in range(lo, hi + 1) if e in state.layouts)
        return below, above, layouts, lo, hi

    # --- helpers ----------------------------------------------------------------------

    def _slice(self, deadline: float | None) -> float:
        """How long the next inner poll may wait: short while a gate needs re-checks."""
        busy = self._announce or any(p.state in _PAUSED for p in self._parts.values())
        step = self._interval if busy or self._dirty else 1.0
        if busy and self._positions is not None:
            # A progress notification is only seen between inner polls: keep them short.
            step = min(step, _NOTIFY_SLICE)
        if deadline is None:
            return step
        return max(0.0, min(step, deadline - time.monotonic()))

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")


def _deadline(timeout: float | None) -> float | None:
    if timeout is None or timeout < 0:
        return None
    return time.monotonic() + timeout


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline
