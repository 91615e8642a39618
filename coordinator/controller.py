"""The controller: adopts topics and runs expansions and shrinks through the barrier.

A transition (``docs/protocol.md``, "A transition") is a state machine over
:class:`Step`; every step reads what is already written and skips what is done, so a
controller that dies anywhere leaves a state that :meth:`Controller.resume` (the
``ordered coordinator`` daemon, or the same command again) completes.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final

from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from coordinator.errors import (
    LayoutError,
    NotAdoptedError,
    OrderedError,
    StoreAuthError,
    StoreError,
    TransitionInProgressError,
)
from coordinator.identity import process_identity
from coordinator.kafka_admin import KafkaAdmin, KafkaTopic, UnknownTopicError
from coordinator.store import EpochRecord, LayoutStore, ProducerRecord, TopicRecord
from coordinator.topic_ids import check_topic_id
from linear_hash import ALGORITHMS, key_flow

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "EXPIRY_GRACE_S",
    "BarrierStatus",
    "BarrierTimeoutError",
    "Controller",
    "Description",
    "Step",
    "TransitionResult",
    "barrier_status",
]

EXPIRY_GRACE_S: Final = 1.0
"""Seconds added to a gone producer's ``delivery_timeout_ms`` before it stops counting."""

DEFAULT_DELIVERY_TIMEOUT_MS: Final = 300_000
"""librdkafka's default ``delivery.timeout.ms``: assumed for a listed producer whose
registration (and so its declared timeout) was never seen by any controller."""

_log = logging.getLogger(__name__)

_REPORT_EVERY_S: Final = 5.0
# The watches wake the barrier on every registration and ack change; this only bounds
# how late a missed watch event (e.g. across a reconnect) is noticed.
_RECHECK_S: Final = 1.0

Progress = Callable[[str], None]


class BarrierTimeoutError(OrderedError):
    """The barrier did not pass in time; the epoch stays pending for a later resume."""


class Step(Enum):
    """The steps of one transition, in order.

    Transitions (the only ones; :meth:`Controller._run` applies them)::

        PARTITIONS -> PUBLISH -> PRODUCERS -> BARRIER -> SEAL -> DONE

    A new transition enters at ``PARTITIONS``; resuming a pending epoch enters at
    ``PRODUCERS`` (its partitions exist and it is published).

    Attributes:
        PARTITIONS: CreatePartitions up to the target if Kafka has fewer.
        PUBLISH: Read the receiving partitions' end offsets; write the pending epoch
            and the topic record in one transaction.
        PRODUCERS: Record in the epoch which producers registered before it.
        BARRIER: Wait for each listed producer's ack, or its expiry plus its delivery
            timeout and :data:`EXPIRY_GRACE_S`.
        SEAL: Read the giving partitions' end offsets; write the epoch sealed and the
            topic record without ``pending`` in one transaction.
        DONE: Sealed.
    """

    PARTITIONS = "partitions"
    PUBLISH = "publish"
    PRODUCERS = "producers"
    BARRIER = "barrier"
    SEAL = "seal"
    DONE = "done"


_NEXT: Final = {
    Step.PARTITIONS: Step.PUBLISH,
    Step.PUBLISH: Step.PRODUCERS,
    Step.PRODUCERS: Step.BARRIER,
    Step.BARRIER: Step.SEAL,
    Step.SEAL: Step.DONE,
}


@dataclass
class _Transition:
    """The working state of one transition (owned by the thread running it)."""

    topic: str
    target: int
    deadline: float
    record: TopicRecord
    version: int
    kafka_partitions: int
    epoch: EpochRecord | None = None
    step: Step = Step.PARTITIONS
    resumed: bool = False
    created_partitions: bool = False
    started: float = field(default_factory=time.monotonic)
    session_lost: threading.Event = field(default_factory=threading.Event)

    @property
    def current_epoch(self) -> EpochRecord:
        if self.epoch is None:
            raise AssertionError(f"step {self.step.value} needs a published epoch")
        return self.epoch


