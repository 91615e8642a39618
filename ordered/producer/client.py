"""``OrderedProducer``: a drop-in ``confluent_kafka.Producer`` that keeps per-key order.

The producer side of KIP-253 in the clients (docs/protocol.md, "The producer"): keyed
records of an adopted, ordered topic are routed by the topic's linear-hashing layout;
every live producer is registered in ZooKeeper, switches to a new layout epoch the
moment it is published (no stall), and acks the epoch once every record it routed by
an older layout is delivered, so the controller can seal the epoch with safe
boundaries.

The producer is composed of parts (``ordered/producer/``), each handed what it needs:
this module (the confluent API surface and the Python send path), ``send`` (the send
path, chosen once in :meth:`OrderedProducer.__new__`), ``topics`` (first use, layout
changes, the barrier's drain and acks, the session listener), ``held`` (a topic's first
records while its topic id is checked), ``routes``, ``tracking``, ``session``,
``worker``, ``leave``, ``reports``, ``batch``, ``config`` and ``ordered._fastproduce``
(compiled: the common call's send path; :data:`~ordered.producer.send.COMPILED` says
which runs, ``ORDERED_PURE_PYTHON=1`` forces the pure-Python fallbacks).

Compacted topics follow KIP-253 section 9 (:mod:`ordered.compaction`).
"""

from __future__ import annotations

import logging
import queue
import threading
from typing import Any, Final

import confluent_kafka
from kazoo.client import KazooClient

from coordinator.kernel import identity
from coordinator.kernel.errors import LayoutUnavailableError, SwitchDrainingError
from coordinator.kernel.hooks import ProducerEvents
from coordinator.kernel.store import LayoutStore, TopicRecord
from coordinator.kernel.topic_ids import TopicIds
from coordinator.kernel.zk import (
    close_client,
    exit_hook,
    make_client,
    start_client,
)
from linear_hash import Layout
from ordered.compaction import TOMBSTONE_HEADER, ancestors
from ordered.producer import batch as _batch
from ordered.producer import send as _send
from ordered.producer.config import ProducerConfig, split_producer_config
from ordered.producer.held import HeldRecords
from ordered.producer.leave import Closer
from ordered.producer.reports import UNKNOWN_PARTITION, DueReports
from ordered.producer.routes import (
    Route,
    RouteTable,
    TopicState,
    merge_headers,
)
from ordered.producer.session import Event, ProducerSession
from ordered.producer.topics import TopicRegistry
from ordered.producer.tracking import (
    DeliveryCallback,
    DrainTracker,
    Tracked,
    ignore_report,
)
from ordered.producer.worker import ProducerWorker
from ordered.unbuilt import Unbuilt, quiet_kazoo, require_config

__all__ = ["PASSED_THROUGH", "OrderedProducer"]

_log = logging.getLogger(__name__)

_CLOSED: Final = "Producer has been closed"  # confluent's message
_UNBUILT: Final = Unbuilt(_CLOSED)

PASSED_THROUGH: Final[frozenset[str]] = frozenset()
"""Public ``confluent_kafka.Producer`` methods passed through without a wrapper: none (no
``__getattr__`` either, so a method of a later confluent-kafka cannot bypass the routing;
``tests/unit/test_producer_surface.py`` fails until it is wrapped or listed here)."""


