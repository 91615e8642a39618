"""The worker thread of an :class:`~ordered.OrderedProducer`.

It serves the typed :class:`~ordered.producer.session.Event` queue and does everything
that talks to ZooKeeper off the send path: re-reads (and so re-arms the one-shot watch
of) a topic whose watch fired, re-synchronises after a reconnect (re-registering after a
lost session), retries a deferred layout until librdkafka knows the new partitions,
writes acks through :meth:`coordinator.kernel.store.LayoutStore.ack` (retrying while ZooKeeper
is unreachable) and checks idle switches for their drain. kazoo's threads only put
events; nothing here runs on them. It works through the producer's
:class:`~ordered.producer.topics.TopicRegistry` (its public methods) and the store.

It runs under a :class:`~coordinator.kernel.supervise.Supervisor` (``thread`` label
``producer-worker``): an unexpected error is logged with its traceback, counted
(``on_thread_restart``) and the loop is entered again after a backoff
(:data:`WORKER_SUPERVISION`), with its state (topics to re-read, acks to retry) kept.
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Sequence
from typing import Final

from coordinator.kernel.errors import StoreError, StoreUnavailableError
from coordinator.kernel.store import AckRecord, LayoutStore, TopicRecord
from coordinator.kernel.supervise import Heartbeat, SupervisionSettings, Supervisor
from ordered.producer.routes import RouteTable, TopicInfo
from ordered.producer.session import Event, EventKind, ProducerSession
from ordered.producer.topics import TopicRegistry

__all__ = ["ProducerWorker"]

_log = logging.getLogger(__name__)

IDLE_CHECK_S: Final = 0.01
"""How often an open switch is checked for its drain while the producer is idle."""
WORKER_TICK_S: Final = 0.5
RETRY_S: Final = 0.2
"""Retry interval of a failed store call, a re-sync or a deferred layout."""
WORKER_SUPERVISION: Final = SupervisionSettings(backoff_s=RETRY_S, max_backoff_s=5.0)
"""Restarts of the worker loop: soon, and never more than 5 s apart (a barrier waits)."""


class ProducerWorker:
    """The worker loop (see the module doc); :meth:`run` is the thread's target.

    Args:
        topics: The producer's topic registry.
        store: Its layout store.
        session: Its session state machine.
        table: Its route table (read here under ``lock``).
        lock: The producer's lock.
        events: The event queue.
    """

    def __init__(
        self,
        topics: TopicRegistry,
        store: LayoutStore,
        session: ProducerSession,
        table: RouteTable,
        lock: threading.Lock,
        events: queue.SimpleQueue[Event],
    ) -> None:
        self._topics = topics
        self._store = store
        self._session = session
        self._table = table
        self._lock = lock
        self._events = events
        self._dirty: set[str] = set()
        self._ack_retries: list[tuple[float, str, AckRecord]] = []

    def start(self, thread_name: str, hooks: Sequence[object] = ()) -> threading.Thread:
        """Start the supervised loop in a daemon thread named ``thread_name``."""
        supervisor = Supervisor(
            "producer-worker", self.loop, WORKER_TICK_S, WORKER_SUPERVISION, hooks=hooks
        )
        return supervisor.start(thread_name=thread_name)

    def run(self) -> None:
        """Serve events until ``STOP`` here; an unexpected error restarts the loop."""
        Supervisor("producer-worker", self.loop, WORKER_TICK_S, WORKER_SUPERVISION).run()

    def loop(self, beat: Heartbeat) -> None:
        """Serve events until ``STOP``; what it does not expect goes to its supervisor."""
        if self._topics.closed:
            return  # called again after close() began: its handles are going away
        while True:
            beat.beat()
            try:
                event: Event | None = self._events.get(timeout=self._wait())
            except queue.Empty:
                event = None
            if event is not None and event.kind is EventKind.STOP:
                return
            if event is not None:
                self._handle(event)
            self._step()

    def _wait(self) -> float:
        if self._table.switches:
            return IDLE_CHECK_S
        if (
            self._session.needs_resync
            or self._ack_retries
            or self._dirty
            or any(i.deferred for i in list(self._table.infos.values()))
        ):
            return RETRY_S
        return WORKER_TICK_S

    def _handle(self, event: Event) -> None:
        if event.kind is EventKind.TOPIC_CHANGED:
            self._dirty.add(event.topic)
        elif event.kind is EventKind.ACK_DUE:
            assert event.ack is not None
            if not self._topics.closed:
                self._write_ack(event.topic, event.ack)
        # SESSION_CHANGED: the kazoo listener already suspended; _step re-syncs.

    def _step(self) -> None:
        session = self._session
        if session.needs_resync:
            self._dirty.clear()  # the re-sync reads every topic
            self._resync()
        elif self._dirty and session.usable:
            for topic in sorted(self._dirty):
                self._dirty.discard(topic)
                info = self._table.infos.get(topic)
                if info is None:
                    continue
                try:
                    if topic in self._topics.unregistered:
                        self._topics.register(topic)  # the node may exist now
                    record = self._store.get_topic_and_watch(topic, self._topics.watcher(topic))
                except StoreError as exc:
                    _log.info("reading %s failed (%s); retrying", topic, exc)
                    self._dirty.add(topic)
                    return
                self._topics.apply(info, record)
        if session.usable:
            for info in list(self._table.infos.values()):
                if info.deferred is not None:
                    self._topics.apply(info, info.deferred)
        if self._table.switches:
            self._topics.check_drained(True)
        if self._ack_retries and not self._topics.closed:
            now = time.monotonic()
            due = [r for r in self._ack_retries if r[0] <= now]
            self._ack_retries = [r for r in self._ack_retries if r[0] > now]
            for _at, topic, ack in due:
                self._write_ack(topic, ack)

    def _resync(self) -> None:
        """Re-register if the session was lost, re-read every topic, then route again."""
        session = self._session
        generation, losses = session.generation, session.losses
        with self._lock:
            infos = [i for i in self._table.infos.values() if i.valid]
        records: list[tuple[TopicInfo, TopicRecord | None]] = []
        try:
            for info in infos:
                if session.needs_register and info.topic in self._topics.unregistered:
                    self._topics.register(info.topic)
                elif session.needs_register:
                    self._store.register_producer(info.topic, self._topics.producer_record())
                watch = self._topics.watcher(info.topic)
                records.append((info, self._store.get_topic_and_watch(info.topic, watch)))
        except StoreError as exc:
            _log.info("re-sync with the layout store failed (%s); retrying", exc)
            return
        if not session.synced(generation, losses):
            return  # the session changed again meanwhile: start over
        for info, record in records:
            self._topics.apply(info, record)
        self._topics.update_tracking_locked()

    def _write_ack(self, topic: str, record: AckRecord) -> None:
        try:
            self._store.ack(topic, record.epoch, record)
            self._topics.acked(topic, record.epoch)
        except StoreUnavailableError as exc:
            _log.info("ack of epoch %d of %s failed (%s); retrying", record.epoch, topic, exc)
            self._ack_retries.append((time.monotonic() + RETRY_S, topic, record))
        except StoreError as exc:
            _log.warning("ack of epoch %d of %s dropped: %s", record.epoch, topic, exc)
