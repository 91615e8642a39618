"""A topic's first records, held while its topic-id check asks Kafka in the background.

A layout applies only to the Kafka topic it was adopted for (:mod:`coordinator.kernel.topic_ids`):
before a producer routes a topic's records by its layout, Kafka is asked the topic's id.
Kafka may be down then, and confluent's ``produce()`` never waits for Kafka: it queues
the record. So the first ``produce()`` of a topic whose check must ask Kafka returns at
once, and :class:`HeldRecords` keeps the topic's records here, in ``produce()`` order,
until a supervised thread (``producer-first-use``) has checked the topic; then, under the
producer's lock, the topic's route is applied and the held records are handed to
librdkafka in order before anything else can be sent to the topic (the compiled path and
the lock-free plain path are off meanwhile), so no later ``produce()`` overtakes them.

As confluent's queue does, held records count in ``len(producer)`` and against
``queue.buffering.max.messages`` (a ``BufferError`` when full), and each expires after
``message.timeout.ms`` (``delivery.timeout.ms``) if the check has not passed by then: its
delivery report fails with ``_MSG_TIMED_OUT``, served by ``poll()``/``flush()``. A check
that refuses the topic (its layout is of another topic id, or the topic was deleted)
fails the held records' reports with ``_UNKNOWN_TOPIC``, the refusal's text in the
error's ``str()``. A held record that librdkafka refuses when it is handed over (a
``produce()`` confluent would have refused at the call) gets the refusal's error in its
report (``_QUEUE_FULL`` for a ``BufferError``).
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any, Final, NamedTuple

import confluent_kafka

from coordinator.kernel.errors import LayoutUnavailableError, OrderedError
from coordinator.kernel.supervise import Heartbeat, SupervisionSettings, Supervisor
from ordered.producer.reports import DueReports
from ordered.producer.routes import Route
from ordered.producer.topics import TopicRegistry
from ordered.producer.tracking import DeliveryCallback

__all__ = ["CHECK_RETRY_S", "HeldRecord", "HeldRecords"]

_log = logging.getLogger(__name__)

CHECK_RETRY_S: Final = 0.5
"""How soon a check that Kafka or ZooKeeper did not answer is tried again."""
_SLICE_S: Final = 0.05
"""How long one librdkafka poll may take while records are held (expiry granularity)."""
_SUPERVISION: Final = SupervisionSettings(backoff_s=CHECK_RETRY_S, max_backoff_s=5.0)
_KafkaError = confluent_kafka.KafkaError


class HeldRecord(NamedTuple):
    """One held ``produce()`` call (its callback resolved as confluent resolves it)."""

    value: Any
    key: Any
    partition: int
    callback: DeliveryCallback | None
    timestamp: int
    headers: Any
    expires: float


Send = Callable[[str, Any, Any, int, Any, int, Any], None]
"""The producer's send under its lock: ``(topic, value, key, partition, callback,
timestamp, headers)``."""


class HeldRecords:
    """The held records of one producer, and the thread that checks their topics.

    Args:
        topics: The producer's topic registry (first use, check, install).
        routes: Its route table's routes (read under :attr:`lock`).
        lock: The producer's lock (fences the send path).
        due: Its owed delivery reports (expired and refused records go there).
        send: Its send path, called under ``lock``.
        paused: Whether ``ordered.switch.mode=pause`` refuses records now (a switch
            drains): the hand-over waits (it is tried again) rather than fail them.
        kafka_len: ``len()`` of its librdkafka queue.
        default_callback: Its configured ``on_delivery`` (for a record without one).
        timeout_ms: ``message.timeout.ms``: how long a record may stay held.
        max_messages: ``queue.buffering.max.messages``.
        hooks: Its event hooks (for the supervised thread).
    """

    def __init__(
        self,
        *,
        topics: TopicRegistry,
        routes: dict[str, Route],
        lock: threading.Lock,
        due: DueReports,
        send: Send,
        paused: Callable[[], bool],
        kafka_len: Callable[[], int],
        default_callback: DeliveryCallback | None,
        timeout_ms: int,
        max_messages: int,
        hooks: Sequence[object] = (),
    ) -> None:
        self._topics = topics
        self._routes = routes
        self._send_lock = lock
        self._due = due
        self._send = send
        self._paused = paused
        self._kafka_len = kafka_len
        self._default = default_callback
        self._timeout_s = timeout_ms / 1000.0
        self._max = max_messages
        self._hooks = hooks
        self.lock = threading.Lock()
        """Guards the held records; taken before the producer's lock, never after."""
        self._held: dict[str, collections.deque[HeldRecord]] = {}
        self._wake = threading.Event()
        self._thread: threading.Thread | None = None
        self.count = 0
        """Records held now (they count in ``len(producer)``)."""

    def __len__(self) -> int:
        """Records held now."""
        return self.count

    def route(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        callback: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
    ) -> Route | None:
        """The route of a topic without one yet; ``None``: the record was held.

        Raises:
            BufferError: ``queue.buffering.max.messages`` records are queued and held.
            LayoutUnavailableError: ZooKeeper is unreachable (as the first use).
            StoreError: The topic's record fails its check.
        """
        with self.lock:
            route = self._routes.get(topic)
            if route is not None:
                return route  # released meanwhile: sent after the held records
            held = self._held.get(topic)
            if held is None:
                route = self._topics.first_use(topic)
                if route is not None:
                    return route
            if self.count + self._kafka_len() >= self._max:
                raise BufferError("Local: Queue full")  # confluent's words
            new = held is None
            if held is None:
                held = self._held[topic] = collections.deque()
                self._start()
            held.append(
                HeldRecord(
                    value,
                    key,
                    partition,
                    callback,
                    timestamp,
                    headers,
                    time.monotonic() + self._timeout_s,
                )
            )
            self.count += 1
        if new:
            self._wake.set()  # a new topic to check (later records need no wake-up)
        return None

    # --- reports -----------------------------------------------------------------------

    def expire(self) -> None:
        """Fail every record held longer than ``message.timeout.ms`` (``_MSG_TIMED_OUT``)."""
        if not self.count:
            return
        now = time.monotonic()
        with self.lock:
            for topic, held in list(self._held.items()):
                while held and held[0].expires <= now:
                    self._fail(topic, held.popleft(), _KafkaError(_KafkaError._MSG_TIMED_OUT))
                if not held:
                    del self._held[topic]  # the next produce() starts over

    def fail_all(self, error: confluent_kafka.KafkaError) -> None:
        """Fail every held record with ``error`` (at close)."""
        with self.lock:
            for topic, held in self._held.items():
                while held:
                    self._fail(topic, held.popleft(), error)
            self._held.clear()
        self._wake.set()

    def _fail(self, topic: str, record: HeldRecord, error: confluent_kafka.KafkaError) -> None:
        # Under self.lock.
        self.count -= 1
        callback = record.callback if record.callback is not None else self._default
        self._due.add(
            callback, error, topic, record.partition, record.key, record.value, record.headers
        )

    def next_expiry(self) -> float | None:
        """When the oldest held record expires (monotonic), or ``None``."""
        with self.lock:
            return min((h[0].expires for h in self._held.values() if h), default=None)

    def poll_while_held(
        self, poll: Callable[[float], int], timeout: float, until_served: bool
    ) -> tuple[int, float]:
        """Poll librdkafka in slices while records are held, serving expiries between.

        A held record's report (released and delivered, or expired) must end a
        ``poll(timeout)`` or ``flush(timeout)`` as confluent's would, not after the
        whole timeout.

        Args:
            poll: librdkafka's ``poll``.
            timeout: The caller's timeout in seconds (negative: none).
            until_served: Return as soon as a report was served (``poll``).

        Returns:
            The reports served, and what is left of ``timeout`` (negative: none).
        """
        deadline = None if timeout < 0 else time.monotonic() + timeout
        served = 0
        while True:
            self.expire()
            served += self._due.serve()
            if until_served and served:
                break
            left = _SLICE_S if deadline is None else min(_SLICE_S, deadline - time.monotonic())
            served += poll(max(0.0, left))  # at least once: other topics' reports too
            if (until_served and served) or left <= 0 or not self.count:
                break
        served += self._due.serve()
        return served, -1.0 if deadline is None else max(0.0, deadline - time.monotonic())

    def wait(self, timeout: float) -> None:
        """Wait until no record is held (released or expired), at most ``timeout`` s."""
        deadline = None if timeout < 0 else time.monotonic() + timeout
        while self.count and (deadline is None or time.monotonic() < deadline):
            self.expire()
            time.sleep(0.01)

    def purge(self, in_queue: bool) -> None:
        """Fail every held record with ``_PURGE_QUEUE`` (``in_queue``: as librdkafka's purge)."""
        if in_queue and self.count:
            self.fail_all(_KafkaError(_KafkaError._PURGE_QUEUE))

    def drain(self, poll: Callable[[float], int], timeout: float) -> None:
        """At close: wait for the held records (as confluent's close flushes), fail the rest.

        Args:
            poll: librdkafka's ``poll``.
            timeout: How long to wait (negative: until each is released or expired).
        """
        if self.count:
            try:
                self.poll_while_held(poll, timeout, False)
            except Exception as exc:  # an application callback raised (at exit, say)
                _log.debug("a callback raised while the held records were flushed: %r", exc)
        self.fail_all(_KafkaError(_KafkaError._PURGE_QUEUE))

    # --- the check thread ----------------------------------------------------------------

    def _start(self) -> None:
        # Under self.lock: one thread per producer, started at the first hold.
        if self._thread is None or not self._thread.is_alive():
            supervisor = Supervisor(
                "producer-first-use", self._loop, CHECK_RETRY_S, _SUPERVISION, hooks=self._hooks
            )
            self._thread = supervisor.start(thread_name=f"ordered-first-use-{id(self):x}")

    def _loop(self, beat: Heartbeat) -> None:
        """Check each held topic until none is held (or the producer closed)."""
        retry_at: dict[str, float] = {}
        while not self._topics.closed:
            beat.beat()
            self.expire()
            with self.lock:
                topics = list(self._held)
                if not topics:
                    self._thread = None  # the next hold starts another
                    return
            now = time.monotonic()
            for topic in topics:
                if retry_at.get(topic, 0.0) <= now and not self._check(topic):
                    retry_at[topic] = time.monotonic() + CHECK_RETRY_S
            waits = [at for t, at in retry_at.items() if t in topics]
            expiry = self.next_expiry()
            if expiry is not None:
                waits.append(expiry)
            self._wake.wait(max(0.0, min(waits, default=CHECK_RETRY_S) - time.monotonic()))
            self._wake.clear()

    def _check(self, topic: str) -> bool:
        """Check ``topic`` once; return whether it is done with (released or refused)."""
        try:
            record, known = self._topics.check(topic)
        except LayoutUnavailableError as exc:
            _log.info("%s: its first records wait for the topic-id check: %s", topic, exc)
            return False
        except OrderedError as exc:
            _log.warning("%s: its held records are refused: %s", topic, exc)
            with self.lock:
                for record_ in self._held.pop(topic, ()):
                    self._fail(topic, record_, _KafkaError(_KafkaError._UNKNOWN_TOPIC, str(exc)))
            return True
        return self._release(topic, record, known)

    def _release(self, topic: str, record: Any, known: int) -> bool:
        """Apply ``topic``'s route and hand its held records to librdkafka, in order.

        Returns:
            ``False`` if it must be tried again (pause mode refuses records now).
        """
        topics = self._topics
        with self.lock, self._send_lock:
            if topics.closed:
                return True  # close() fails them
            if self._paused():
                return False  # the topic is checked again, then handed over
            held = self._held.pop(topic, collections.deque())
            # Nothing may reach the topic but the held records until they are sent:
            # the compiled table and the lock-free plain path stay off meanwhile.
            topics.direct = False
            topics.fast_off_locked()
            acks = topics.install_locked(topic, record, known)
            try:
                for one in held:
                    self.count -= 1
                    self._hand_over(topic, one)
            finally:
                topics.update_tracking()
        topics.installed(topic, record, acks)
        return True

    def _hand_over(self, topic: str, one: HeldRecord) -> None:
        # Under both locks.
        try:
            self._send(
                topic, one.value, one.key, one.partition, one.callback, one.timestamp, one.headers
            )
            return
        except confluent_kafka.KafkaException as exc:
            error = exc.args[0]
        except BufferError:
            error = _KafkaError(_KafkaError._QUEUE_FULL)
        except Exception as exc:  # what confluent's produce() would have raised at the call
            error = _KafkaError(_KafkaError._INVALID_ARG, f"{type(exc).__name__}: {exc}")
        self.count += 1  # _fail counts it out again
        self._fail(topic, one, error)
