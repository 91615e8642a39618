"""How an :class:`~ordered.OrderedProducer` leaves: flush, ack, unregister, close.

:class:`Closer` is one part of the producer, composed with what it is handed:
``close()``, the context manager and interpreter exit all end in :meth:`Closer.close`,
bounded in time whatever Kafka and ZooKeeper do (the ZooKeeper part runs through
``coordinator.kernel.zk``'s bounded helpers).
"""

from __future__ import annotations

import atexit
import logging
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final

from kazoo.client import KazooClient, KazooState

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client_within, run_bounded
from ordered.producer.held import HeldRecords
from ordered.producer.routes import AckDue, RouteTable
from ordered.producer.session import Event, EventKind, ProducerSession
from ordered.producer.topics import TopicRegistry

__all__ = ["Closer"]

_log = logging.getLogger(__name__)

_EXIT_FLUSH_S: Final = 5.0
"""At interpreter exit, flush for at most this long ..."""
_LEAVE_S: Final = 3.0
"""How long close waits for its final acks and unregistrations."""
_EXIT_STALL_S: Final = 1.0
"""... and give up sooner when nothing was delivered for this long (Kafka is gone)."""


class Closer:
    """Leaving: flush, ack every pending epoch, unregister, stop the worker, close.

    Args:
        topics: The producer's topic registry (acks, registrations, ``closed``).
        kafka: Its ``confluent_kafka.Producer``.
        kz: Its kazoo client.
        store: Its layout store.
        table: Its route table.
        session: Its session state machine.
        lock: The producer's lock.
        events: The worker's event queue.
        worker: The worker thread.
        exit_hook: The producer's interpreter-exit hook (unregistered on close).
        held: Its held records (waited for, as the flush waits for the queue).
    """

    def __init__(
        self,
        *,
        topics: TopicRegistry,
        kafka: Any,
        kz: KazooClient,
        store: LayoutStore,
        table: RouteTable,
        session: ProducerSession,
        lock: threading.Lock,
        events: queue.SimpleQueue[Event],
        worker: threading.Thread,
        exit_hook: Callable[[], None],
        held: HeldRecords,
    ) -> None:
        self._topics = topics
        self._producer = kafka
        self._kz = kz
        self._store = store
        self._table = table
        self._session = session
        self._lock = lock
        self._events = events
        self._worker = worker
        self._exit_hook = exit_hook
        self._held = held
        self._close_lock = threading.Lock()

    def close(self, exiting: bool) -> bool:
        """Close (once; later calls return ``True``), bounded in time.

        Args:
            exiting: At interpreter exit: shorter bounds, no wait for a stalled flush.

        Returns:
            confluent's ``close()`` result.
        """
        with self._close_lock:
            if self._topics.closed:
                return True
            atexit.unregister(self._exit_hook)
            self._held.drain(self._producer.poll, _EXIT_FLUSH_S if exiting else -1.0)
            left = self._flush_at_exit() if exiting else self._producer.flush()
            with self._lock:
                self._topics.closed = True
                self._table.enable_fast(False)
                drained = left == 0 and len(self._producer) == 0
                acks = self._table.close_all() if drained else []
                topics = [i.topic for i in self._table.infos.values() if i.valid]
            if drained and self._kz.state == KazooState.CONNECTED:
                # In a thread of its own, waited for a bounded time: a kazoo call made
                # just as ZooKeeper goes away blocks until the session resolves.
                left_in_time = run_bounded(
                    self._leave, topics, acks, timeout=_LEAVE_S, name="ordered-leave"
                )
                if not left_in_time:
                    _log.warning("leaving the layout store timed out after %.0f s", _LEAVE_S)
            # The worker may use the librdkafka handle (a metadata refresh): stop it first.
            self._events.put(Event(EventKind.STOP))
            # A daemon thread: at exit, do not wait long for one stuck in a store call.
            self._worker.join(timeout=1.0 if exiting else 5.0)
            if not drained:
                # What is left cannot be delivered now; confluent's close would wait.
                self._producer.purge(True, True, False)
            result = self._close_kafka(exiting)
            self._session.stop()
            close_client_within(self._kz, 1.0 if exiting else _LEAVE_S)
            return result

    def _close_kafka(self, exiting: bool) -> bool:
        """confluent's ``close()``; at exit, a callback raising from it is not printed."""
        if not exiting:
            return bool(self._producer.close())
        try:
            return bool(self._producer.close())
        except Exception as exc:
            _log.debug("a callback raised while closing at exit: %r", exc)
            return False

    def _flush_at_exit(self) -> int:
        """Flush at interpreter exit: at most 5 s, and not while nothing is delivered."""
        deadline = time.monotonic() + _EXIT_FLUSH_S
        progress_at = time.monotonic()
        left = len(self._producer)
        while left and time.monotonic() < deadline:
            try:
                now_left: int = self._producer.flush(0.1)
            except Exception as exc:
                # An application callback (error_cb, stats_cb, a delivery report) raised
                # while served here. Nobody can catch it at exit: Python would print it
                # as "Exception ignored in atexit callback", and confluent a SystemError
                # when a second callback raises in the same call. Keep flushing.
                _log.debug("a callback raised while flushing at exit: %r", exc)
                now_left = len(self._producer)
            if now_left < left:
                progress_at = time.monotonic()
            elif time.monotonic() - progress_at > _EXIT_STALL_S:
                break
            left = now_left
        return left

    def _leave(self, topics: list[str], acks: list[AckDue]) -> None:
        """Ack, unregister, then ack any epoch published meanwhile (everything is delivered).

        After the flush this producer has no record in flight, so acking any pending
        epoch is true; the second round covers an epoch published while leaving, which
        may have listed this producer before its registration went.
        """
        try:
            for ack in acks:
                self._store.ack(ack.topic, ack.epoch, self._topics.ack_record(ack))
                self._topics.acked(ack.topic, ack.epoch)
            for topic in topics:
                self._store.unregister_producer(topic, self._topics.producer_id)
                self._topics.tidy(topic)
            for topic in topics:
                record = self._store.get_topic(topic)
                if record is not None and record.pending is not None:
                    due = AckDue(topic, record.pending, {})
                    self._store.ack(topic, record.pending, self._topics.ack_record(due))
                    self._topics.acked(topic, record.pending)
        except StoreError as exc:
            # The session ends right after: registrations go with it; the barrier then
            # waits out this producer's delivery timeout for an unacked epoch.
            _log.warning("leaving the layout store incompletely: %s", exc)