@dataclass(frozen=True)
class TransitionResult:
    """The outcome of a completed transition.

    Attributes:
        topic: The topic.
        epoch: The sealed epoch.
        from_active: Active count before.
        to_active: Active count after.
        boundaries: The epoch's boundaries (partition -> offset).
        producers: The producers the barrier waited for.
        expired: Those that expired instead of acking (id -> unix time seen gone).
        created_partitions: Whether this run created Kafka partitions.
        resumed: Whether this run resumed an epoch that was already published.
        seconds: How long the run took.
    """

    topic: str
    epoch: int
    from_active: int
    to_active: int
    boundaries: dict[int, int]
    producers: tuple[str, ...]
    expired: dict[str, float]
    created_partitions: bool
    resumed: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "topic": self.topic,
            "epoch": self.epoch,
            "from_active": self.from_active,
            "to_active": self.to_active,
            "boundaries": {str(p): o for p, o in self.boundaries.items()},
            "producers": list(self.producers),
            "expired": dict(self.expired),
            "created_partitions": self.created_partitions,
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Description:
    """What ``describe`` reports about a topic.

    Attributes:
        topic: The topic record (``None``: the topic exists in Kafka, not adopted).
        kafka_partitions: The partition count in Kafka.
        epochs: Every epoch, ascending.
        producers: Registered producers by id.
        acks: Producer ids that acked the pending epoch (empty if none is pending).
        kafka_topic_id: Kafka's topic id of the topic.
    """

    topic: TopicRecord | None
    kafka_partitions: int
    epochs: tuple[EpochRecord, ...]
    producers: dict[str, ProducerRecord]
    acks: tuple[str, ...]
    kafka_topic_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "adopted": self.topic is not None,
            "topic": None if self.topic is None else self.topic.to_dict(),
            "kafka_partitions": self.kafka_partitions,
            "kafka_topic_id": self.kafka_topic_id,
            "epochs": [e.to_dict() for e in self.epochs],
            "producers": {k: v.to_dict() for k, v in self.producers.items()},
            "pending_acks": list(self.acks),
        }


