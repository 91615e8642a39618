"""The confluent API surface of :class:`OrderedConsumer`; the parts it is made of.

Every public method of ``confluent_kafka.Consumer`` is defined here explicitly: either
wrapped (:data:`WRAPPED`, the gates apply) or passed straight through
(:data:`PASSED_THROUGH`). There is no ``__getattr__`` fall-through, so a method a
future confluent adds cannot skip the gates: ``tests/unit/test_consumer_surface.py``
fails until it is listed here.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from typing import Any

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

from coordinator.kernel import identity
from coordinator.kernel.hooks import ConsumerEvents
from coordinator.kernel.positions import PositionService
from coordinator.kernel.store import GroupMemberRecord
from coordinator.kernel.topic_ids import TopicIds
from coordinator.kernel.zk import (
    close_client,
    close_client_within,
    exit_hook,
    make_client,
    start_client,
)
from ordered.consumer.announce import Announcer
from ordered.consumer.calls import POLL_BATCH, CallPath, ConsumerUpkeep, take
from ordered.consumer.counters import ConsumerCounters
from ordered.consumer.judge import GateChecker, GateDecider
from ordered.consumer.layouts import LayoutTracker
from ordered.consumer.partition import (
    NO_LIMIT,
    GateEvent,
    GateState,
    GateStatus,
)
from ordered.consumer.probe import LogStartProbe
from ordered.consumer.rebalance import Callback, RebalanceHooks
from ordered.consumer.replay import Rewinds
from ordered.consumer.state import Core
from ordered.consumer_config import ConsumerConfig, split_consumer_config
from ordered.listener import PartitionKeyRebalanceListener
from ordered.unbuilt import Unbuilt, quiet_kazoo, require_config

__all__ = ["CLOSE_TIMEOUT", "PASSED_THROUGH", "POLL_BATCH", "WRAPPED", "OrderedConsumer"]

WRAPPED = frozenset(
    {
        "assign",
        "assignment",
        "close",
        "commit",
        "committed",
        "consume",
        "incremental_assign",
        "incremental_unassign",
        "pause",
        "poll",
        "position",
        "resume",
        "seek",
        "store_offsets",
        "subscribe",
        "unassign",
        "unsubscribe",
    }
)
"""confluent methods the wrapper changes (gates, stashes, announcements apply)."""

PASSED_THROUGH = frozenset(
    {
        "cluster_id",
        "consumer_group_metadata",
        "get_watermark_offsets",
        "list_topics",
        "memberid",
        "offsets_for_times",
        "set_sasl_credentials",
    }
)
"""confluent methods the wrapper forwards unchanged (they deliver no record)."""

_log = logging.getLogger("ordered.consumer")

CLOSE_TIMEOUT = 3.0
"""Seconds ``close()`` (and an exit without it) waits for the ZooKeeper session to end."""


class OrderedConsumer:
    """A ``confluent_kafka.Consumer`` that delivers each key's records in order across layouts.

    Takes the same configuration dict as ``confluent_kafka.Consumer`` plus the
    ``ordered.`` settings of :mod:`ordered.consumer_config` (``ordered.zookeeper.connect``
    is required; ``ordered.hooks`` takes a list of hook objects, see
    :mod:`coordinator.kernel.hooks`). Methods have confluent's signatures, errors and callback
    thread.
    Topics that are not adopted (or adopted with ``ordered: false``) are consumed as
    with a plain consumer.

    Args:
        config: The configuration dict (positional only, as confluent's).
        **kwargs: Extra settings (``logger=...`` as confluent accepts), merged in.

    Attributes:
        violations: The number of records found to contradict the layout.

    Raises:
        ConfigError: A malformed ``ordered.`` setting.
        StoreError: ZooKeeper could not be reached.
    """

    _closed: bool = True  # until built (if ever: a subclass): RuntimeError, as confluent
    _closing = False  # inside close(): callbacks may still call the consumer
    _consumer: Consumer = Unbuilt("Consumer closed")  # type: ignore[assignment]
    _path: CallPath | None = Unbuilt("Consumer closed")  # type: ignore[assignment]

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        require_config(config, kwargs)
        self._closed = True  # until fully built: close() then has nothing to do
        self._path = None  # the kazoo thread may halt it from the start
        logger = kwargs.pop("logger", None)
        split: ConsumerConfig = split_consumer_config(config, kwargs)
        quiet_kazoo()
        settings = split.ordered
        extra = {"logger": logger} if logger is not None else {}
        self._consumer = Consumer(split.kafka, **extra)
        counters = ConsumerCounters()
        events = ConsumerEvents((counters, *settings.hooks), split.group_id)
        session_s = settings.zookeeper_session_timeout_ms / 1000.0
        self._zk = make_client(
            settings.zookeeper_connect,
            session_timeout_s=session_s,
            auth=settings.zookeeper_auth,
            acl_root=settings.zookeeper_root,
            tls=settings.zookeeper_tls,
        )
        member = identity.member_id()
        record = None
        if split.group_id:
            record = GroupMemberRecord(
                member=member,
                group=split.group_id,
                client_id=str(split.kafka.get("client.id", "rdkafka")),
                host=identity.host_name(),
                pid=os.getpid(),
                language="python",
                registered_at=time.time(),
            )
        try:
            start_client(self._zk, 15.0, "ordered.zookeeper.connect")
            layouts = LayoutTracker(
                self._zk,
                settings.zookeeper_root,
                check_timeout=min(session_s, 5.0),
                ids=TopicIds.for_client(split.kafka),
                group=split.group_id,
                check_rate=settings.layout_check_max_requests_per_s,
                on_reload=events.layout_reload,
                on_change=self._halt,
                member=record,
            )
        except Exception:
            close_client(self._zk)
            self._consumer.close()
            raise
        self._layouts = layouts
        core = Core(self._consumer, split, layouts, events, counters)
        self._core = core
        positions = None
        if settings.positions and split.group_id:
            positions = PositionService(self._zk, settings.zookeeper_root, split.group_id)
        self._probe = LogStartProbe(
            split.kafka, core.request_timeout, core.log_start_seen, clock=core.clock
        )
        self._decider = GateDecider(core, self._probe, prompt=positions is not None)
        self._checker = GateChecker(core, self._decider, positions, member, self._halt)
        self._announcer = Announcer(core, positions)
        self._rewinds = Rewinds(core, self._probe)
        self._upkeep = ConsumerUpkeep(
            core, self._decider, self._checker, self._announcer, self._rewinds
        )
        self._filter = self._upkeep.filter
        self._fetcher = self._upkeep.fetcher
        path = CallPath(core, self._upkeep, self._check_open)
        self._path = path
        self._hand_over = path.hand_over
        self._hooks = RebalanceHooks(
            self,
            self._upkeep.track,
            self._upkeep.drop,
            self._upkeep.announce_revoked,
            self._rewinds.positioned,
        )
        self._closed = False
        self._exit_hook = exit_hook(self, _close_at_exit)

    @property
    def violations(self) -> int:
        """The number of records found to contradict the layout (read-only)."""
        return self._core.counters.violations

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
        self._hand_over()
        self._hooks.set(on_assign, on_revoke, on_lost)
        self._core.listener = key_listener
        for name in topics:
            if not name.startswith("^"):
                self._layouts.topic(name)
        self._consumer.subscribe(
            topics,
            on_assign=self._hooks.assigned,
            on_revoke=self._hooks.revoked,
            on_lost=self._hooks.lost,
        )

    def unsubscribe(self) -> None:
        """Remove the subscription, as ``confluent_kafka.Consumer.unsubscribe``."""
        self._check_open()
        self._hand_over()
        self._consumer.unsubscribe()

    def assign(self, partitions: list[TopicPartition]) -> None:
        """Assign ``partitions`` (optionally with start offsets); gates still apply.

        Raises:
            KafkaException: From confluent.
            RuntimeError: The consumer is closed.
        """
        self._check_open()
        self._hand_over()
        # A new assignment restarts every partition at its given (or committed) offset:
        # old gate state, pauses included, does not carry over.
        for key in list(self._core.parts):
            self._upkeep.drop(key)
        # The layouts first: a partition the Kafka client reads while the consumer could
        # not load its topic would be given with no gate (C-GATE-1).
        self._upkeep.load(partitions)
        self._consumer.assign(partitions)
        self._upkeep.track(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """Add ``partitions`` to the assignment; gates apply to them."""
        self._check_open()
        self._hand_over()
        self._upkeep.load(partitions)
        self._consumer.incremental_assign(partitions)
        self._upkeep.track(partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """Remove ``partitions`` from the assignment."""
        self._check_open()
        self._hand_over()
        self._consumer.incremental_unassign(partitions)
        for tp in partitions:
            self._upkeep.drop((tp.topic, tp.partition))

    def unassign(self) -> None:
        """Remove the whole assignment."""
        self._check_open()
        self._hand_over()
        self._consumer.unassign()
        for key in list(self._core.parts):
            self._upkeep.drop(key)

    def assignment(self) -> list[TopicPartition]:
        """Return the current assignment, as confluent does."""
        self._check_open()
        result: list[TopicPartition] = self._consumer.assignment()
        return result

    # --- public API: consuming ---------------------------------------------------------

    def poll(self, timeout: float | None = None) -> Any:
        """Return one deliverable message, an error event, or ``None`` on timeout.

        Takes up to :data:`POLL_BATCH` records from librdkafka at once (those already
        fetched, never waiting for more): judged as a whole, they are handed out one
        per call by the fast path (:mod:`ordered.consumer.calls`), which pops the next
        one and does nothing else.

        Args:
            timeout: Seconds; ``None`` or negative waits forever (as confluent).

        Raises:
            RuntimeError: The consumer is closed.
            OrderViolationError: A misplaced record with ``ordered.violation.policy=raise``.
            Exception: Whatever a callback (``on_assign``..., the key listener) raised.
        """
        left = self._path.left  # type: ignore[union-attr]
        if left:
            message = left.pop()
            if not left:  # the batch is out: its delivery is recorded now, not at the next call
                self._path.account()  # type: ignore[union-attr]
            return message
        return self._path.poll(timeout)  # type: ignore[union-attr]

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """Return up to ``num_messages`` deliverable messages (possibly empty on timeout).

        As confluent's, it returns once ``num_messages`` are deliverable or the timeout
        ends (records held at a gate are not deliverable). Below :data:`POLL_BATCH`,
        they come from a judged batch, as ``poll()``'s do.

        Args:
            num_messages: The maximum number of messages (confluent's limits apply).
            timeout: Seconds; negative waits forever (as confluent).

        Raises:
            RuntimeError: The consumer is closed.
            ValueError: ``num_messages`` out of confluent's range.
            OrderViolationError: A misplaced record with ``ordered.violation.policy=raise``.
            Exception: Whatever a callback raised.
        """
        left = self._path.left  # type: ignore[union-attr]
        if left and type(num_messages) is int and 0 < num_messages <= len(left):
            out = [left.pop()] if num_messages == 1 else take(left, num_messages)
            if not left:  # as in poll(): the batch's delivery is recorded when it is out
                self._path.account()  # type: ignore[union-attr]
            return out
        return self._path.consume(num_messages, timeout)  # type: ignore[union-attr]

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        """Commit, with confluent's arguments (``message``, ``offsets``, ``asynchronous``).

        Boundary announcements due (a source partition delivered up to a boundary) run
        first, on this thread: ``on_partition_key_maybe_revoked``, then their commit.

        Raises:
            KafkaException: From confluent.
            RuntimeError: The consumer is closed.
        """
        self._check_open()
        self._hand_over()
        # KIP order: a source's maybe_revoked runs (and its boundary is committed)
        # before any commit can let a destination past that boundary.
        announced = self._announcer.run() if self._announcer.due() else []
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
                    self._core.remember_commit(tp.topic, tp.partition, tp.offset)
            self._announcer.application_committed(result)
            self._rewinds.committed(result)
        return result

    def store_offsets(self, *args: Any, **kwargs: Any) -> None:
        """Store offsets for a later commit (``enable.auto.offset.store=false``)."""
        self._check_open()
        self._hand_over()
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
        self._hand_over()
        result: list[TopicPartition] = self._consumer.position(partitions)
        for tp in result:
            part = self._core.parts.get((tp.topic, tp.partition))
            if part is None:
                continue
            first = self._fetcher.first_offset((tp.topic, tp.partition))
            if part.gate.stash:
                tp.offset = part.gate.stash[0].offset()
            elif part.position is not None:
                tp.offset = part.position
            elif first is not None:
                tp.offset = first
        return result

    def seek(self, partition: TopicPartition) -> None:
        """Set the consume position of an assigned partition, as confluent does.

        A partition held at a closed gate is released (its stash dropped) and its
        records are checked again as they arrive from the new position. A seek back
        replays in key order (``docs/consumer.md``, "Replays"): the gates are decided
        again, and a source's new position is committed first (``ordered.commit.mode``
        ``auto``) so the group's other members wait for the replay too.
        """
        self._check_open()
        self._hand_over()
        key = (partition.topic, partition.partition)
        part = self._core.parts.get(key)
        self._consumer.seek(partition)
        self._fetcher.take_partition(key)
        if part is not None:
            part.start = None
            part.position = partition.offset if partition.offset >= 0 else None
            self._rewinds.positioned([partition])
            self._core.fire(part, GateEvent.SOUGHT)

    def pause(self, partitions: list[TopicPartition]) -> None:
        """Pause ``partitions``; a gate never resumes a partition the application paused."""
        self._check_open()
        self._hand_over()
        self._core.pauses.application(partitions, self._core.parts, pause=True)
        for tp in partitions:
            key = (tp.topic, tp.partition)
            part = self._core.parts.get(key)
            if part is not None:
                # Taken from librdkafka but not delivered: kept for after the resume.
                kept = self._fetcher.take_partition(key)
                if kept:
                    self._core.fire(part, GateEvent.STASHED, records=kept)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """Resume ``partitions``; one held at a closed gate stays paused until it opens."""
        self._check_open()
        self._hand_over()
        self._core.pauses.application(partitions, self._core.parts, pause=False)

    def close(self) -> None:
        """Close the consumer (commits stored offsets with auto-commit) and ZooKeeper.

        The ZooKeeper part takes at most :data:`CLOSE_TIMEOUT` seconds. Calling it
        again does nothing. Raises what confluent's ``close()`` raises (an exception of
        ``on_revoke``...), once ZooKeeper and the log-start probe are closed too.
        """
        if self._closed or self._closing:
            return
        self._closing = True
        atexit.unregister(self._exit_hook)
        self._hand_over()  # what was handed out is stored (auto-commit at close)
        self._fetcher.clear()
        for part in self._core.parts.values():
            self._core.dropped(part)  # held partitions stop waiting (gauges go down)
        try:
            # librdkafka runs the revocation in here: the application's on_revoke may
            # still use this consumer (commit its offsets), as with confluent's.
            self._consumer.close()
        finally:
            self._closed = True
            self._closing = False
            self._layouts.stop()
            close_client_within(self._zk, CLOSE_TIMEOUT)
            self._probe.close()  # also when confluent's close raised

    def __enter__(self) -> OrderedConsumer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- passed through unchanged ------------------------------------------------------

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
        if self._closed:
            raise RuntimeError("Handle has been closed")  # confluent's words here
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

    def cluster_id(self, *args: Any, **kwargs: Any) -> Any:
        """Return the cluster id, as confluent does."""
        self._check_open()
        return self._consumer.cluster_id(*args, **kwargs)

    def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        """Set SASL credentials, as confluent does."""
        self._check_open()
        return self._consumer.set_sasl_credentials(*args, **kwargs)

    # --- public API: the ordering layer ----------------------------------------------

    @property
    def key_listener(self) -> PartitionKeyRebalanceListener | None:
        """The KIP-253 listener; settable, for consumers that ``assign`` partitions."""
        return self._core.listener

    @key_listener.setter
    def key_listener(self, listener: PartitionKeyRebalanceListener | None) -> None:
        self._core.listener = listener

    @property
    def metrics(self) -> dict[str, int]:
        """A snapshot of the counters (:data:`~ordered.consumer.counters.METRICS`).

        Delivered, held, gate checks, gates opened, blocks, announcements, violations,
        layout reloads and checks, tombstone copies dropped; plus ``blocked_partitions``,
        the partitions held at a closed gate now.
        """
        self._path.account()  # type: ignore[union-attr]
        out = self._core.counters.as_dict()
        out["blocked_partitions"] = sum(
            1 for p in self._core.parts.values() if p.gate.state is GateState.BLOCKED
        )
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
        for (topic, partition), part in sorted(self._core.parts.items()):
            gate = part.gate
            found = self._decider.waits_of(part) if waits else ()
            limit = None if gate.limit == NO_LIMIT or gate.limit < 0 else int(gate.limit)
            out.append(GateStatus(topic, partition, gate.state, limit, gate.held, found))
        return out

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")

    def _halt(self) -> None:
        # kazoo's thread (a watched topic changed, a position-service notice): the
        # fast path hands over at the next call.
        path = self._path
        if path is not None:
            path.halt()


def _close_at_exit(consumer: OrderedConsumer) -> None:
    """End ``consumer``'s ZooKeeper session promptly at exit if it is not closed.

    Leaves the confluent client to confluent, as a plain consumer's would be.
    """
    if consumer._closed:
        return
    consumer._closed = True
    consumer._layouts.stop()
    close_client_within(consumer._zk, 1.0)
