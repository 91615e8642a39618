"""``OrderedProducer``: a drop-in ``confluent_kafka.Producer`` that keeps per-key order.

The producer side of KIP-253 in the clients (docs/protocol.md, "The producer"): keyed
records of an adopted, ordered topic are routed by the topic's linear-hashing layout;
every live producer is registered in ZooKeeper, switches to a new layout epoch the
moment it is published (no stall), and acks the epoch once every record it routed by
an older layout is delivered, so the controller can seal the epoch with safe
boundaries.

Compacted topics follow KIP-253 section 9 (:mod:`ordered.compaction`): a keyed record
that lands in a partition split off from others also sends a marked tombstone of its
key to each of those earlier partitions, once per key and epoch state, so that compaction
removes the key's stale values there.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import logging
import os
import queue
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

import confluent_kafka
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import KazooException, NodeExistsError, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from coordinator import identity  # issue 8: one identity builder
from coordinator.errors import LayoutUnavailableError, OrderedKafkaError, StoreError
from coordinator.store import AckRecord, LayoutStore, ProducerRecord, TopicRecord, Watch
from coordinator.store import paths as store_paths
from coordinator.topic_ids import TopicIds  # issue 8: topic identity
from linear_hash import DEFAULT_ALGORITHM, Layout
from ordered.compaction import TOMBSTONE_HEADER, TombstoneMemo, ancestors
from ordered.config import ProducerConfig, split_producer_config
from ordered.producer_tracking import DrainTracker, Switch

__all__ = ["DeliveryCallback", "OrderedProducer", "TopicState"]

_log = logging.getLogger(__name__)

DeliveryCallback = Callable[[Any, Any], None]
"""``on_delivery(err, msg)``: confluent's delivery report callback."""

_IDLE_CHECK_S: Final = 0.01
_WORKER_TICK_S: Final = 0.5
_RETRY_S: Final = 0.2
_METADATA_TIMEOUT_S: Final = 5.0


class TopicState(Enum):
    """The state of one topic inside an :class:`OrderedProducer`.

    Transitions (all made by ``OrderedProducer._set_state``, checked against
    ``_TRANSITIONS``):

    - ``UNKNOWN`` -> ``PLAIN`` | ``ROUTING`` | ``SWITCHING``: first use (register, then
      read the topic record); ``-> SUSPENDED`` if the session broke meanwhile.
    - ``PLAIN`` -> ``ROUTING`` | ``SWITCHING``: the topic was adopted (or made ordered).
    - ``ROUTING`` -> ``SWITCHING``: a new epoch is pending; the route is replaced at once.
    - ``SWITCHING`` -> ``ROUTING``: every record routed before the switch is delivered
      and the ack is written.
    - ``ROUTING``/``SWITCHING`` -> ``PLAIN``: the topic was un-adopted or made unordered.
    - ``ROUTING``/``SWITCHING`` -> ``SUSPENDED``: the ZooKeeper session is suspended or
      lost; keyed records raise :class:`~coordinator.errors.LayoutUnavailableError`.
    - ``SUSPENDED`` -> ``PLAIN`` | ``ROUTING`` | ``SWITCHING``: the session is back (after
      ``LOST``: re-registered) and the topic record was read again.
    - ``ROUTING`` -> ``ROUTING``, ``SWITCHING`` -> ``SWITCHING``: a newer record (a
      sealed epoch, a newer pending epoch) replaced the route.
    """

    UNKNOWN = "unknown"
    """Not used yet: not registered, layout not read."""
    PLAIN = "plain"
    """Not adopted, or adopted with ``ordered: false``: plain ``produce``."""
    ROUTING = "routing"
    """Routed by the current layout; nothing to ack."""
    SWITCHING = "switching"
    """Routed by a pending epoch's layout; its ack waits for the older records."""
    SUSPENDED = "suspended"
    """The session is suspended or lost: keyed records cannot be routed."""


_TRANSITIONS: Final[dict[TopicState, frozenset[TopicState]]] = {
    TopicState.UNKNOWN: frozenset(
        {TopicState.PLAIN, TopicState.ROUTING, TopicState.SWITCHING, TopicState.SUSPENDED}
    ),
    TopicState.PLAIN: frozenset({TopicState.PLAIN, TopicState.ROUTING, TopicState.SWITCHING}),
    TopicState.ROUTING: frozenset(
        {TopicState.ROUTING, TopicState.SWITCHING, TopicState.PLAIN, TopicState.SUSPENDED}
    ),
    TopicState.SWITCHING: frozenset(
        {TopicState.SWITCHING, TopicState.ROUTING, TopicState.PLAIN, TopicState.SUSPENDED}
    ),
    TopicState.SUSPENDED: frozenset(
        {TopicState.SUSPENDED, TopicState.PLAIN, TopicState.ROUTING, TopicState.SWITCHING}
    ),
}


