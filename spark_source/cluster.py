"""The driver's view of Kafka and of the layout store: partitions, offsets, histories.

One :class:`Cluster` per stream reader, created lazily on the driver (the reader is
pickled to the executors, and neither a librdkafka handle nor a kazoo client pickles).
Every call is bounded by a timeout and fails with an :class:`OrderedError` that says
what could not be read.

A new :class:`Cluster` opens its ZooKeeper session on a background thread (the import
of the layout store and the session start take 0.3 s on a quiet machine and seconds on
a busy one), while the first calls of a query, which need only Kafka (the partitions
and their offsets), are answered; the first layout read waits for it.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from concurrent.futures import Future
from typing import TYPE_CHECKING, Any

from confluent_kafka import IsolationLevel

from coordinator.kernel import identity
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.kafka_offsets import Offsets
from spark_source.options import SourceOptions

if TYPE_CHECKING:
    from coordinator.kernel.history import TopicHistory
    from coordinator.kernel.store import LayoutStore

__all__ = ["Cluster", "client_settings"]

_log = logging.getLogger(__name__)

# librdkafka settings that only make sense for a consumer: an admin client rejects them.
_CONSUMER_ONLY = frozenset(
    {
        "group.id",
        "isolation.level",
        "auto.commit.interval.ms",
        "enable.auto.offset.store",
        "fetch.min.bytes",
        "fetch.max.bytes",
        "fetch.wait.max.ms",
        "fetch.message.max.bytes",
        "max.partition.fetch.bytes",
        "queued.min.messages",
        "queued.max.messages.kbytes",
        "session.timeout.ms",
        "heartbeat.interval.ms",
        "max.poll.interval.ms",
        "partition.assignment.strategy",
        "check.crcs",
        "enable.partition.eof",
        "group.instance.id",
    }
)


# librdkafka's log lines (``%3|...``) go to this logger (quiet unless configured), not
# to the task's stderr.
_rdkafka_log = logging.getLogger("spark_source.rdkafka")
_rdkafka_log.addHandler(logging.NullHandler())


def client_settings(options: SourceOptions, *, admin: bool) -> dict[str, Any]:
    """librdkafka settings from the ``kafka.*`` options.

    Args:
        options: The source's options.
        admin: ``True`` for the driver's admin client (consumer-only settings dropped).
    """
    settings: dict[str, Any] = dict(options.kafka)
    if admin:
        for key in _CONSUMER_ONLY:
            settings.pop(key, None)
    return settings


def _isolation(options: SourceOptions) -> IsolationLevel:
    # Spark's Java consumer reads uncommitted by default; so do we (librdkafka's own
    # default is read_committed).
    level = options.kafka.get("isolation.level", "read_uncommitted").strip().lower()
    if level == "read_committed":
        return IsolationLevel.READ_COMMITTED
    return IsolationLevel.READ_UNCOMMITTED


class Cluster:
    """Kafka metadata and offsets, and layout histories, for one source.

    Args:
        options: The source's options.
        timeout: Seconds one request may take.
        open_store: Open the ZooKeeper session now, on a background thread (a reader
            that never reads layouts, such as a batch read, passes ``False``).
    """

    def __init__(
        self, options: SourceOptions, timeout: float = 30.0, *, open_store: bool = True
    ) -> None:
        self._options = options
        self._timeout = timeout
        settings = client_settings(options, admin=True)
        settings.setdefault("client.id", f"ordered-kafka-driver-{identity.random_token(8)}")
        # The metadata of a named topic is asked per micro-batch: never create it (an
        # AdminClient is a producer to librdkafka, whose default would allow it).
        settings.setdefault("allow.auto.create.topics", "false")
        settings["logger"] = _rdkafka_log
        settings.pop("bootstrap.servers", None)
        self._admin = KafkaAdmin(options.bootstrap_servers, timeout, config=settings)
        self._isolation = _isolation(options)
        self._kazoo: Any = None
        self._store: LayoutStore | None = None
        # The last history read of each topic: a reload reads only what is not sealed in it.
        self._histories: dict[str, TopicHistory] = {}
        self._opening: Future[tuple[Any, LayoutStore]] | None = None
        if open_store and options.zookeeper_connect is not None:
            opening: Future[tuple[Any, LayoutStore]] = Future()
            self._opening = opening
            threading.Thread(
                target=self._open_in_background,
                args=(opening,),
                name="ordered-kafka-store-open",
                daemon=True,
            ).start()

    # --- Kafka ------------------------------------------------------------------------

    def partitions(self) -> dict[str, list[int]]:
        """The topic partitions the options name, as Kafka's metadata lists them now.

        ``subscribe``: the listed topics that exist; ``subscribePattern``: every topic
        whose whole name matches; ``assign``: the assigned partitions (as given).
        """
        options = self._options
        if options.strategy == "assign":
            return {t: list(ps) for t, ps in options.assigned.items()}
        if options.strategy == "subscribe":
            return self._admin.topic_partitions(options.topics)
        pattern = re.compile(options.pattern)
        every = self._admin.topic_partitions()
        return {t: every[t] for t in sorted(every) if pattern.fullmatch(t)}

    def offsets(
        self, partitions: dict[str, list[int]], *, ends: bool = True, starts: bool = True
    ) -> tuple[Offsets, Offsets]:
        """Kafka's end and log start offsets of ``partitions``, both requests in flight at once.

        Both answers are in before this returns, so a layout read afterwards comes after
        the end offsets (what the gates need). The end is the last stable offset under
        ``kafka.isolation.level=read_committed``.

        Returns:
            ``(end offsets, log start offsets)``; a dict not asked for is empty.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        return self._admin.offsets(
            partitions, ends=ends, starts=starts, isolation_level=self._isolation
        )

    # --- the layout store -------------------------------------------------------------

    def _open_store(self) -> tuple[Any, LayoutStore]:
        """Start a ZooKeeper session and a store on it (imports the store on first use)."""
        import coordinator.kernel.history  # noqa: F401  (loaded here, off the caller's path)
        from coordinator.kernel.store import LayoutStore
        from coordinator.kernel.zk import make_client, start_client

        options = self._options
        assert options.zookeeper_connect is not None
        client = make_client(
            options.zookeeper_connect,
            session_timeout_s=options.zookeeper_session_timeout_ms / 1000.0,
            # A layout read rides out a ZooKeeper restart as a Kafka call rides out a
            # broker's: bounded by the same timeout, not the store's 5 s default, after
            # which the query would fail (seen in `ordered chaos --spark`).
            command_deadline_s=self._timeout,
            auth=options.zookeeper_auth,
            acl_root=options.zookeeper_root,
            tls=options.zookeeper_tls,
        )
        start_client(
            client,
            max(10.0, options.zookeeper_session_timeout_ms / 1000.0),
            "ordered.zookeeper.connect",
        )
        return client, LayoutStore(client, options.zookeeper_root)

    def _open_in_background(self, future: Future[tuple[Any, LayoutStore]]) -> None:
        try:
            future.set_result(self._open_store())
        except BaseException as exc:  # handed to the caller of _layout_store
            future.set_exception(exc)

    def _layout_store(self) -> LayoutStore | None:
        if self._options.zookeeper_connect is None:
            return None
        if self._store is None:
            opening, self._opening = self._opening, None
            # A failed background start raises here, where a synchronous one would; the
            # next call tries again.
            client, store = opening.result() if opening is not None else self._open_store()
            self._kazoo, self._store = client, store
        return self._store

    def histories(self, topics: Iterable[str]) -> dict[str, TopicHistory]:
        """Each topic's layout history, read after a ZooKeeper ``sync``.

        Without ``ordered.zookeeper.connect`` every topic is plain (not adopted).

        Raises:
            StoreError: ZooKeeper is unreachable or holds a corrupt record.
        """
        from coordinator.kernel.history import TopicHistory, load_history

        store = self._layout_store()
        out: dict[str, TopicHistory] = {}
        for topic in topics:
            if store is None:
                out[topic] = TopicHistory(topic, None)
                continue
            history = load_history(store, topic, sync=True, previous=self._histories.get(topic))
            out[topic] = self._histories[topic] = history
        return out

    def close(self) -> None:
        """Close the ZooKeeper session and the admin helper.

        A session still being opened in the background is closed once it is open.
        """
        from coordinator.kernel.zk import close_client

        self._admin.close()
        opening, self._opening = self._opening, None
        if opening is not None:
            opening.add_done_callback(_close_opened)
        if self._kazoo is not None:
            close_client(self._kazoo)
            self._kazoo = None
            self._store = None


def _close_opened(opening: Future[tuple[Any, Any]]) -> None:
    """Close the session of a background start that nobody used (never raises)."""
    from coordinator.kernel.zk import close_client

    if opening.exception() is None:
        close_client(opening.result()[0])
