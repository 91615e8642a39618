"""The controller: adopts topics and runs expansions and shrinks through the barrier.

A transition (``docs/protocol.md``, "A transition") is a state machine over
:class:`Step`; every step reads what is already written and skips what is done, so a
controller that dies anywhere leaves a state that :meth:`Controller.resume` (the
``ordered coordinator`` daemon, or the same command again) completes. The steps, the
results and the barrier rule are in :mod:`coordinator.control.transition` (re-exported here);
adoption is in :mod:`coordinator.control.adoption`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Final

from kazoo.exceptions import KazooException, NoAuthError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from coordinator.control.adoption import Adoption
from coordinator.control.consumer_barrier import ConsumerBarrier
from coordinator.control.transition import (
    DEFAULT_DELIVERY_TIMEOUT_MS,
    EXPIRY_GRACE_S,
    NEXT_STEP,
    UNKNOWN_DELIVERY_TIMEOUT_MS,
    BarrierStatus,
    Description,
    Step,
    TransitionResult,
    _edges_text,
    _Transition,
    _waiting_ids,
    _waiting_text,
    barrier_status,
)
from coordinator.kernel.errors import (
    BarrierTimeoutError,
    LayoutError,
    NotAdoptedError,
    OrderedError,
    StoreAuthError,
    StoreError,
    TransitionInProgressError,
)
from coordinator.kernel.hooks import CoordinatorEvents
from coordinator.kernel.identity import process_identity
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.kafka_retry import RetryPolicy
from coordinator.kernel.store import EpochRecord, LayoutStore, TopicRecord
from coordinator.kernel.topic_ids import check_topic_id
from linear_hash import key_flow

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "EXPIRY_GRACE_S",
    "UNKNOWN_DELIVERY_TIMEOUT_MS",
    "BarrierStatus",
    "BarrierTimeoutError",
    "Controller",
    "Description",
    "Step",
    "TransitionResult",
    "barrier_status",
]

_log = logging.getLogger(__name__)

_REPORT_EVERY_S: Final = 5.0
# The watches wake the barrier on every registration and ack change; this only bounds
# how late a missed watch event (e.g. across a reconnect) is noticed.
_RECHECK_S: Final = 1.0

# How long a publish waits for the receiving partitions to get a leader.
_LEADER_WAIT_S: Final = 60.0

Progress = Callable[[str], None]


class Controller(Adoption):
    """Runs adoptions and transitions against a layout store and a Kafka cluster.

    Thread-safe as far as the store and Kafka are: every call keeps its state local.

    Args:
        store: The layout store.
        admin: Kafka admin helpers.
        progress: Called with one line of progress at a time (e.g. while waiting).
        cancel: When set, a running barrier stops waiting (as on a timeout: the epoch
            stays pending); the daemon sets it on shutdown.
        hooks: Objects that receive the epoch events (:mod:`coordinator.kernel.hooks`:
            published, barrier passed, sealed).
    """

    def __init__(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        progress: Progress | None = None,
        cancel: threading.Event | None = None,
        hooks: Sequence[object] = (),
    ) -> None:
        self._store = store
        self._admin = admin
        self._progress: Progress = progress or (lambda _message: None)
        self._cancel = cancel or threading.Event()
        self._events = CoordinatorEvents(hooks)
        self._identity = process_identity()
        self._forged_seen: set[tuple[str, int, str]] = set()
        self._proven: dict[tuple[str, int], set[str]] = {}
        self._judged: dict[tuple[str, int], set[str]] = {}
        self.consumers = ConsumerBarrier(store, self._progress, self._cancel)
        self._handlers: dict[Step, Callable[[_Transition], None]] = {
            Step.PARTITIONS: self._step_partitions,
            Step.ANNOUNCE: lambda tr: self.consumers.announce_and_wait(
                tr.record, tr.target, tr.deadline
            ),
            Step.PUBLISH: self._step_publish,
            Step.PRODUCERS: self._step_producers,
            Step.BARRIER: self._step_barrier,
            Step.SEAL: self._step_seal,
        }

    @property
    def store(self) -> LayoutStore:
        """The layout store."""
        return self._store

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
            NotAdoptedError, TopicIdMismatchError, UnknownTopicError,
            TransitionInProgressError, BarrierTimeoutError, OrderedKafkaError,
            StoreError: As :meth:`expand`.
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
                self._progress(
                    f"epoch {record.pending} of {topic}: resuming "
                    f"({tr.epoch.from_active} -> {tr.epoch.to_active} partitions)"
                )
            # A resumed epoch's partitions exist and it is published.
            self._run(tr, Step.PRODUCERS if resuming else Step.PARTITIONS)
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

    def _run(self, tr: _Transition, start: Step) -> None:
        """Drive ``tr`` through its steps from ``start``: the one place that changes ``tr.step``."""

        def on_state(state: str) -> None:
            # Runs on kazoo's thread: only set a flag.
            if state == KazooState.LOST:
                tr.session_lost.set()

        tr.step = start
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
                self._report(tr)
                tr.step = NEXT_STEP[tr.step]
        finally:
            client.remove_listener(on_state)

    def _report(self, tr: _Transition) -> None:
        """Tell the hooks that step ``tr.step`` just completed (durations from the publish)."""
        epoch = tr.epoch
        if epoch is None:
            return
        if tr.step is Step.PUBLISH:
            self._events.epoch_published(tr.topic, epoch.epoch, epoch.from_active, epoch.to_active)
        elif tr.step is Step.BARRIER:
            self._events.barrier_passed(tr.topic, epoch.epoch, time.time() - epoch.created_at)
        elif tr.step is Step.SEAL:
            sealed_at = epoch.sealed_at if epoch.sealed_at is not None else time.time()
            self._events.epoch_sealed(tr.topic, epoch.epoch, sealed_at - epoch.created_at)

    # --- the steps -----------------------------------------------------------------

    def _step_partitions(self, tr: _Transition) -> None:
        if tr.kafka_partitions >= tr.target:
            return
        self._progress(
            f"{tr.topic}: creating partitions {tr.kafka_partitions} -> {tr.target} in Kafka"
        )
        tr.created_partitions = self._admin.create_partitions(tr.topic, tr.target)
        # create_partitions returned once a metadata answer showed the target, and a
        # topic never loses partitions; asking again could reach a broker whose metadata
        # lags (seen on three brokers) and read the old count.
        tr.kafka_partitions = max(tr.kafka_partitions, tr.target)

    def _step_publish(self, tr: _Transition) -> None:
        record = tr.record
        number = record.epoch + 1
        edges = key_flow(record.initial, record.active, tr.target)
        receivers = sorted({b for _, b in edges})
        boundaries = self._receiver_ends(tr.topic, receivers)
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

    def _receiver_ends(self, topic: str, receivers: list[int]) -> dict[int, int]:
        """End offsets of the receiving partitions, waiting out leaderless ones.

        Partitions created a moment ago have no leader until the brokers elect one; on
        a cluster still recovering (a broker just back) that can outlast one Kafka
        request timeout, so transient errors are retried for up to 60 s here.
        """
        policy = RetryPolicy(max_tries=None, deadline=_LEADER_WAIT_S, delay=0.25, max_delay=2.0)
        return policy.call(
            self._admin.end_offsets,
            topic,
            receivers,
            on_retry=lambda exc, _try, _pause: self._progress(
                f"{topic}: waiting for leaders of partitions {receivers}: {exc}"
            ),
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
        last_key: tuple[tuple[str, ...], tuple[str, ...]] | None = None
        last_report = 0.0
        try:
            while True:
                if tr.session_lost.is_set():
                    raise StoreError(
                        f"ZooKeeper session lost in the barrier of epoch {epoch.epoch} of "
                        f"{tr.topic}; the next controller completes it"
                    )
                # Clear before reading: an event after the reads wakes the next wait.
                changed.clear()
                # A genuine ack is judged once (an ack node never changes): a round
                # costs two listings plus the acks not yet proven, not a read of
                # every ack and registration (N^2 reads over a barrier of N producers).
                names = self._store.ack_ids(tr.topic, epoch.epoch)
                proven = self._proven.setdefault((tr.topic, epoch.epoch), set())
                judged = self._judged.setdefault((tr.topic, epoch.epoch), set())
                fresh = names - judged
                if fresh:
                    checked = self._store.verified_acks(tr.topic, epoch.epoch, only=fresh)
                    proven.update(checked.genuine)
                    # Only a genuine verdict is final: a forged-looking ack turns genuine
                    # when its producer acks (and so rewrites its registration), and an
                    # unproven one (registration gone) is looked at again too.
                    judged.update(checked.genuine)
                    self._report_forged(tr.topic, epoch.epoch, checked.forged)
                # An ack seen proven stays proven when its producer's session ends.
                acks = proven & names
                live = self._store.producer_ids(tr.topic)
                now = time.time()
                status = barrier_status(epoch, acks, live, now)
                waiting, expired = list(status.waiting), status.expired
                if expired != epoch.expired:
                    # Recorded so that a controller taking over keeps the clock.
                    epoch = replace(epoch, expired=expired)
                    self._store.update_epoch(epoch)
                    tr.epoch = epoch
                if not waiting:
                    return
                # A new line when who is waited for changes, else one every few seconds
                # with the countdowns (not the same line again and again).
                key = (tuple(waiting), tuple(sorted(expired)))
                if key != last_key or time.monotonic() - last_report >= _REPORT_EVERY_S:
                    left = tr.deadline - time.monotonic()
                    self._progress(_waiting_text(epoch, waiting, expired, now, left))
                    last_key, last_report = key, time.monotonic()
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
            self._judged.pop((tr.topic, epoch.epoch), None)

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
        # The epoch's age counts from its publish, across every controller that resumed it.
        age = (sealed.sealed_at or time.time()) - epoch.created_at
        self._progress(
            f"epoch {epoch.epoch} of {tr.topic} sealed: {epoch.from_active} -> "
            f"{epoch.to_active} partitions in {age:.2f} s"
            + (f" (this run {time.monotonic() - tr.started:.2f} s)" if tr.resumed else "")
        )

    def _reread(self, topic: str) -> tuple[TopicRecord, int]:
        record, version = self._store.get_topic_and_version(topic)
        if record is None:
            raise StoreError(f"topic {topic} is no longer adopted")
        return record, version


class _NothingPending(OrderedError):
    """Internal: a resume found the epoch sealed by someone else meanwhile."""