def check_transition(old: TopicState, new: TopicState) -> None:
    """Raise ``RuntimeError`` if ``old -> new`` is not a transition of :class:`TopicState`."""
    if new not in _TRANSITIONS[old]:
        raise RuntimeError(f"illegal topic state transition {old.name} -> {new.name}")


class _Route:
    """What ``produce`` reads for a topic: immutable, replaced whole on every change."""

    __slots__ = (
        "algorithm",
        "compacted",
        "copied",
        "headers",
        "layout",
        "place",
        "plain",
        "round_robin",
        "routable",
        "state",
    )

    def __init__(
        self,
        state: TopicState,
        layout: Layout | None = None,
        algorithm: str = DEFAULT_ALGORITHM,
        headers: list[tuple[str, bytes]] | None = None,
        compacted: bool = False,
        copied: TombstoneMemo | None = None,
    ) -> None:
        self.state = state
        self.plain = layout is None
        self.layout = layout
        self.algorithm = algorithm
        self.headers = headers
        # Section 9 applies once a key can live above initial (the topic has grown).
        self.compacted = compacted and layout is not None and layout.active > layout.initial
        # Keys whose tombstone copies were sent under this layout and epoch state: a new
        # epoch, and its seal, send them again (after the seal no old-epoch record of
        # any producer can follow them); a rebuild for another reason keeps the memo.
        self.copied = copied if copied is not None else TombstoneMemo()
        # Keyed records may be routed (not suspended); checked with one attribute.
        self.routable = layout is not None and state is not TopicState.SUSPENDED
        # The bound router: one call on the send path, no algorithm dispatch.
        self.place: Callable[[Any], int] | None = None
        if layout is not None:
            self.place = (
                layout.partition_for
                if algorithm == DEFAULT_ALGORITHM
                else functools.partial(layout.partition_for, algorithm=algorithm)
            )
        self.round_robin: Iterator[int] | None = (
            None if layout is None else itertools.cycle(range(layout.active))
        )


_PLAIN_ROUTE: Final = _Route(TopicState.PLAIN)


@dataclass(slots=True)
class _TopicInfo:
    """Mutable per-topic bookkeeping (under the producer's lock)."""

    topic: str
    state: TopicState = TopicState.UNKNOWN
    record: TopicRecord | None = None
    switch: Switch | None = None
    acked: set[int] = field(default_factory=set)
    deferred: TopicRecord | None = None
    watch: Watch | None = None
    valid: bool = True
    known_partitions: int = 0


def _merge_headers(user: Any, ours: list[tuple[str, bytes]]) -> Any:
    if isinstance(user, list):
        return user + ours
    if isinstance(user, dict):
        return [*user.items(), *ours]
    return user  # not a type confluent accepts: let it raise its own error


def _record_key(record: TopicRecord) -> tuple[int, int]:
    # A sealed epoch is newer than the same epoch pending.
    return (record.epoch, 1 if record.pending is None else 0)


def _is_unreachable(exc: StoreError) -> bool:
    return isinstance(exc.__cause__, KazooException | KazooTimeoutError)


def _ignore_report(_err: Any, _msg: Any) -> None:
    """The delivery callback of a tombstone copy (not the application's record)."""


class _OnlyError:
    """Emulates ``delivery.report.only.error`` for one callback."""

    __slots__ = ("_user",)

    def __init__(self, user: DeliveryCallback) -> None:
        self._user = user

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._user(err, msg)


class _Tracked:
    """Delivery callback of a tracked record: count it, then call the user's callback."""

    __slots__ = ("_generation", "_owner", "_user")

    def __init__(
        self, owner: OrderedProducer, generation: int, user: DeliveryCallback | None
    ) -> None:
        self._owner = owner
        self._generation = generation
        self._user = user

    def __call__(self, err: Any, msg: Any) -> None:
        owner = self._owner
        owner._on_tracked(self._generation, err, msg)
        user = self._user
        if user is not None and (err is not None or not owner._only_error):
            user(err, msg)