class Controller:
    """Runs adoptions and transitions against a layout store and a Kafka cluster.

    Thread-safe as far as the store and Kafka are: every call keeps its state local.

    Args:
        store: The layout store.
        admin: Kafka admin helpers.
        progress: Called with one line of progress at a time (e.g. while waiting).
        cancel: When set, a running barrier stops waiting (as on a timeout: the epoch
            stays pending); the daemon sets it on shutdown.
    """

    def __init__(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
    ) -> None:
        self._store = store
        self._admin = admin
        self._progress: Progress = progress or (lambda _message: None)
        self._cancel = cancel or threading.Event()
        self._identity = process_identity()
        self._forged_seen: set[tuple[str, int, str]] = set()
        self._proven: dict[tuple[str, int], set[str]] = {}
        self._handlers: dict[Step, Callable[[_Transition], None]] = {
            Step.PARTITIONS: self._step_partitions,
            Step.PUBLISH: self._step_publish,
            Step.PRODUCERS: self._step_producers,
            Step.BARRIER: self._step_barrier,
            Step.SEAL: self._step_seal,
        }

    @property
    def store(self) -> LayoutStore:
        """The layout store."""
        return self._store

    # --- adoption ------------------------------------------------------------------

    def adopt(
        self,
        topic: str,
        algorithm: str = "murmur3",
        ordered: bool = True,
        replace_existing: bool = False,
    ) -> TopicRecord:
        """Adopt ``topic`` with its current partition count as ``initial``.

        The layout is bound to Kafka's topic id of ``topic``
        (:attr:`TopicRecord.topic_id`). Idempotent: adopting again with the same
        algorithm and ``ordered`` returns the existing record. A record of an older
        version (no topic id) with the same settings is bound to the topic's current
        id, unless Kafka's topic has fewer partitions than the layout (then it cannot
        be the adopted topic).

        With ``replace_existing`` (``ordered adopt --replace``), an existing layout of
        another topic id or other settings is replaced: every epoch is dropped and
        the topic adopted afresh, with an epoch numbered after the old last one.
        Refused while an epoch of the adopted topic is pending; a pending epoch of a
        topic that was deleted (another id in Kafka now) does not hold it up.

        Raises:
            LayoutError: Unknown algorithm, or adopted already with other settings.
            TopicIdMismatchError: Adopted for another topic id (without
                ``replace_existing``).
            TransitionInProgressError: An epoch is pending (``replace_existing``), or
                the record changed meanwhile.
            UnknownTopicError: The topic does not exist in Kafka.
            OrderedKafkaError: Kafka failed.
            StoreError: ZooKeeper failed or holds a bad record.
        """
        if algorithm not in ALGORITHMS:
            raise LayoutError(
                f"unknown algorithm {algorithm!r} (known: {', '.join(sorted(ALGORITHMS))})"
            )
        kafka = self._kafka_topic(topic)
        existing, version = self._store.get_topic_and_version(topic)
        if existing is not None:
            same = existing.algorithm == algorithm and existing.ordered == ordered
            if same and existing.topic_id == kafka.topic_id:
                return existing
            if not replace_existing:
                return self._adopt_again(existing, version, kafka, same)
            self._check_no_live_pending(existing, kafka, "re-adopt")
        compacted = self._admin.is_compacted(topic)
        now = time.time()
        # An epoch number never names two layouts of one topic name, so a new adoption
        # continues after the old epochs (a client that missed the change still sees
        # a newer record, and no cached gate of an old epoch matches a new one).
        first = self._store.first_epoch(topic) if existing is None else existing.epoch + 1
        record = TopicRecord(
            topic=topic,
            topic_id=kafka.topic_id,
            initial=kafka.partitions,
            active=kafka.partitions,
            epoch=first,
            pending=None,
            physical=kafka.partitions,
            algorithm=algorithm,
            ordered=ordered,
            compacted=compacted,
            adopted_at=now,
        )
        epoch = EpochRecord(
            topic=topic,
            epoch=first,
            initial=kafka.partitions,
            from_active=kafka.partitions,
            to_active=kafka.partitions,
            state="sealed",
            edges=(),
            boundaries={},
            producers=(),
            expired={},
            created_at=now,
            sealed_at=now,
        )
        if existing is None:
            self._store.create_topic(record, epoch)
            self._progress(f"adopted {topic}: {kafka.partitions} partitions, {algorithm}")
        else:
            self._store.replace_topic(record, epoch, version)
            self._progress(
                f"re-adopted {topic} (topic id {kafka.topic_id}): {kafka.partitions} "
                f"partitions, {algorithm}, from epoch {first}; the layout of "
                f"{_id_text(existing.topic_id)} is gone"
            )
        result = self._store.get_topic(topic)
        if result is None:
            raise StoreError(f"topic {topic} vanished right after its adoption")
        return result

    def _kafka_topic(self, topic: str) -> KafkaTopic:
        """Kafka's description of ``topic``; a deleted adopted topic says what to do."""
        try:
            return self._admin.describe_topic(topic)
        except UnknownTopicError:
            if self._store.get_topic(topic) is None:
                raise
            raise UnknownTopicError(
                f"topic {topic} does not exist in Kafka, but a layout of it is adopted (the "
                f"topic was deleted?): remove the layout with `ordered unadopt {topic}`, or "
                f"create the topic again and run `ordered adopt {topic} --replace`"
            ) from None

    def _adopt_again(
        self, existing: TopicRecord, version: int, kafka: KafkaTopic, same: bool
    ) -> TopicRecord:
        """``adopt`` of an adopted topic without ``--replace``: bind, or refuse."""
        topic = existing.topic
        check_topic_id(existing, kafka.topic_id)
        if not same:
            raise LayoutError(
                f"topic {topic} is already adopted with algorithm {existing.algorithm}, "
                f"ordered {str(existing.ordered).lower()} (re-adopt it with other settings: "
                f"ordered adopt {topic} --replace)"
            )
        # A record of an older version: bind it to the topic Kafka has now, if it can be
        # the adopted one (Kafka never takes partitions away).
        if kafka.partitions < existing.physical:
            raise LayoutError(
                f"topic {topic} has {kafka.partitions} partitions in Kafka, fewer than the "
                f"{existing.physical} of its layout: it is not the topic that was adopted "
                f"(deleted and created again?); re-adopt it with `ordered adopt {topic} "
                f"--replace` or remove the layout with `ordered unadopt {topic}`"
            )
        bound = self._store.bind_topic_id(topic, kafka.topic_id, version)
        self._progress(f"bound the layout of {topic} to topic id {kafka.topic_id}")
        return bound

    def _check_no_live_pending(
        self, record: TopicRecord, kafka: KafkaTopic | None, what: str
    ) -> None:
        """Refuse to ``what`` a topic whose pending epoch belongs to the live topic."""
        if record.pending is None:
            return
        gone = kafka is None or (record.topic_id is not None and record.topic_id != kafka.topic_id)
        if gone:
            return  # the pending epoch's topic was deleted: nothing to wait for
        raise TransitionInProgressError(
            f"cannot {what} {record.topic}: epoch {record.pending} (to {record.active} "
            f"partitions) is pending; it completes with `ordered coordinator` running, or "
            f"run `ordered expand {record.topic} --to {record.active}` (or shrink) to "
            "complete it first"
        )

    def unadopt(self, topic: str) -> TopicRecord | None:
        """Remove ``topic``'s layout: its record and every epoch (``ordered unadopt``).

        Producers then route the topic as plain Kafka does and consumers read it
        without gates. Idempotent: a topic not adopted is left alone. Refused while an
        epoch of the adopted topic is pending; Kafka is asked only then, and a topic
        gone from Kafka (or created again, with another id) does not hold it up.

        Returns:
            The record removed, ``None`` when the topic was not adopted.

        Raises:
            TransitionInProgressError: An epoch is pending, or the record changed
                meanwhile.
            OrderedKafkaError: Kafka failed (asked only when an epoch is pending).
            StoreError: ZooKeeper failed or holds a bad record.
        """
        existing, version = self._store.get_topic_and_version(topic)
        if existing is None:
            return None
        if existing.pending is not None:
            kafka: KafkaTopic | None
            try:
                kafka = self._admin.describe_topic(topic)
            except UnknownTopicError:
                kafka = None
            self._check_no_live_pending(existing, kafka, "unadopt")
        self._store.remove_topic(topic, version)
        self._progress(f"unadopted {topic}: its layout (up to epoch {existing.epoch}) is gone")
        return existing

    # --- transitions ---------------------------------------------------------------

    def expand(self, topic: str, to: int, timeout: float = 60.0) -> TransitionResult:
        """Grow ``topic``'s active partition count to ``to``.

        Raises:
            LayoutError: ``to`` is not above the active count.
            NotAdoptedError: The topic is not adopted.
            TopicIdMismatchError: The layout was adopted for another topic id.
            UnknownTopicError: The topic does not exist in Kafka.
            TransitionInProgressError: Another transition is pending or running.
            BarrierTimeoutError: The barrier did not pass within ``timeout``; the epoch
                stays pending.
            OrderedKafkaError: Kafka failed.
            StoreError: ZooKeeper failed or holds a bad record.
        """
        return self._transition(topic, to, "expand", timeout)

    def shrink(self, topic: str, to: int, timeout: float = 60.0) -> TransitionResult:
        """Shrink ``topic``'s active partition count to ``to`` (never below ``initial``).

        Raises:
            LayoutError: ``to`` is not below the active count, or below ``initial``.
            NotAdoptedError: The topic is not adopted.
            TopicIdMismatchError: The layout was adopted for another topic id.
            UnknownTopicError: The topic does not exist in Kafka.
            TransitionInProgressError: Another transition is pending or running.
            BarrierTimeoutError: The barrier did not pass within ``timeout``; the epoch
                stays pending.
            OrderedKafkaError: Kafka failed.
            StoreError: ZooKeeper failed or holds a bad record.
        """
        return self._transition(topic, to, "shrink", timeout)

    def resume(self, topic: str, timeout: float = 60.0) -> TransitionResult | None:
        """Complete the pending epoch of ``topic``, if any.

        Returns:
            The result, or ``None`` when nothing was pending.

        Raises:
            NotAdoptedError: The topic is not adopted.
            TopicIdMismatchError: The layout was adopted for another topic id.
            TransitionInProgressError: Another controller holds the topic's lock.
            BarrierTimeoutError: The barrier did not pass within ``timeout``.
            OrderedKafkaError: Kafka failed.
            StoreError: ZooKeeper failed or holds a bad record.
        """
        record = self._store.get_topic(topic)
        if record is None:
            raise NotAdoptedError(f"topic {topic} is not adopted")
        if record.pending is None:
            return None
        try:
            return self._transition(topic, record.active, "resume", timeout)
        except _NothingPending:
            return None

    def describe(self, topic: str) -> Description:
        """Describe ``topic``: its record, epochs, producers and Kafka partition count.

        Raises:
            TopicIdMismatchError: The layout was adopted for another topic id.
            UnknownTopicError: The topic does not exist in Kafka.
            OrderedKafkaError: Kafka failed.
            StoreError: ZooKeeper failed or holds a bad record.
        """
        kafka = self._kafka_topic(topic)
        count = kafka.partitions
        record = self._store.get_topic(topic)
        check_topic_id(record, kafka.topic_id)
        if record is None:
            return Description(None, count, (), self._store.producers(topic), (), kafka.topic_id)
        acks: tuple[str, ...] = ()
        if record.pending is not None:
            acks = tuple(sorted(self._store.acks(topic, record.pending)))
        return Description(
            record,
            count,
            tuple(self._store.epochs(topic)),
            self._store.producers(topic),
            acks,
            kafka.topic_id,
        )

    def _validate(self, topic: str, to: int, kind: str) -> tuple[TopicRecord, int, int, bool]:
        """Check a request against Kafka and the store; write nothing.

        Returns:
            The topic record, its znode version, Kafka's partition count, and whether
            the request resumes the pending epoch.
        """
        kafka = self._kafka_topic(topic)
        count = kafka.partitions
        record, version = self._store.get_topic_and_version(topic)
        if record is None:
            raise NotAdoptedError(
                f"topic {topic} is not adopted (adopt it first: ordered adopt {topic})"
            )
        check_topic_id(record, kafka.topic_id)
        if record.pending is not None:
            if kind == "resume" or to == record.active:
                return record, version, count, True
            raise TransitionInProgressError(
                f"transition in progress: epoch {record.pending} of {topic} (to "
                f"{record.active} partitions) is pending; it completes with `ordered "
                f"coordinator` running, or run the same command with --to {record.active}"
            )
        if kind == "resume":
            return record, version, count, False
        if kind == "expand" and to <= record.active:
            raise LayoutError(
                f"expand needs --to above the active partition count {record.active} "
                f"of {topic}, got {to}"
            )
        if kind == "shrink":
            if to >= record.active:
                raise LayoutError(
                    f"shrink needs --to below the active partition count {record.active} "
                    f"of {topic}, got {to}"
                )
            if to < record.initial:
                raise LayoutError(
                    f"cannot shrink {topic} below its initial partition count "
                    f"{record.initial} (got --to {to})"
                )
        return record, version, count, False

    def _transition(self, topic: str, to: int, kind: str, timeout: float) -> TransitionResult:
        started = time.monotonic()
        before, _, _, was_pending = self._validate(topic, to, kind)
        lock = self._store.lock(topic, self._identity)
        try:
            acquired = lock.acquire(blocking=False)
        except NoAuthError as exc:
            raise StoreAuthError(f"cannot take the lock of topic {topic}: {exc}") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreError(f"cannot take the lock of topic {topic}: {exc!r}") from exc
        if not acquired:
            raise TransitionInProgressError(
                f"transition in progress: another controller holds the lock of topic {topic}"
            )
        try:
            # Validate again under the lock: the state may have moved meanwhile.
            current, _ = self._reread(topic)
            if was_pending and current.pending is None and current.epoch == before.epoch:
                # Sealed by another controller between our two reads: done.
                if kind == "resume":
                    raise _NothingPending()
                tr_epoch = self._store.get_epoch(topic, current.epoch)
                return self._result(topic, tr_epoch, False, True, started)
            record, version, count, resuming = self._validate(topic, to, kind)
            if kind == "resume" and not resuming:
                raise _NothingPending()
            tr = _Transition(
                topic=topic,
                target=record.active if resuming else to,
                deadline=started + timeout,
                record=record,
                version=version,
                kafka_partitions=count,
                resumed=resuming,
                started=started,
            )
            if resuming:
                assert record.pending is not None
                tr.epoch = self._store.get_epoch(topic, record.pending)
                if tr.epoch.sealed:
                    raise StoreError(
                        f"topic {topic} says epoch {record.pending} is pending but its "
                        "record is sealed"
                    )
                tr.step = Step.PRODUCERS
                self._progress(
                    f"epoch {record.pending} of {topic}: resuming "
                    f"({tr.epoch.from_active} -> {tr.epoch.to_active} partitions)"
                )
            self._run(tr)
            return self._result(topic, tr.current_epoch, tr.created_partitions, tr.resumed, started)
        finally:
            # The lock node is ephemeral: a lost session releases it anyway.
            with contextlib.suppress(KazooException, KazooTimeoutError):
                lock.release()

    @staticmethod
    def _result(
        topic: str, epoch: EpochRecord, created: bool, resumed: bool, started: float
    ) -> TransitionResult:
        return TransitionResult(
            topic=topic,
            epoch=epoch.epoch,
            from_active=epoch.from_active,
            to_active=epoch.to_active,
            boundaries=dict(epoch.boundaries),
            producers=epoch.producers,
            expired=dict(epoch.expired),
            created_partitions=created,
            resumed=resumed,
            seconds=time.monotonic() - started,
        )

    def _run(self, tr: _Transition) -> None:
        """Drive ``tr`` through its steps: the one place that changes ``tr.step``."""

        def on_state(state: str) -> None:
            # Runs on kazoo's thread: only set a flag.
            if state == KazooState.LOST:
                tr.session_lost.set()

        client = self._store.client
        client.add_listener(on_state)
        try:
            while tr.step is not Step.DONE:
                if tr.session_lost.is_set():
                    raise StoreError(
                        f"ZooKeeper session lost during step {tr.step.value} of {tr.topic}; "
                        "the lock is gone, the next controller completes the transition"
                    )
                self._handlers[tr.step](tr)
                tr.step = _NEXT[tr.step]
        finally:
            client.remove_listener(on_state)

    # --- the steps -----------------------------------------------------------------

    def _step_partitions(self, tr: _Transition) -> None:
        if tr.kafka_partitions >= tr.target:
            return
        self._progress(
            f"{tr.topic}: creating partitions {tr.kafka_partitions} -> {tr.target} in Kafka"
        )
        tr.created_partitions = self._admin.create_partitions(tr.topic, tr.target)
        tr.kafka_partitions = self._admin.partition_count(tr.topic)

    def _step_publish(self, tr: _Transition) -> None:
        record = tr.record
        number = record.epoch + 1
        edges = key_flow(record.initial, record.active, tr.target)
        receivers = sorted({b for _, b in edges})
        boundaries = self._admin.end_offsets(tr.topic, receivers)
        # Listing before the publish too means a producer whose session ends in the
        # instant between the publish and the listing after it still gets its grace.
        before = self._store.producers(tr.topic)
        epoch = EpochRecord(
            topic=tr.topic,
            epoch=number,
            initial=record.initial,
            from_active=record.active,
            to_active=tr.target,
            state="pending",
            edges=tuple(edges),
            boundaries=boundaries,
            producers=tuple(sorted(before)),
            expired={},
            created_at=time.time(),
            sealed_at=None,
            delivery_timeouts_ms={k: v.delivery_timeout_ms for k, v in before.items()},
        )
        published = replace(
            record,
            active=tr.target,
            epoch=number,
            pending=number,
            physical=max(record.physical, tr.kafka_partitions),
        )
        self._store.publish_epoch(published, epoch, tr.version)
        tr.record, tr.version = self._reread(tr.topic)
        tr.epoch = epoch
        self._progress(
            f"epoch {number} of {tr.topic} published: {record.active} -> {tr.target} "
            f"partitions, edges {_edges_text(edges)}"
        )

    def _step_producers(self, tr: _Transition) -> None:
        epoch = tr.current_epoch
        registered = self._store.producers_registered_before(tr.topic, epoch.epoch)
        producers = tuple(sorted(set(epoch.producers) | set(registered)))
        timeouts = {k: v.delivery_timeout_ms for k, v in registered.items()}
        timeouts.update(epoch.delivery_timeouts_ms)
        if producers != epoch.producers or timeouts != epoch.delivery_timeouts_ms:
            epoch = replace(epoch, producers=producers, delivery_timeouts_ms=timeouts)
            self._store.update_epoch(epoch)
            tr.epoch = epoch

    def _step_barrier(self, tr: _Transition) -> None:
        epoch = tr.current_epoch
        if not epoch.producers:
            return
        changed = threading.Event()
        watches = [
            self._store.watch_producers(tr.topic, lambda _children: changed.set()),
            self._store.watch_acks(tr.topic, epoch.epoch, lambda _children: changed.set()),
        ]
        last_text, last_report = "", 0.0
        try:
            while True:
                if tr.session_lost.is_set():
                    raise StoreError(
                        f"ZooKeeper session lost in the barrier of epoch {epoch.epoch} of "
                        f"{tr.topic}; the next controller completes it"
                    )
                # Clear before reading: an event after the reads wakes the next wait.
                changed.clear()
                checked = self._store.verified_acks(tr.topic, epoch.epoch)
                # An ack seen proven stays proven when its producer's session ends.
                proven = self._proven.setdefault((tr.topic, epoch.epoch), set())
                proven.update(checked.genuine)
                acks = set(checked.genuine) | (proven & set(checked.unproven))
                self._report_forged(tr.topic, epoch.epoch, checked.forged)
                live = self._store.producers(tr.topic)
                now = time.time()
                status = barrier_status(epoch, acks, set(live), now)
                waiting, expired = list(status.waiting), status.expired
                if expired != epoch.expired:
                    # Recorded so that a controller taking over keeps the clock.
                    epoch = replace(epoch, expired=expired)
                    self._store.update_epoch(epoch)
                    tr.epoch = epoch
                if not waiting:
                    return
                text = _waiting_text(epoch, waiting, expired)
                if text != last_text or time.monotonic() - last_report >= _REPORT_EVERY_S:
                    self._progress(text)
                    last_text, last_report = text, time.monotonic()
                if self._cancel.is_set():
                    raise BarrierTimeoutError(
                        f"epoch {epoch.epoch} of {tr.topic} is still pending: the "
                        "controller was stopped while waiting for "
                        f"{_waiting_ids(waiting, expired)}"
                    )
                remaining = tr.deadline - time.monotonic()
                if remaining <= 0:
                    raise BarrierTimeoutError(
                        f"epoch {epoch.epoch} of {tr.topic} is still pending: "
                        f"{_waiting_ids(waiting, expired)} did not ack in time; it completes "
                        f"with `ordered coordinator` running or when this command runs again"
                    )
                wait = min(remaining, _RECHECK_S, *(g - now for g in status.grace_ends))
                changed.wait(max(wait, 0.0))
        finally:
            for watch in watches:
                watch.stop()
            self._proven.pop((tr.topic, epoch.epoch), None)

    def _report_forged(self, topic: str, epoch: int, forged: dict[str, tuple[str, ...]]) -> None:
        """Log each forged ack once: the barrier ignores it and waits for the producer."""
        for pid, writers in sorted(forged.items()):
            key = (topic, epoch, pid)
            if key in self._forged_seen:
                continue
            self._forged_seen.add(key)
            _log.warning(
                "ignoring a forged ack of epoch %d of %s for producer %s (the node names "
                "%s; the producer's registration does not prove it); waiting for the "
                "producer itself",
                epoch,
                topic,
                pid,
                ", ".join(writers) or "no writer",
            )

    def _step_seal(self, tr: _Transition) -> None:
        epoch = tr.current_epoch
        givers = sorted({a for a, _ in epoch.edges})
        ends = self._admin.end_offsets(tr.topic, givers)
        record, version = self._reread(tr.topic)
        if record.pending != epoch.epoch:
            raise TransitionInProgressError(
                f"topic {tr.topic} no longer has epoch {epoch.epoch} pending"
            )
        sealed = replace(
            epoch,
            state="sealed",
            sealed_at=time.time(),
            boundaries={**epoch.boundaries, **ends},
        )
        done = replace(record, pending=None)
        self._store.seal_epoch(done, sealed, version)
        tr.record, tr.version, tr.epoch = done, version + 1, sealed
        self._progress(
            f"epoch {epoch.epoch} of {tr.topic} sealed: {epoch.from_active} -> "
            f"{epoch.to_active} partitions in {time.monotonic() - tr.started:.2f} s"
        )

    def _reread(self, topic: str) -> tuple[TopicRecord, int]:
        record, version = self._store.get_topic_and_version(topic)
        if record is None:
            raise StoreError(f"topic {topic} is no longer adopted")
        return record, version


