"""The producer's topics: first use, layout changes, the barrier's drain and acks, the session.

:class:`TopicRegistry` is one part of an :class:`~ordered.OrderedProducer`, composed
with the route table, the tracker, the session and the worker that it is handed: how a
topic is first met (registration, the layout read, the one-shot watch), how a new topic
record moves its route (:meth:`TopicRegistry.apply`, for the worker and the first use),
when a switch is drained and acked, and what a session change does. The worker and the
producer call its public methods only.
"""

from __future__ import annotations

import functools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable
from typing import Any, Final

import confluent_kafka
from kazoo.client import KazooState
from kazoo.exceptions import KazooException

from coordinator.kernel import identity
from coordinator.kernel.errors import (
    LayoutUnavailableError,
    OrderedKafkaError,
    StoreAuthError,
    StoreUnavailableError,
)
from coordinator.kernel.hooks import ProducerEvents
from coordinator.kernel.store import AckRecord, LayoutStore, ProducerRecord, TopicRecord
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.topic_ids import TopicIds
from ordered.producer.config import ProducerConfig
from ordered.producer.routes import (
    PLAIN_ROUTE,
    AckDue,
    Route,
    RouteTable,
    TopicInfo,
    TopicState,
)
from ordered.producer.session import Event, EventKind, ProducerSession
from ordered.producer.tracking import DrainTracker

__all__ = ["TopicRegistry"]

_log = logging.getLogger(__name__)

_METADATA_TIMEOUT_S: Final = 5.0