class OrderedProducer:
    """A ``confluent_kafka.Producer`` that keeps per-key order across layout changes.

    Wraps (does not subclass) a ``confluent_kafka.Producer``: same methods, argument
    order, defaults, callbacks, exceptions (``BufferError``, ``KafkaException`` with the
    original ``KafkaError``) and return values. The configuration is confluent's plus
    the ``ordered.*`` keys of :mod:`ordered.config`; ``enable.idempotence`` is forced on.

    Per topic, on first use the producer registers itself in the layout store, then
    reads and watches the topic's record:

    - not adopted, or ``ordered: false``: every call is passed to confluent unchanged;
    - adopted and ordered: a keyed record without an explicit partition goes to
      ``Layout.partition_for(key)``, an unkeyed one round-robin over the active
      partitions, an explicit ``partition=`` is honoured; every record carries the
      epoch header (``ordered.epoch.header``) unless it is turned off.

    When a new epoch is published the route is replaced at once. Records produced
    before the switch are untracked; later ones carry a counting delivery callback until
    the ack, which is written asynchronously once every untracked record is delivered
    (checked after ``poll``/``flush`` return, and by a watcher thread when the producer
    is idle). Serve delivery reports from one thread at a time, as librdkafka advises;
    like any confluent producer it must be polled: delivery reports that are never
    served keep ``len(producer)`` above zero, so such a producer never acks and the
    controller waits for it. Call :meth:`close` (or use ``with``) when done: it acks
    what it can and leaves ZooKeeper at once; an unclosed producer keeps its ZooKeeper
    session and worker thread until the process exits.

    While the ZooKeeper session is suspended or lost, ``produce`` of a keyed record to
    an ordered topic raises :class:`~coordinator.errors.LayoutUnavailableError` (a
    ``BufferError``); after a loss the producer re-registers and re-reads every topic
    before routing again.

    Compacted topics (KIP-253 section 9): see :mod:`ordered.compaction`; the tombstone
    copies never reach the application's delivery callbacks.

    Args:
        config: The configuration dict (confluent keys plus ``ordered.*``).
        **kwargs: More settings, overriding ``config`` (as confluent's constructor).

    Raises:
        ConfigError: A bad ``ordered.*`` setting, or ``enable.idempotence=false``.
        StoreError: ZooKeeper could not be reached within the session timeout.
        KafkaException: confluent rejected the librdkafka settings.
    """

    def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
        split: ProducerConfig = split_producer_config(config, kwargs)
        settings = split.ordered
        self._settings = settings
        self._split = split
        self._only_error = split.only_error
        kafka = dict(split.kafka)
        self._default_cb: DeliveryCallback | None = kafka.get("on_delivery")
        if self._only_error and self._default_cb is not None:
            kafka["on_delivery"] = _OnlyError(self._default_cb)
        self.producer_id = identity.producer_id()  # issue 8: one identity builder
        self._header_name = settings.epoch_header_name
        self._headers_on = settings.epoch_header

        self._lock = threading.Lock()
        self._first_use_lock = threading.Lock()
        self._session_lock = threading.Lock()
        self._routes: dict[str, _Route] = {}
        self._infos: dict[str, _TopicInfo] = {}
        self._switches: dict[str, Switch] = {}
        self._tracker = DrainTracker()
        self._direct = not self._only_error
        self.tombstone_copies = 0
        """Tombstone copies sent for compacted topics (KIP-253 section 9)."""
        self._events: queue.SimpleQueue[tuple[Any, ...]] = queue.SimpleQueue()
        self._available = False
        self._session_seq = 0
        self._lost_seq = 0
        self._registered_seq = 0
        self._resync_needed = False
        self._closed = False
        self._ack_results: set[Any] = set()

        session_s = settings.zookeeper_session_timeout_ms / 1000.0
        self._kz = KazooClient(
            hosts=settings.zookeeper_connect,
            timeout=session_s,
            # Bounded: a store call on the send path must fail, not hang, while
            # ZooKeeper is away.
            command_retry={"max_tries": 20, "delay": 0.05, "max_delay": 0.5, "deadline": 5.0},
            connection_retry={"max_tries": -1, "delay": 0.1, "max_delay": 1.0},
        )
        try:
            self._kz.start(timeout=max(session_s, 10.0))
        except KazooTimeoutError as exc:
            self._kz.close()
            raise StoreError(
                f"cannot reach ZooKeeper at {settings.zookeeper_connect} "
                "(ordered.zookeeper.connect)"
            ) from exc
        self._store = LayoutStore(self._kz, settings.zookeeper_root)
        self._topic_ids = TopicIds.for_client(kafka)  # issue 8: topic identity
        try:
            self._producer = confluent_kafka.Producer(kafka)
            # Bound once: the send path saves two attribute lookups per record.
            self._rd_produce = self._producer.produce
            self._acquire = self._lock.acquire
            self._release = self._lock.release
        except BaseException:
            self._kz.stop()
            self._kz.close()
            raise
        self._available = True
        self._kz.add_listener(self._on_session)
        self._worker = threading.Thread(
            target=self._run_worker, name=f"ordered-producer-{self.producer_id}", daemon=True
        )
        self._worker.start()

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
            info = self._infos.get(topic)
            return TopicState.UNKNOWN if info is None else info.state

    def layout(self, topic: str) -> Layout | None:
        """Return the layout ``topic`` is routed by now, or ``None`` (plain or unknown)."""
        route = self._routes.get(topic)
        return None if route is None else route.layout

    def topic_record(self, topic: str) -> TopicRecord | None:
        """Return the layout store's record of ``topic`` as this producer last applied it.

        ``None`` if the topic was never used or is not adopted. Its ``pending`` tells
        whether the producer has seen the newest epoch sealed.
        """
        with self._lock:
            info = self._infos.get(topic)
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
            headers: Record headers (list of ``(str, value)`` or dict); the epoch header
                is appended for an ordered topic.

        Raises:
            LayoutUnavailableError: A keyed record to an ordered topic while the
                ZooKeeper session is suspended or lost, or the first record to a topic
                while ZooKeeper is unreachable (a ``BufferError``: poll and retry).
            BufferError: librdkafka's queue is full.
            KafkaException: Any other librdkafka error (the ``KafkaError`` is kept).
            StoreError: The topic's record in the store fails its check.
        """
        route = self._routes.get(topic)
        if route is None:
            route = self._first_use(topic)
        # confluent lets an explicit ``callback=None`` hide ``on_delivery``: pass the one
        # callback in use as ``callback`` so both spellings behave as documented.
        user = callback if callback is not None else on_delivery
        if route.plain and self._direct:
            if user is None and headers is None and not timestamp:
                self._rd_produce(topic, value, key, partition)
            else:
                self._rd_produce(topic, value, key, partition, user, None, timestamp, headers)
            return
        # acquire/release bound once: a ``with`` block costs ~100 ns more per record.
        self._acquire()
        try:
            route = self._routes[topic]
            if partition == -1:
                place = route.place
                if place is not None:
                    if key is None:
                        partition = next(route.round_robin)  # type: ignore[arg-type]
                    elif route.routable and self._available:
                        partition = place(key)
                        if route.compacted and route.copied.first(key):
                            self._send_copies(route, topic, key, partition, timestamp)
                    else:
                        raise LayoutUnavailableError(
                            f"cannot route a keyed record to {topic}: the ZooKeeper "
                            "session is not usable (suspended, or lost and not yet "
                            "re-registered); poll() and retry"
                        )
            ours = route.headers
            if ours is not None:
                headers = ours if headers is None else _merge_headers(headers, ours)
            if self._direct:
                if user is None and headers is None and not timestamp:
                    # librdkafka parses four arguments faster than eight.
                    self._rd_produce(topic, value, key, partition)
                else:
                    self._rd_produce(topic, value, key, partition, user, None, timestamp, headers)
                return
            tracker = self._tracker
            if tracker.tracking:
                generation = tracker.generation
                self._rd_produce(
                    topic,
                    value,
                    key,
                    partition,
                    on_delivery=_Tracked(self, generation, user or self._default_cb),
                    timestamp=timestamp,
                    headers=headers,
                )
                tracker.sent(generation)
            elif user is not None:  # delivery.report.only.error, emulated
                self._rd_produce(
                    topic,
                    value,
                    key,
                    partition,
                    on_delivery=_OnlyError(user),
                    timestamp=timestamp,
                    headers=headers,
                )
            else:
                self._rd_produce(topic, value, key, partition, None, None, timestamp, headers)
        finally:
            self._release()

    def _send_copies(
        self, route: _Route, topic: str, key: Any, partition: int, timestamp: int
    ) -> None:
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
                self._rd_produce(
                    topic,
                    None,
                    key,
                    target,
                    on_delivery=_Tracked(self, generation, None),
                    timestamp=timestamp,
                    headers=headers,
                )
                tracker.sent(generation)
            else:
                self._rd_produce(
                    topic,
                    None,
                    key,
                    target,
                    on_delivery=_ignore_report,
                    timestamp=timestamp,
                    headers=headers,
                )
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

        A plain topic is passed to confluent unchanged. For an ordered topic every
        record is routed and sent through :meth:`produce` (confluent's batch mode cannot
        carry headers); a record that fails gets an ``_error`` field (its
        ``KafkaError``) as confluent does.

        Returns:
            The number of records queued.

        Raises:
            LayoutUnavailableError: As :meth:`produce`, before anything is sent.
            TypeError: ``messages`` is not a list of dicts.
        """
        route = self._routes.get(topic)
        if route is None:
            route = self._first_use(topic)
        if route.plain and self._direct:
            count: int = self._producer.produce_batch(
                topic, messages, partition, callback, on_delivery
            )
            return count
        if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
            raise TypeError("messages must be a list of dicts")
        unusable = not self._available or route.state is TopicState.SUSPENDED
        if not route.plain and unusable and any(m.get("key") is not None for m in messages):
            raise LayoutUnavailableError(
                f"cannot route keyed records to {topic}: the ZooKeeper session is "
                "not usable; poll() and retry"
            )
        default = callback if callback is not None else on_delivery
        queued = 0
        for message in messages:
            own = message.get("callback")
            try:
                self.produce(
                    topic,
                    message.get("value"),
                    message.get("key"),
                    message.get("partition", partition),
                    own if own is not None else default,
                    None,
                    message.get("timestamp", 0),
                    message.get("headers"),
                )
            except confluent_kafka.KafkaException as exc:
                message["_error"] = exc.args[0]
                continue
            except LayoutUnavailableError:
                raise
            except BufferError:
                message["_error"] = confluent_kafka.KafkaError(
                    confluent_kafka.KafkaError._QUEUE_FULL
                )
                continue
            queued += 1
        return queued

    def poll(self, timeout: float = -1) -> int:
        """Serve delivery reports and other callbacks, as confluent's ``poll``.

        Returns:
            The number of events served.
        """
        served: int = self._producer.poll(timeout)
        if self._switches:
            self._check_drained()
        return served

    def flush(self, timeout: float = -1) -> int:
        """Wait until every record is delivered, as confluent's ``flush``.

        Returns:
            The number of records still in the queue.
        """
        left: int = self._producer.flush(timeout)
        if self._switches:
            self._check_drained()
        return left

    def __len__(self) -> int:
        """Records and delivery reports still pending in librdkafka."""
        return len(self._producer)

    def __bool__(self) -> bool:
        """Always true, as confluent's ``Producer`` (not ``len(self) > 0``)."""
        return True

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge records, as confluent's ``purge`` (their reports come with ``poll``)."""
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
        self._producer.commit_transaction(timeout)
        if self._switches:
            self._check_drained()

    def abort_transaction(self, timeout: float = -1) -> None:
        """Abort the transaction, as confluent's ``abort_transaction``."""
        self._producer.abort_transaction(timeout)
        if self._switches:
            self._check_drained()

    def send_offsets_to_transaction(
        self, positions: list[Any], group_metadata: Any, timeout: float = -1
    ) -> None:
        """Add consumer offsets to the transaction, as confluent's method."""
        self._producer.send_offsets_to_transaction(positions, group_metadata, timeout)

    def close(self) -> bool:
        """Flush and close, as confluent's ``close``; then ack and leave ZooKeeper.

        Every record is delivered once the flush returns, so every open switch is acked
        (synchronously) before the session ends: the controller need not wait for this
        producer's delivery timeout.

        Returns:
            confluent's result (``True`` if the close was requested successfully).
        """
        if self._closed:
            return True
        left = self._producer.flush()
        switches: list[Switch] = []
        with self._lock:
            self._closed = True
            if left == 0 and len(self._producer) == 0:
                switches = list(self._switches.values())
                self._switches.clear()
        for switch in switches:
            with contextlib.suppress(StoreError):
                self._store.ack(switch.topic, switch.epoch, self._ack_record(switch))
        for pending in list(self._ack_results):
            with contextlib.suppress(Exception):
                pending.wait(5.0)
        # The worker may use the librdkafka handle (a metadata refresh): stop it first.
        self._events.put(("stop",))
        self._worker.join(timeout=5)
        result = bool(self._producer.close())
        with contextlib.suppress(Exception):
            self._kz.stop()
            self._kz.close()
        return result

    def __enter__(self) -> OrderedProducer:
        """Return self."""
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, exc_traceback: Any) -> None:
        """Flush and close (confluent flushes and destroys the producer here)."""
        self.close()

    # --- topics: first use, records, the state machine --------------------------------

    def _producer_record(self) -> ProducerRecord:
        return ProducerRecord(
            id=self.producer_id,
            host=identity.host_name(),  # issue 8: one identity builder
            pid=os.getpid(),
            delivery_timeout_ms=self._split.delivery_timeout_ms,
            registered_at=time.time(),
            client_id=self._split.client_id,
        )

    def _first_use(self, topic: str) -> _Route:
        with self._first_use_lock:
            route = self._routes.get(topic)
            if route is not None:
                return route
            try:
                store_paths.check_topic(topic)
            except (ValueError, TypeError):
                # Not a Kafka topic name: confluent reports its own error for it.
                with self._lock:
                    info = self._infos.setdefault(topic, _TopicInfo(topic, valid=False))
                    self._set_state(info, TopicState.PLAIN, _PLAIN_ROUTE)
                return _PLAIN_ROUTE
            if not self._available:
                raise LayoutUnavailableError(
                    f"cannot read the layout of {topic}: ZooKeeper is unreachable; poll() and retry"
                )
            try:
                # issue 8: a refused topic must not register (its barrier would wait on us)
                self._topic_ids.verify(self._store.get_topic(topic))  # issue 8
                self._store.register_producer(topic, self._producer_record())
                record = self._store.get_topic(topic)
                self._topic_ids.verify(record)  # issue 8: topic identity
            except StoreError as exc:
                if _is_unreachable(exc):
                    raise LayoutUnavailableError(
                        f"cannot read the layout of {topic}: {exc}; poll() and retry"
                    ) from exc
                raise
            except OrderedKafkaError as exc:  # issue 8: topic identity (Kafka unreachable)
                raise LayoutUnavailableError(
                    f"cannot check the topic id of {topic}: {exc}; poll() and retry"
                ) from exc
            with self._lock:
                info = self._infos.setdefault(topic, _TopicInfo(topic))
            self._apply(info, record, first_use=True)
            info.watch = self._store.watch_topic(
                topic, functools.partial(self._on_topic_record, topic)
            )
            return self._routes[topic]

    def _on_topic_record(self, topic: str, record: TopicRecord | None) -> None:
        # kazoo's thread: never block, hand over to the worker.
        self._events.put(("record", topic, record))

    def _headers_for(self, epoch: int) -> list[tuple[str, bytes]] | None:
        if not self._headers_on:
            return None
        return [(self._header_name, str(epoch).encode("ascii"))]

    def _refresh_metadata(self, topic: str, timeout: float) -> int:
        """Refresh librdkafka's metadata of ``topic``; return its partition count (or 0).

        librdkafka refuses an explicit partition beyond its cached partition count
        (``_UNKNOWN_PARTITION``) until its next periodic refresh; a metadata request
        updates that cache at once.
        """
        if self._closed:
            return 0
        try:
            metadata = self._producer.list_topics(topic, timeout)
        except confluent_kafka.KafkaException as exc:
            _log.warning("metadata of %s not refreshed: %s", topic, exc.args[0])
            return 0
        except RuntimeError:
            if self._closed:
                return 0  # closed meanwhile ("Handle has been closed")
            raise
        entry = metadata.topics.get(topic)
        if entry is None or entry.error is not None:
            return 0
        return len(entry.partitions)

    def _apply(self, info: _TopicInfo, record: TopicRecord | None, first_use: bool = False) -> None:
        """Move ``info`` to the state its topic record calls for (worker or first use)."""
        topic = info.topic
        if (
            record is not None
            and info.record is not None
            and _record_key(record) < _record_key(info.record)
        ):
            return  # an older record delivered late
        if record is not None and record.ordered and record.active > info.known_partitions:
            # Only growth needs fresh metadata; a shrink routes to partitions it knows.
            timeout = 1.0 if first_use else _METADATA_TIMEOUT_S
            known = self._refresh_metadata(topic, timeout)
            info.known_partitions = max(info.known_partitions, known)
            if known < record.active and not first_use:
                # Keep routing by the old layout (safe: the ack waits) and retry.
                info.deferred = record
                return
        acks: list[tuple[str, int, dict[int, int]]] = []
        with self._lock:
            info.deferred = None
            previous = info.record
            info.record = record
            if record is None or not record.ordered:
                if (
                    record is not None
                    and record.pending is not None
                    and record.pending not in info.acked
                ):
                    # Unordered: nothing to drain, the barrier needs only our ack.
                    info.acked.add(record.pending)
                    acks.append((topic, record.pending, {}))
                info.switch = None
                self._switches.pop(topic, None)
                self._set_state(info, TopicState.PLAIN, _PLAIN_ROUTE)
            else:
                layout = Layout(record.initial, record.active, record.epoch)
                route_state = TopicState.ROUTING
                pending = record.pending
                if pending is not None and pending not in info.acked:
                    if info.switch is not None and info.switch.epoch == pending:
                        route_state = TopicState.SWITCHING
                    elif info.state is TopicState.UNKNOWN:
                        # Nothing was ever produced to this topic: nothing to drain.
                        info.acked.add(pending)
                        acks.append((topic, pending, {}))
                    else:
                        info.switch = Switch(topic, pending, self._tracker.begin())
                        self._switches[topic] = info.switch
                        route_state = TopicState.SWITCHING
                else:
                    info.switch = None
                    self._switches.pop(topic, None)
                state = route_state
                if not self._available and self._resync_needed:
                    state = TopicState.SUSPENDED
                current = self._routes.get(topic)
                same_epoch_state = (
                    previous is not None
                    and current is not None
                    and (previous.epoch, previous.active, previous.pending)
                    == (record.epoch, record.active, record.pending)
                )
                route = _Route(
                    state,
                    layout,
                    record.algorithm,
                    self._headers_for(record.epoch),
                    record.compacted,
                    current.copied if same_epoch_state and current is not None else None,
                )
                self._set_state(info, state, route)
            self._update_tracking()
        for topic_, epoch, offsets in acks:
            self._send_ack(topic_, epoch, offsets)

    def _set_state(self, info: _TopicInfo, state: TopicState, route: _Route) -> None:
        """The one place that changes a topic's state and route (under ``_lock``)."""
        check_transition(info.state, state)
        if info.state is not state:
            _log.debug("%s: %s -> %s", info.topic, info.state.name, state.name)
        info.state = state
        self._routes[info.topic] = route

    def _update_tracking(self) -> None:
        # Under _lock. Tracking stops once no switch waits for its ack.
        if not self._switches and self._tracker.tracking:
            self._tracker.stop()
        self._direct = not self._tracker.tracking and not self._only_error

    # --- the barrier: tracking, drain, ack --------------------------------------------

    def _on_tracked(self, generation: int, err: Any, msg: Any) -> None:
        with self._lock:
            self._tracker.done(generation)
            if err is None:
                switch = self._switches.get(msg.topic())
                if switch is not None:
                    switch.delivered(generation, msg.partition(), msg.offset())

    def _check_drained(self, idle_only: bool = False) -> None:
        """Ack every switch whose older records are all delivered.

        Args:
            idle_only: Only when nothing at all is pending (``len == 0``): the watcher
                thread does not serve delivery reports, so a report being served on
                another thread at this instant could make ``len - tracked`` too small.
        """
        done: list[Switch] = []
        with self._lock:
            if not self._switches or not self._available or self._closed:
                return
            queue_len = len(self._producer)
            for topic, switch in list(self._switches.items()):
                ready = (
                    queue_len == 0
                    if idle_only
                    else self._tracker.drained(switch.generation, queue_len)
                )
                if not ready:
                    continue
                info = self._infos[topic]
                info.acked.add(switch.epoch)
                info.switch = None
                del self._switches[topic]
                current = self._routes[topic]
                if info.state is TopicState.SWITCHING:
                    route = _Route(
                        TopicState.ROUTING,
                        current.layout,
                        current.algorithm,
                        current.headers,
                        current.compacted,
                        current.copied,
                    )
                    self._set_state(info, TopicState.ROUTING, route)
                done.append(switch)
            self._update_tracking()
        for switch in done:
            self._send_ack(switch.topic, switch.epoch, switch.last_offsets())

    def _ack_record(self, switch: Switch) -> AckRecord:
        return AckRecord(
            id=self.producer_id,
            epoch=switch.epoch,
            last_offsets=switch.last_offsets(),
            acked_at=time.time(),
        )

    def _send_ack(self, topic: str, epoch: int, last_offsets: dict[int, int]) -> None:
        # Asynchronous: the send path never waits for a ZooKeeper round trip.
        record = AckRecord(
            id=self.producer_id, epoch=epoch, last_offsets=last_offsets, acked_at=time.time()
        )
        path = store_paths.ack_path(self._store.root, topic, epoch, self.producer_id)
        try:
            result = self._kz.create_async(path, record.to_json())
        except KazooException:
            self._events.put(("ack", topic, record))
            return
        self._ack_results.add(result)
        result.rawlink(functools.partial(self._on_ack_result, topic, record))

    def _on_ack_result(self, topic: str, record: AckRecord, result: Any) -> None:
        # kazoo's thread: never block.
        self._ack_results.discard(result)
        try:
            result.get_nowait()
        except NodeExistsError:
            pass
        except NoNodeError:
            _log.warning("epoch %d of %s vanished before its ack", record.epoch, topic)
        except Exception as exc:
            _log.info("ack of epoch %d of %s failed (%r); retrying", record.epoch, topic, exc)
            self._events.put(("ack", topic, record))

    # --- ZooKeeper session -------------------------------------------------------------

    def _on_session(self, state: str) -> None:
        # kazoo's connection thread: flags and a queue entry only.
        if state != KazooState.CONNECTED:
            with self._session_lock:
                self._available = False
                self._session_seq += 1
                if state == KazooState.LOST:
                    self._lost_seq += 1
        self._events.put(("session", state))

    def _resync(self) -> None:
        """Re-register if the session was lost, re-read every topic, then route again."""
        if self._kz.state != KazooState.CONNECTED:
            return
        with self._session_lock:
            seq = self._session_seq
            lost = self._lost_seq
        with self._lock:
            infos = [i for i in self._infos.values() if i.valid]
        try:
            records = []
            for info in infos:
                if lost != self._registered_seq:
                    self._store.register_producer(info.topic, self._producer_record())
                records.append((info, self._store.get_topic(info.topic)))
        except StoreError as exc:
            _log.info("re-sync with the layout store failed (%s); retrying", exc)
            return
        self._registered_seq = lost
        with self._session_lock:
            if seq != self._session_seq:
                return  # the session changed again meanwhile: start over
            self._resync_needed = False
            self._available = True
        for info, record in records:
            self._apply(info, record)

    def _suspend_all(self) -> None:
        with self._lock:
            self._resync_needed = True
            for info in self._infos.values():
                if info.state in (TopicState.ROUTING, TopicState.SWITCHING):
                    current = self._routes[info.topic]
                    route = _Route(
                        TopicState.SUSPENDED,
                        current.layout,
                        current.algorithm,
                        current.headers,
                        current.compacted,
                        current.copied,
                    )
                    self._set_state(info, TopicState.SUSPENDED, route)

    # --- the worker ----------------------------------------------------------------

    def _run_worker(self) -> None:
        """Serve watch events, session changes, ack retries and the idle check."""
        while True:
            if self._switches:
                wait = _IDLE_CHECK_S
            elif self._resync_needed or any(i.deferred for i in list(self._infos.values())):
                wait = _RETRY_S
            else:
                wait = _WORKER_TICK_S
            try:
                event: tuple[Any, ...] | None = self._events.get(timeout=wait)
            except queue.Empty:
                event = None
            try:
                if event is not None and event[0] == "stop":
                    return
                if event is not None:
                    self._handle(event)
                if self._resync_needed:
                    self._resync()
                for info in list(self._infos.values()):
                    if info.deferred is not None and not self._resync_needed:
                        self._apply(info, info.deferred)
                if self._switches:
                    self._check_drained(idle_only=True)
            except Exception:
                _log.exception("ordered producer worker: unexpected error")
                time.sleep(_RETRY_S)

    def _handle(self, event: tuple[Any, ...]) -> None:
        kind = event[0]
        if kind == "record":
            _, topic, record = event
            if self._resync_needed:
                return  # the re-sync reads every topic again
            info = self._infos.get(topic)
            if info is not None:
                self._apply(info, record)
        elif kind == "session":
            state = event[1]
            if state == KazooState.CONNECTED:
                self._resync_needed = True
            else:
                self._suspend_all()
        elif kind == "ack":
            _, topic, record = event
            if self._closed:
                return
            try:
                self._store.ack(topic, record.epoch, record)
            except StoreError as exc:
                if _is_unreachable(exc):
                    time.sleep(_RETRY_S)
                    self._events.put(event)
                else:
                    _log.warning("ack of epoch %d of %s dropped: %s", record.epoch, topic, exc)