class OrderedProducer:
    """A ``confluent_kafka.Producer`` that keeps per-key order across layout changes.

    Wraps (does not subclass) a ``confluent_kafka.Producer``: same methods, argument
    order, defaults, callbacks, exceptions (``BufferError``, ``KafkaException`` with the
    original ``KafkaError``) and return values. The configuration is confluent's plus
    the ``ordered.*`` keys of :mod:`ordered.settings`; ``enable.idempotence`` is forced
    on and ``delivery.timeout.ms`` defaults to 60 s (:mod:`ordered.producer.config`).

    Per topic, on first use the producer registers itself in the layout store, then
    reads and watches the topic's record. Not adopted, or ``ordered: false``: calls go
    to confluent unchanged. Adopted and ordered: a keyed record without a partition
    goes to ``Layout.partition_for(key)``, an unkeyed one round-robin over the active
    partitions, ``partition=`` is honoured, and with ``ordered.epoch.header=true`` every
    record carries the epoch. A topic whose topic id Kafka must be asked first has its
    first records held meanwhile (:mod:`ordered.producer.held`): ``produce`` returns at
    once. A new epoch replaces the route at once (the switch, its tracked records,
    ``ordered.switch.mode=pause`` and the emulated ``delivery.report.only.error``:
    docs/protocol.md); like any confluent producer it must be polled.

    Leaving (:meth:`close`, ``with``, interpreter exit) flushes, acks and unregisters,
    bounded in time (:mod:`ordered.producer.leave`). While the ZooKeeper session is
    suspended or lost, a keyed record to an ordered topic raises
    :class:`~coordinator.kernel.errors.LayoutUnavailableError` (a ``BufferError``).

    Args:
        config: The configuration dict (confluent keys plus ``ordered.*``).
        **kwargs: More settings, overriding ``config`` (as confluent's constructor).

    Raises:
        TypeError: No configuration dict (as confluent).
        ConfigError: A bad ``ordered.*`` setting, ``enable.idempotence=false`` or
            ``acks`` other than ``all``.
        StoreError: ZooKeeper could not be reached within the session timeout (at
            least 10 s: docs/clients.md says why the constructor waits for it).
        KafkaException: confluent rejected the librdkafka settings.
    """

    # A subclass whose __init__ never ran: confluent's RuntimeError (ordered.unbuilt).
    _routes: dict[str, Route] = _UNBUILT  # type: ignore[assignment]
    _producer: confluent_kafka.Producer = _UNBUILT  # type: ignore[assignment]
    _closer: Closer = _UNBUILT  # type: ignore[assignment]
    _due: DueReports = _UNBUILT  # type: ignore[assignment]
    _held: HeldRecords = _UNBUILT  # type: ignore[assignment]

    def __new__(cls, *args: Any, **kwargs: Any) -> OrderedProducer:
        """Make a producer with the send path chosen here, once (the one dispatch point).

        With the compiled send path built (:data:`~ordered.producer.send.COMPILED`), an
        ``OrderedProducer(...)`` is an instance of its compiled subclass, whose
        ``produce`` is the C method ``ordered._fastproduce.SendPath.produce``: the
        common call ``produce(topic, value, key)`` is a direct C call, and every other
        call goes to the Python :meth:`produce` below. Any arguments are left to
        ``__init__`` (a subclass may take more, as confluent's allows).
        """
        if cls is OrderedProducer:
            cls = _send.producer_class(cls)
        producer: OrderedProducer = super().__new__(cls)
        return producer

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        require_config(config, kwargs)
        split: ProducerConfig = split_producer_config(config, kwargs)
        quiet_kazoo()
        settings = split.ordered
        only_error = split.only_error
        # Pause mode never tracks a record, so confluent's own only-error filter is
        # safe there (split_producer_config passed it on); track mode emulates it.
        self._pause = settings.switch_mode == "pause"
        self._emulate = only_error and not self._pause
        self._only_error_filter = _send._ONLY_ERROR
        kafka = dict(split.kafka)
        self._default_cb: DeliveryCallback | None = kafka.get("on_delivery")
        if self._emulate and self._default_cb is not None:
            kafka["on_delivery"] = self._only_error_filter(self._default_cb)
        self.producer_id = identity.producer_id()
        self.tombstone_copies = 0
        """Tombstone copies sent for compacted topics (KIP-253 section 9)."""
        self._hooks = ProducerEvents(settings.hooks)

        # Each part gets what it needs: the lock fences sends against the route switch
        # (docs/protocol.md); the session says whether keys may be routed.
        self._lock = threading.Lock()
        self._tracker = DrainTracker()
        self._table = RouteTable(
            self._tracker, settings.epoch_header_name if settings.epoch_header else None
        )
        self._routes = self._table.routes
        self._session = ProducerSession()
        self._events: queue.SimpleQueue[Event] = queue.SimpleQueue()
        self._due = DueReports()

        session_s = settings.zookeeper_session_timeout_ms / 1000.0
        self._kz = make_client(
            settings.zookeeper_connect,
            session_timeout_s=session_s,
            auth=settings.zookeeper_auth,
            acl_root=settings.zookeeper_root,
            tls=settings.zookeeper_tls,
        )
        start_client(self._kz, max(session_s, 10.0), "ordered.zookeeper.connect")
        self._store = LayoutStore(self._kz, settings.zookeeper_root)
        topic_ids = TopicIds.for_client(kafka)
        try:
            self._producer = confluent_kafka.Producer(kafka)
        except BaseException:
            close_client(self._kz)
            raise
        self._rd_produce = self._producer.produce  # bound once: fewer lookups per record
        self._acquire = self._lock.acquire
        self._release = self._lock.release
        self._topics = TopicRegistry(
            producer_id=self.producer_id,
            config=split,
            store=self._store,
            topic_ids=topic_ids,
            kafka=self._producer,
            table=self._table,
            session=self._session,
            lock=self._lock,
            events=self._events,
            hooks=self._hooks,
            emulate=self._emulate,
        )
        self._held = HeldRecords(
            topics=self._topics,
            routes=self._routes,
            lock=self._lock,
            due=self._due,
            send=self._send_locked,
            paused=lambda: self._pause and self._tracker.tracking,
            kafka_len=self._producer.__len__,
            default_callback=self._default_cb,
            timeout_ms=split.delivery_timeout_ms,
            max_messages=int(kafka.get("queue.buffering.max.messages", 100000)),
            hooks=settings.hooks,
        )
        self._kz.add_listener(self._topics.on_session)
        worker = ProducerWorker(
            self._topics, self._store, self._session, self._table, self._lock, self._events
        )
        thread = worker.start(f"ordered-producer-{self.producer_id}", settings.hooks)
        # Registered after kazoo's own exit hook, so it runs first (atexit is LIFO)
        # while the kazoo client still works; a weak reference, so an unreferenced
        # producer can still be collected.
        self._closer = Closer(
            topics=self._topics,
            kafka=self._producer,
            kz=self._kz,
            store=self._store,
            table=self._table,
            session=self._session,
            lock=self._lock,
            events=self._events,
            worker=thread,
            exit_hook=exit_hook(self, _close_at_exit),
            held=self._held,
        )

    # --- introspection (not in confluent) -------------------------------------------

    @property
    def zookeeper(self) -> KazooClient:
        """The producer's own kazoo client (for operations and tests)."""
        return self._kz

    @property
    def store(self) -> LayoutStore:
        """The layout store the producer reads and registers in."""
        return self._store

    def topic_state(self, topic: str) -> TopicState:
        """Return the state of ``topic`` in this producer (``UNKNOWN`` if never used)."""
        with self._lock:
            info = self._table.infos.get(topic)
            return TopicState.UNKNOWN if info is None else info.state

    def layout(self, topic: str) -> Layout | None:
        """Return the layout ``topic`` is routed by now, or ``None`` (plain or unknown)."""
        route = self._routes.get(topic)
        return None if route is None else route.layout

    def topic_record(self, topic: str) -> TopicRecord | None:
        """The store's record of ``topic`` as last applied here (``None``: unused, not adopted)."""
        with self._lock:
            info = self._table.infos.get(topic)
            return None if info is None else info.record

    # --- the send path ---------------------------------------------------------------

    def produce(
        self,
        topic: str,
        value: str | bytes | None = None,
        key: str | bytes | None = None,
        partition: int = -1,
        callback: DeliveryCallback | None = None,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: dict[str, Any] | list[tuple[str, Any]] | None = None,
    ) -> None:
        """Produce a record, as ``confluent_kafka.Producer.produce``.

        Args:
            topic: The topic.
            value: The payload.
            key: The key; a keyed record of an ordered topic goes to its layout partition.
            partition: An explicit partition (honoured), or -1 to let the layout (or,
                for a plain topic, librdkafka's partitioner) choose.
            callback: Delivery report callback ``(err, msg)`` (alias ``on_delivery``).
            on_delivery: Delivery report callback, used when ``callback`` is not given.
            timestamp: CreateTime in ms since the epoch; 0 for now.
            headers: Record headers (list of ``(str, value)`` or dict); the epoch header,
                when on, is appended for an ordered topic.

        Raises:
            LayoutUnavailableError: A keyed record to an ordered topic while the
                ZooKeeper session is not usable, or a first record while ZooKeeper is
                unreachable (a ``BufferError``: poll and retry).
            BufferError: librdkafka's queue (with the held records) is full.
            KafkaException: Any other librdkafka error (the ``KafkaError`` is kept); not
                for a ``partition=`` the topic lacks: as confluent, that is reported
                (``_UNKNOWN_PARTITION``) in the delivery report.
            RuntimeError: The producer is closed.
            StoreError: The topic's record in the store fails its check.
        """
        # confluent lets an explicit ``callback=None`` hide ``on_delivery``: pass the one in use.
        user = callback if callback is not None else on_delivery
        route = self._routes.get(topic)
        if route is None:
            if self._topics.closed:
                raise RuntimeError(_CLOSED)
            # Held (None) while the topic-id check asks Kafka: ordered.producer.held.
            route = self._held.route(topic, value, key, partition, user, timestamp, headers)
            if route is None:
                return
        if route.plain and self._topics.direct:
            if user is None and headers is None and not timestamp:
                self._rd_produce(topic, value, key, partition)
            else:
                self._rd_produce(topic, value, key, partition, user, None, timestamp, headers)
            return
        if self._pause and self._tracker.tracking:
            # Here too, not only in poll(): a caller retrying may poll on another thread.
            self._topics.check_drained(idle_only=True)
        # The lock fences the route switch (docs/protocol.md); bound acquire/release:
        # a ``with`` block costs ~100 ns more per record.
        self._acquire()
        try:
            self._send_locked(topic, value, key, partition, user, timestamp, headers)
        finally:
            self._release()

    def _send_locked(
        self,
        topic: str,
        value: Any,
        key: Any,
        partition: int,
        user: DeliveryCallback | None,
        timestamp: int,
        headers: Any,
    ) -> None:
        """Route and send one record of a topic with a route (under the lock)."""
        route = self._routes[topic]
        try:
            if self._pause and self._tracker.tracking:
                raise SwitchDrainingError(
                    f"cannot produce to {topic} now: a route switch waits for this "
                    "producer's older records to be delivered (ordered.switch.mode="
                    "pause); poll() and retry"
                )
            if partition == -1:
                place = route.place
                if place is not None:
                    if key is None:
                        partition = next(route.round_robin)  # type: ignore[arg-type]
                    elif route.routable and self._session.usable:
                        partition = place(key)
                        if route.compacted and route.copied.first(key):
                            self._send_copies(route, topic, key, partition, timestamp)
                    elif self._topics.closed:
                        raise RuntimeError(_CLOSED)
                    else:
                        raise LayoutUnavailableError(
                            f"cannot route a keyed record to {topic}: the ZooKeeper "
                            "session is not usable (suspended, or lost and not yet "
                            "re-registered); poll() and retry"
                        )
            ours = route.headers
            if ours is not None:
                headers = ours if headers is None else merge_headers(headers, ours)
            tracker = self._tracker
            if tracker.tracking:
                generation = tracker.generation
                self._rd_produce(
                    topic,
                    value,
                    key,
                    partition,
                    on_delivery=self._tracked(generation, user or self._default_cb),
                    timestamp=timestamp,
                    headers=headers,
                )
                tracker.sent(generation)
            elif user is not None and self._emulate:
                self._rd_produce(
                    topic,
                    value,
                    key,
                    partition,
                    on_delivery=self._only_error_filter(user),
                    timestamp=timestamp,
                    headers=headers,
                )
            elif user is None and headers is None and not timestamp:
                # librdkafka parses four arguments faster than eight.
                self._rd_produce(topic, value, key, partition)
            else:
                self._rd_produce(topic, value, key, partition, user, None, timestamp, headers)
        except confluent_kafka.KafkaException as exc:
            if exc.args[0].code() != UNKNOWN_PARTITION or route.plain:  # ordered: reported
                raise
            cb = user or self._default_cb
            self._due.add(cb, exc.args[0], topic, partition, key, value, headers)

    def _tracked(self, generation: int, user: DeliveryCallback | None) -> Tracked:
        return Tracked(self._topics.on_tracked, generation, user, self._emulate)

    def _send_copies(self, route: Route, topic: str, key: Any, partition: int, ts: int) -> None:
        """KIP-253 section 9: a marked tombstone of ``key`` in each ancestor (under the lock).

        Tracked like any record of the route, so the epoch's ack also waits for them;
        their delivery reports go nowhere.
        """
        layout = route.layout
        assert layout is not None
        targets = ancestors(partition, layout.initial)
        if not targets:
            return
        headers = [(TOMBSTONE_HEADER, str(partition).encode()), *(route.headers or ())]
        tracker = self._tracker
        for target in targets:
            if tracker.tracking:
                generation = tracker.generation
                report: DeliveryCallback = self._tracked(generation, None)
                self._rd_produce(
                    topic, None, key, target, on_delivery=report, timestamp=ts, headers=headers
                )
                tracker.sent(generation)
            else:
                self._rd_produce(
                    topic,
                    None,
                    key,
                    target,
                    on_delivery=ignore_report,
                    timestamp=ts,
                    headers=headers,
                )
            self._hooks.tombstone_copy_sent(topic, target)
        self.tombstone_copies += len(targets)

    def produce_batch(
        self,
        topic: str,
        messages: list[dict[str, Any]],
        partition: int = -1,
        callback: DeliveryCallback | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> int:
        """Produce a batch of records, as ``confluent_kafka.Producer.produce_batch``.

        A plain topic is passed to confluent unchanged. An ordered topic's records are
        routed as :meth:`produce` routes them (:func:`ordered.producer.batch.send`); a
        record that fails gets an ``_error`` field (its ``KafkaError``) as confluent does.

        Returns:
            The number of records queued.

        Raises:
            LayoutUnavailableError: As :meth:`produce`, before anything is sent.
            TypeError: As confluent's, for a batch it refuses (``batch.check_messages``).
        """
        route = self._routes.get(topic)
        if route is not None and route.plain and self._topics.direct:
            return int(
                self._producer.produce_batch(topic, messages, partition, callback, on_delivery)
            )
        return _batch.send(self, route, topic, messages, partition, callback, on_delivery)

    # --- the rest of confluent's API (explicit: no __getattr__ fall-through) ---------

    def poll(self, timeout: float = -1) -> int:
        """Serve delivery reports and other callbacks, as confluent's ``poll``.

        Returns:
            The number of events served.
        """
        held = self._held
        if held.count:
            held.expire()
        if self._due:  # confluent's poll returns at once when it serves a report
            served: int = self._due.serve() + self._producer.poll(0)
        elif held.count:
            served, left = held.poll_while_held(self._producer.poll, timeout, True)
            if not served and left:
                served = self._producer.poll(left)
        else:
            served = self._producer.poll(timeout)
        if self._table.switches:
            self._topics.check_drained()
        return served

    def flush(self, timeout: float = -1) -> int:
        """Wait until every record is delivered, as confluent's ``flush``.

        Returns:
            The number of records still in the queue.
        """
        if self._held.count:  # held records are flushed too (released or expired)
            timeout = self._held.poll_while_held(self._producer.poll, timeout, False)[1]
        self._due.serve()
        left: int = self._producer.flush(timeout)
        if self._table.switches:
            self._topics.check_drained()
        return left + self._held.count

    def __len__(self) -> int:
        """Records and reports still pending (in librdkafka, held or due here)."""
        return len(self._producer) + len(self._due) + len(self._held)

    def __bool__(self) -> bool:
        """Always true, as confluent's ``Producer`` (not ``len(self) > 0``)."""
        return True

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge records, as confluent's ``purge`` (their reports come with ``poll``)."""
        self._held.purge(in_queue)
        self._producer.purge(in_queue, in_flight, blocking)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Return cluster metadata, as confluent's ``list_topics``."""
        return self._producer.list_topics(topic, timeout)

    def cluster_id(self, timeout: float = -1) -> str:
        """Return the cluster id, as confluent's ``cluster_id``."""
        cid: str = self._producer.cluster_id(timeout)
        return cid

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Set SASL credentials, as confluent's ``set_sasl_credentials``."""
        self._producer.set_sasl_credentials(username, password)

    def init_transactions(self, timeout: float = -1) -> None:
        """Initialise transactions, as confluent's ``init_transactions``."""
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        """Begin a transaction, as confluent's ``begin_transaction``."""
        self._producer.begin_transaction()

    def commit_transaction(self, timeout: float = -1) -> None:
        """Commit the transaction, as confluent's ``commit_transaction``."""
        self._held.wait(timeout)  # confluent's commit flushes: the held records go first
        self._producer.commit_transaction(timeout)
        if self._table.switches:
            self._topics.check_drained()

    def abort_transaction(self, timeout: float = -1) -> None:
        """Abort the transaction, as confluent's ``abort_transaction``."""
        self._held.purge(True)  # confluent's abort purges the queue (_PURGE_QUEUE reports)
        self._producer.abort_transaction(timeout)
        if self._table.switches:
            self._topics.check_drained()

    def send_offsets_to_transaction(
        self, positions: list[Any], group_metadata: Any, timeout: float = -1
    ) -> None:
        """Add consumer offsets to the transaction, as confluent's method."""
        self._producer.send_offsets_to_transaction(positions, group_metadata, timeout)

    def close(self) -> bool:
        """Flush and close, as confluent's ``close``; then ack and leave ZooKeeper.

        Every record is delivered (or failed, after ``delivery.timeout.ms``) once the
        flush returns, so every pending epoch is acked before the registration goes:
        the controller need not wait for this producer's delivery timeout. Bounded:
        ZooKeeper writes are skipped when it is unreachable.

        Returns:
            confluent's result (``True`` if the close was requested successfully).
        """
        return self._closer.close(exiting=False)

    def __enter__(self) -> OrderedProducer:
        """Return self."""
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, exc_traceback: Any) -> None:
        """Flush and close (confluent flushes and destroys the producer here)."""
        self.close()


def _close_at_exit(producer: OrderedProducer) -> None:
    producer._closer.close(exiting=True)