class TopicRegistry:
    """Topics, the barrier and the session of one producer.

    Every call that changes routes, states or switches takes ``lock`` (the producer's,
    which also fences the send path: docs/protocol.md, "Fencing the route switch").

    Args:
        producer_id: The producer's id in the layout store.
        config: Its split configuration (registration record fields).
        store: Its layout store.
        topic_ids: The topic-id check of its cluster.
        kafka: Its ``confluent_kafka.Producer`` (metadata refreshes, queue length).
        table: Its route table.
        session: Its session state machine.
        lock: The producer's lock.
        events: The worker's event queue.
        hooks: Its event hooks.
        emulate: Whether ``delivery.report.only.error`` is emulated (no direct sends).

    Attributes:
        closed: Set once by the producer's close (under ``lock``).
        direct: A plain topic may be sent without the lock (nothing tracked, nothing
            emulated); read by the send path.
        unregistered: Topics whose node does not exist and that ACLs keep this
            producer from creating: routed plain, registered by the worker once the
            node appears.
    """

    def __init__(
        self,
        *,
        producer_id: str,
        config: ProducerConfig,
        store: LayoutStore,
        topic_ids: TopicIds,
        kafka: Any,
        table: RouteTable,
        session: ProducerSession,
        lock: threading.Lock,
        events: queue.SimpleQueue[Event],
        hooks: ProducerEvents,
        emulate: bool,
    ) -> None:
        self.producer_id = producer_id
        self._split = config
        self.store = store
        self.topic_ids = topic_ids
        self._producer = kafka
        self._table = table
        self._tracker: DrainTracker = table.tracker
        self._session = session
        self._lock = lock
        self._events = events
        self._hooks = hooks
        self._emulate = emulate
        self._first_use_lock = threading.Lock()
        self._watchers: dict[str, Callable[[Any], None]] = {}
        # (topic, epoch) -> when it was first seen pending.
        self._pending_seen: dict[tuple[str, int], float] = {}
        self.unregistered: set[str] = set()
        self.direct = not emulate
        self.closed = False

    # --- topics: first use and records ----------------------------------------------

    def producer_record(self) -> ProducerRecord:
        """A fresh registration record of this producer."""
        return ProducerRecord(
            id=self.producer_id,
            host=identity.host_name(),
            pid=os.getpid(),
            delivery_timeout_ms=self._split.delivery_timeout_ms,
            registered_at=time.time(),
            client_id=self._split.client_id,
            language="python",
        )

    def ack_record(self, ack: AckDue) -> AckRecord:
        """The ack record of ``ack``, stamped now."""
        return AckRecord(
            id=self.producer_id,
            epoch=ack.epoch,
            last_offsets=ack.last_offsets,
            acked_at=time.time(),
        )

    def watcher(self, topic: str) -> Callable[[Any], None]:
        """The one-shot watch callback of ``topic`` (puts a ``TOPIC_CHANGED`` event)."""
        # One callable per topic: kazoo keeps a set of watchers per path, so re-arming
        # with the same one never piles up duplicates.
        found = self._watchers.get(topic)
        if found is None:
            found = self._watchers[topic] = functools.partial(self._on_watch, topic)
        return found

    def _on_watch(self, topic: str, _event: Any) -> None:
        # kazoo's thread: never block, never read; the worker re-reads and re-arms.
        self._events.put(Event(EventKind.TOPIC_CHANGED, topic))

    def register(self, topic: str) -> bool:
        """Register for ``topic``; return whether done.

        Under ZooKeeper ACLs a producer may not create a topic's node (it could plant
        a topic record there): a topic nobody adopted yet has none, so it routes plain
        and the worker registers when adoption creates the node (before applying it).

        Raises:
            StoreAuthError: Refused although the topic is adopted (not a producer).
        """
        try:
            self.store.register_producer(topic, self.producer_record())
        except StoreAuthError:
            if self.store.get_topic(topic) is not None:
                raise
            if topic not in self.unregistered:
                _log.info("%s: not adopted and not creatable under ACLs: routing plain", topic)
            self.unregistered.add(topic)
            return False
        self.unregistered.discard(topic)
        return True

    def first_use(self, topic: str) -> Route | None:
        """Register for ``topic``, read and watch its record, apply it; return its route.

        Returns ``None`` when the topic-id check must ask Kafka (the record is bound to
        an id Kafka was not asked about yet): nothing is registered then, and the
        caller holds the topic's records while :meth:`check` runs in the background
        (:mod:`ordered.producer.held`).

        Raises:
            LayoutUnavailableError: ZooKeeper is unreachable (a ``BufferError``: poll
                and retry).
            StoreError: The record fails its check (a topic-id mismatch found less
                than a second ago, say).
        """
        with self._first_use_lock:
            route = self._table.routes.get(topic)
            if route is not None:
                return route
            try:
                store_paths.check_topic(topic)
            except (ValueError, TypeError):
                # Not a Kafka topic name: confluent reports its own error for it.
                with self._lock:
                    info = self._table.info(topic, valid=False)
                    self._table.set_state(info, TopicState.PLAIN, PLAIN_ROUTE)
                return PLAIN_ROUTE
            if not self._session.usable:
                raise LayoutUnavailableError(
                    f"cannot read the layout of {topic}: ZooKeeper is unreachable; poll() and retry"
                )
            try:
                first = self.store.get_topic(topic)
                if not self.topic_ids.answers_now(first):
                    return None
                # A layout of another topic id (the topic was deleted and created again)
                # is refused before registering: a refused producer must not hold up
                # that topic's barrier.
                self.topic_ids.verify(first)
                self.register(topic)
                record = self.topic_ids.verify(
                    self.store.get_topic_and_watch(topic, self.watcher(topic))
                )
            except StoreUnavailableError as exc:
                raise LayoutUnavailableError(
                    f"cannot read the layout of {topic}: {exc}; poll() and retry"
                ) from exc
            except OrderedKafkaError as exc:  # a re-read named another id: Kafka was asked
                raise LayoutUnavailableError(
                    f"cannot check the topic id of {topic}: {exc}; poll() and retry"
                ) from exc
            with self._lock:
                info = self._table.info(topic)
            self.apply(info, record, first_use=True)
            if record is None:
                self._warn_plain(topic)
            return self._table.routes[topic]

    def check(self, topic: str) -> tuple[TopicRecord | None, int]:
        """The first use's reads and checks of a held topic (a background thread).

        Checks the record's topic id with Kafka before registering, asks librdkafka for
        the topic's metadata (a layout's partitions must be known before records are
        routed to them), registers, then reads and watches the record (checked again).

        Returns:
            The record, and the partition count librdkafka knows (0: not asked).

        Raises:
            LayoutUnavailableError: ZooKeeper or Kafka did not answer (retry).
            StoreError: The record fails its check (another topic id, topic deleted).
        """
        # Not under the first-use lock: a Kafka that does not answer must not hold up
        # the first use of another topic (the held topics are the caller's to guard).
        if not self._session.usable:
            raise LayoutUnavailableError(f"{topic}: ZooKeeper is unreachable")
        try:
            first = self.topic_ids.verify(self.store.get_topic(topic))
            known = 0
            if first is not None and first.ordered:
                known = self._refresh_metadata(topic, _METADATA_TIMEOUT_S)
            # Registered last, just before the record is read and applied: a session
            # lost in between leaves the same short window as the first use's.
            self.register(topic)
            record = self.topic_ids.verify(
                self.store.get_topic_and_watch(topic, self.watcher(topic))
            )
        except StoreUnavailableError as exc:
            raise LayoutUnavailableError(f"{topic}: {exc}") from exc
        except OrderedKafkaError as exc:  # Kafka did not answer the topic-id check
            raise LayoutUnavailableError(f"{topic}: {exc}") from exc
        return record, known

    def install_locked(self, topic: str, record: TopicRecord | None, known: int) -> list[AckDue]:
        """Apply a held topic's checked record (under ``lock``); return the acks due.

        The caller hands the held records to librdkafka under the same lock, before
        anything else can be sent to the topic, then calls :meth:`installed`.
        """
        info = self._table.info(topic)
        info.known_partitions = max(info.known_partitions, known)
        if record is not None and record.pending is not None:
            self._pending_seen.setdefault((topic, record.pending), time.monotonic())
        return self._table.apply(info, record, self._session.usable)

    def installed(self, topic: str, record: TopicRecord | None, acks: list[AckDue]) -> None:
        """After :meth:`install_locked` (the lock released): queue the acks, warn if plain."""
        for ack in acks:
            self.queue_ack(ack)
        if record is None:
            self._warn_plain(topic)

    def _warn_plain(self, topic: str) -> None:
        """Say once per topic that it has no layout here: keyed records route plain.

        A producer under the wrong ``ordered.zookeeper.root`` would otherwise send an
        adopted topic's keys by librdkafka's partitioner, to retired partitions too,
        without a word. One read at first use: whether the default root adopted it.
        """
        root = self.store.root
        elsewhere = ""
        if root != store_paths.DEFAULT_ROOT:
            try:
                got = self.store.client.exists(
                    store_paths.topic_path(store_paths.DEFAULT_ROOT, topic)
                )
                if got is not None and got.dataLength > 0:
                    elsewhere = (
                        f"; it is adopted under {store_paths.DEFAULT_ROOT}: is "
                        "ordered.zookeeper.root right?"
                    )
            except KazooException:
                pass  # only a hint: the warning stands without it
        _log.warning(
            "%s has no layout under the store root %s: its records are routed as a plain "
            "topic's (librdkafka's partitioner), so keyed records keep their order only "
            "while its partition count does not change%s",
            topic,
            root,
            elsewhere,
        )

    def tidy(self, topic: str) -> None:
        """After unregistering: remove ``topic``'s nodes if it is not adopted and unused.

        A producer registers on a topic that is not adopted (the barrier of a later
        adoption and change must list it: docs/protocol.md), which creates the empty
        topic node and its ``producers`` node. Once no producer is registered they
        hold nothing: both go, in one transaction that fails (and leaves them) if the
        topic node gained a record or any child (an adoption, another producer, the
        epoch counter an un-adoption keeps), or ``producers`` a registration.
        """
        client = self.store.client
        root = self.store.root
        tpath = store_paths.topic_path(root, topic)
        ppath = store_paths.producers_path(root, topic)
        try:
            data, tstat = client.get(tpath)
            if data or client.get_children(tpath) != ["producers"]:
                return
            pstat = client.exists(ppath)
            if pstat is None or pstat.numChildren:
                return
            txn = client.transaction()
            txn.delete(ppath, version=pstat.version)
            txn.delete(tpath, version=tstat.version)
            txn.commit()  # a failed check aborts all of it: nothing to undo
        except KazooException as exc:
            # Refused under ACLs, or raced: the nodes stay, as they did before.
            _log.debug("%s: nodes left: %r", topic, exc)

    def _refresh_metadata(self, topic: str, timeout: float) -> int:
        """Refresh librdkafka's metadata of ``topic``; return its partition count (or 0).

        librdkafka refuses an explicit partition beyond its cached partition count
        (``_UNKNOWN_PARTITION``) until its next periodic refresh; a metadata request
        updates that cache at once.
        """
        if self.closed:
            return 0
        try:
            metadata = self._producer.list_topics(topic, timeout)
        except confluent_kafka.KafkaException as exc:
            _log.warning("metadata of %s not refreshed: %s", topic, exc.args[0])
            return 0
        except RuntimeError:
            if self.closed:
                return 0  # closed meanwhile ("Handle has been closed")
            raise
        entry = metadata.topics.get(topic)
        if entry is None or entry.error is not None:
            return 0
        return len(entry.partitions)

    def apply(self, info: TopicInfo, record: TopicRecord | None, first_use: bool = False) -> None:
        """Move ``info`` to the state its topic record calls for (worker or first use)."""
        topic = info.topic
        with self._lock:
            if self._table.is_stale(info, record):
                return
        if record is not None and record.ordered and record.active > info.known_partitions:
            # Only growth needs fresh metadata; a shrink routes to partitions it knows.
            known = self._refresh_metadata(topic, 1.0 if first_use else _METADATA_TIMEOUT_S)
            info.known_partitions = max(info.known_partitions, known)
            if known < record.active and not first_use:
                # Keep routing by the old layout (safe: the ack waits) and retry.
                _log.debug("%s: librdkafka does not know %d partitions yet", topic, record.active)
                info.deferred = record
                return
        if record is not None and record.pending is not None:
            self._pending_seen.setdefault((topic, record.pending), time.monotonic())
        with self._lock:
            before = info.record
            acks = self._table.apply(info, record, self._session.usable)
            self.update_tracking()
        if (
            before is not None
            and record is not None
            and before.ordered
            and record.ordered
            and record.epoch > before.epoch
        ):
            self._hooks.route_switch(topic, before.epoch, record.epoch)
        for ack in acks:
            self.queue_ack(ack)

    def acked(self, topic: str, epoch: int) -> None:
        """An ack of ``epoch`` was written: report it with its latency."""
        seen = self._pending_seen.pop((topic, epoch), None)
        latency = 0.0 if seen is None else time.monotonic() - seen
        self._hooks.barrier_ack(topic, epoch, latency)

    def fast_off_locked(self) -> None:
        """Turn the compiled send path off until the next :meth:`update_tracking`."""
        self._table.enable_fast(False)

    def update_tracking_locked(self) -> None:
        """:meth:`update_tracking`, taking the lock."""
        with self._lock:
            self.update_tracking()

    def update_tracking(self) -> None:
        """Recompute tracking, :attr:`direct` and the compiled path's table (under the lock)."""
        # Tracking stops once no switch waits for its ack; the compiled
        # path runs only while nothing is tracked and the session is usable.
        tracker = self._tracker
        if not self._table.switches and tracker.tracking:
            tracker.stop()
        self.direct = not tracker.tracking and not self._emulate
        self._table.enable_fast(not tracker.tracking and self._session.usable and not self.closed)

    # --- the barrier: tracking, drain, ack --------------------------------------------

    def on_tracked(self, generation: int, err: Any, msg: Any) -> None:
        """A tracked record's delivery report (``Tracked`` calls it): count it."""
        with self._lock:
            self._tracker.done(generation)
            if err is None:
                switch = self._table.switches.get(msg.topic())
                if switch is not None:
                    switch.delivered(generation, msg.partition(), msg.offset())

    def check_drained(self, idle_only: bool = False) -> None:
        """Ack every switch whose older records are all delivered (see RouteTable.drained)."""
        with self._lock:
            if not self._table.switches or not self._session.usable or self.closed:
                return
            acks = self._table.drained(len(self._producer), idle_only)
            if acks:
                self.update_tracking()
        for ack in acks:
            self.queue_ack(ack)

    def queue_ack(self, ack: AckDue) -> None:
        """Hand ``ack`` to the worker, which writes it."""
        # The worker writes it: the send path never waits for a ZooKeeper round trip.
        self._events.put(Event(EventKind.ACK_DUE, ack.topic, self.ack_record(ack)))

    # --- ZooKeeper session and the worker ---------------------------------------------

    def on_session(self, state: str) -> None:
        """kazoo's session listener: suspend routing, then tell the worker."""
        # kazoo's connection thread: in-memory only, then hand over to the worker.
        if not self._session.on_kazoo(state):
            return
        if state != KazooState.CONNECTED:
            with self._lock:
                self._table.enable_fast(False)
                self._table.suspend_all()
        self._events.put(Event(EventKind.SESSION_CHANGED))