@dataclass(frozen=True)
class BarrierStatus:
    """Where a barrier stands at one moment (see :func:`barrier_status`).

    Attributes:
        waiting: Listed producers still holding the barrier, in list order.
        expired: The epoch's ``expired`` map with producers first seen gone now added.
        grace_ends: Unix times at which a gone producer's grace ends, for those still
            in their grace.
    """

    waiting: tuple[str, ...]
    expired: dict[str, float]
    grace_ends: tuple[float, ...]

    @property
    def passed(self) -> bool:
        """Whether no listed producer holds the barrier any more."""
        return not self.waiting


def barrier_status(
    epoch: EpochRecord, acked: set[str], live: set[str], now: float
) -> BarrierStatus:
    """Decide the barrier of ``epoch``: pure, no I/O.

    A listed producer no longer holds the barrier once it acked, or once it has been
    seen gone (not in ``live``; the time is kept in ``expired``) for its
    ``delivery_timeout_ms`` (:data:`DEFAULT_DELIVERY_TIMEOUT_MS` if unknown) plus
    :data:`EXPIRY_GRACE_S`. A producer once seen gone keeps that clock even if the
    same id registers again: every record it routed by the old layout was produced
    before its session ended.

    Args:
        epoch: The pending epoch (its ``producers``, ``expired``, timeouts).
        acked: Ids with an ack of the epoch.
        live: Ids registered now.
        now: The current unix time.

    Returns:
        The status.
    """
    expired = dict(epoch.expired)
    waiting: list[str] = []
    grace_ends: list[float] = []
    for pid in epoch.producers:
        if pid in acked:
            continue
        if pid not in expired and pid not in live:
            expired[pid] = now
        if pid in expired:
            ms = epoch.delivery_timeouts_ms.get(pid, DEFAULT_DELIVERY_TIMEOUT_MS)
            until = expired[pid] + ms / 1000.0 + EXPIRY_GRACE_S
            if now >= until:
                continue
            grace_ends.append(until)
        waiting.append(pid)
    return BarrierStatus(tuple(waiting), expired, tuple(grace_ends))


class _NothingPending(OrderedError):
    """Internal: a resume found the epoch sealed by someone else meanwhile."""


def _id_text(topic_id: str | None) -> str:
    return "the unbound adoption" if topic_id is None else f"topic id {topic_id}"


def _edges_text(edges: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}->{b}" for a, b in edges) or "none"


def _waiting_ids(waiting: list[str], expired: dict[str, float]) -> str:
    parts = [f"{pid} (gone, in grace)" if pid in expired else pid for pid in waiting]
    return "producer(s) " + ", ".join(parts)


def _waiting_text(epoch: EpochRecord, waiting: list[str], expired: dict[str, float]) -> str:
    total = len(epoch.producers)
    grace = [p for p in waiting if p in expired]
    text = (
        f"epoch {epoch.epoch} of {epoch.topic}: waiting for {len(waiting)} of {total} "
        f"producers ({', '.join(waiting)})"
    )
    if grace:
        text += f"; {len(grace)} gone, waiting out their delivery timeout"
    return text
