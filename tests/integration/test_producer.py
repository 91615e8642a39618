"""OrderedProducer against the real Kafka and ZooKeeper: routing, headers, sessions."""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from fixtures import consume_all, expire_session, producer_record, run_in_background
from helpers import consume_until, unique, wait_until
from kit import Kit
from prometheus_client import CollectorRegistry

from coordinator.client.store import LayoutStore
from coordinator.client.store import paths as store_paths
from coordinator.client.zk import close_client
from linear_hash import DEFAULT_ALGORITHM, Layout, partition_for
from ordered import (
    ConfigError,
    LayoutUnavailableError,
    OrderedError,
    OrderedProducer,
    SwitchDrainingError,
    TopicState,
)
from ordered.compaction import TOMBSTONE_HEADER
from ordered.consumer import OrderedConsumer
from ordered.hooks import PrometheusHooks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]

KEYS = [f"key-{i}" for i in range(200)] + ["", "ключ", "\U0001f511"]


def header(msg: Any, name: str = "ordered.epoch") -> bytes | None:
    for key, value in msg.headers() or []:
        if key == name:
            return bytes(value)
    return None


def produce_keys(producer: OrderedProducer | Producer, topic: str, tag: str) -> list[Any]:
    """Produce every key once; return the delivery reports (err, msg)."""
    reports: list[Any] = []
    for key in KEYS:
        producer.produce(
            topic,
            value=f"{tag}:{key}".encode(),
            key=key,
            on_delivery=lambda e, m: reports.append((e, m)),
        )
    assert producer.flush(20) == 0
    assert all(err is None for err, _ in reports)
    return reports


@contextlib.contextmanager
def writing_meanwhile(
    producer: OrderedProducer,
    write: Callable[[int], None],
    backoff: float = 0.0,
    pause: float = 0.0,
) -> Iterator[None]:
    """Call ``write(0)``, ``write(1)``, ... in a thread while the block runs.

    ``producer`` is polled after each call; a ``BufferError`` (queue full, or a switch
    draining) is retried after ``poll(backoff)``; ``pause``: a sleep between calls. Once
    the block ends the thread stops, and what it raised is raised here.
    """
    stop = threading.Event()

    def run() -> None:
        i = 0
        while not stop.is_set():
            try:
                write(i)
                i += 1
            except BufferError:
                producer.poll(backoff)
            producer.poll(0)
            if pause:
                time.sleep(pause)

    writer = run_in_background(run)
    try:
        yield
    finally:
        stop.set()
    writer.join(10)


# --- plain topics ------------------------------------------------------------------


@pytest.mark.parametrize(
    "adoption", [None, {"ordered": False}], ids=["unadopted", "adopted-unordered"]
)
def test_a_plain_topic_is_written_as_by_a_plain_producer(
    kit: Kit, adoption: dict[str, Any] | None
) -> None:
    """A topic not adopted, or adopted as unordered: confluent's placement, no header."""
    topic = kit.topic_factory(4)
    if adoption is not None:
        kit.controller.adopt(topic, **adoption)
    ordered = kit.make_producer()
    plain = Producer({"bootstrap.servers": kit.bootstrap, "enable.idempotence": True})
    got = {m.key(): m.partition() for _, m in produce_keys(ordered, topic, "o")}
    want = {m.key(): m.partition() for _, m in produce_keys(plain, topic, "p")}
    # Same partitioner (librdkafka's), so the same placement, and no header.
    # (consistent_random places an empty key at random.)
    got.pop(b"")
    want.pop(b"")
    assert got == want
    assert ordered.topic_state(topic) is TopicState.PLAIN
    assert ordered.layout(topic) is None
    records = consume_all(kit.bootstrap, topic, timeout=20)
    assert len(records) == 2 * len(KEYS)
    assert all(m.headers() is None for m in records)
    # Same return values and exceptions as confluent.
    assert ordered.produce(topic, b"v") is None
    assert ordered.poll(0) >= 0
    assert ordered.flush(10) == 0
    assert len(ordered) == 0 and bool(ordered)
    with pytest.raises(KafkaException) as caught:
        ordered.produce(topic, b"v", partition=99)
    assert caught.value.args[0].code() == KafkaError._UNKNOWN_PARTITION
    with pytest.raises(TypeError):
        ordered.produce(topic, b"v", key=123)  # type: ignore[arg-type]


def test_config_errors(bootstrap: str, zk_hosts: str) -> None:
    base = {"bootstrap.servers": bootstrap, "ordered.zookeeper.connect": zk_hosts}
    with pytest.raises(ConfigError, match=r"ordered\.bogus"):
        OrderedProducer(dict(base, **{"ordered.bogus": 1}))
    with pytest.raises(ConfigError, match=r"enable\.idempotence"):
        OrderedProducer(dict(base, **{"enable.idempotence": False}))
    # librdkafka's own errors stay confluent's KafkaException.
    with pytest.raises(KafkaException):
        OrderedProducer(dict(base, **{"no.such.property": 1})).close()


# --- routing -----------------------------------------------------------------------


def test_routing_and_headers_across_transitions(kit: Kit) -> None:
    topic = kit.topic_factory(4)
    record = kit.controller.adopt(topic)
    producer = kit.make_producer(**{"ordered.epoch.header": True})
    produce_keys(producer, topic, "e0")
    assert producer.topic_state(topic) is TopicState.ROUTING
    kit.controller.expand(topic, 6, timeout=20)
    wait_until(lambda: producer.layout(topic) is not None and producer.layout(topic).epoch == 1)
    produce_keys(producer, topic, "e1")
    kit.controller.shrink(topic, 5, timeout=20)
    wait_until(lambda: producer.layout(topic) is not None and producer.layout(topic).epoch == 2)
    produce_keys(producer, topic, "e2")
    # Unkeyed records: round-robin over the active partitions only.
    unkeyed: list[int] = []
    for i in range(25):
        producer.produce(
            topic, b"nokey%d" % i, on_delivery=lambda e, m: unkeyed.append(m.partition())
        )
    # User headers are kept, the epoch header is appended.
    producer.produce(topic, b"h", key="hk", headers=[("mine", b"1")])
    producer.produce(topic, b"h", key="hk", headers={"mine": b"2"})
    assert producer.flush(20) == 0
    assert sorted(set(unkeyed)) == [0, 1, 2, 3, 4]

    actives = {0: 4, 1: 6, 2: 5}
    records = consume_all(kit.bootstrap, topic, timeout=20)
    keyed = [m for m in records if m.key() is not None]
    assert len(keyed) == 3 * len(KEYS) + 2
    for msg in records:
        raw = header(msg)
        assert raw is not None, msg.value()
        epoch = int(raw.decode("ascii"))
        assert (
            msg.value().startswith(b"nokey")
            or msg.value() == b"h"
            or msg.value().startswith(f"e{epoch}:".encode())
        )
        if msg.key() is not None:
            want = partition_for(msg.key(), record.initial, actives[epoch], record.algorithm)
            assert msg.partition() == want, (msg.key(), epoch)
        else:
            assert msg.partition() < actives[epoch]
    user = [m.headers() for m in records if m.value() == b"h"]
    assert sorted(user) == [
        [("mine", b"1"), ("ordered.epoch", b"2")],
        [("mine", b"2"), ("ordered.epoch", b"2")],
    ]


@pytest.mark.parametrize(
    ("partitions", "adoption", "settings", "expected"),
    [
        (4, {"algorithm": "murmur2"}, {"ordered.epoch.header": "false"}, None),
        (
            2,
            {},
            {"ordered.epoch.header.name": "layout-epoch", "ordered.epoch.header": True},
            ("layout-epoch", b"0"),
        ),
    ],
    ids=["header-off-murmur2", "custom-header-name"],
)
def test_epoch_header_settings_with_keyed_batch_and_explicit_records(
    kit: Kit,
    partitions: int,
    adoption: dict[str, Any],
    settings: dict[str, Any],
    expected: tuple[str, bytes] | None,
) -> None:
    """``produce``, ``produce_batch`` and an explicit partition, under one header setting.

    ``expected``: the header (name, value) every record carries; None: no header at all.
    """
    topic = kit.topic_factory(partitions)
    algorithm = adoption.get("algorithm", DEFAULT_ALGORITHM)
    assert kit.controller.adopt(topic, **adoption).algorithm == algorithm
    producer = kit.make_producer(**settings)
    produce_keys(producer, topic, "e0")
    messages = [{"key": f"b{i}", "value": b"batch"} for i in range(50)]
    assert producer.produce_batch(topic, messages) == 50
    producer.produce(topic, b"explicit", key="key-1", partition=partitions - 1)
    assert producer.flush(10) == 0
    records = consume_all(kit.bootstrap, topic, timeout=20)
    assert len(records) == len(KEYS) + 50 + 1
    for msg in records:
        if expected is None:
            assert msg.headers() is None
        else:
            assert header(msg, expected[0]) == expected[1]
        if msg.value() == b"explicit":
            assert msg.partition() == partitions - 1
        else:
            want = partition_for(msg.key(), partitions, partitions, algorithm)
            assert msg.partition() == want


def test_switch_acks_and_tracks(kit: Kit) -> None:
    """A producer that keeps writing acks each epoch; an idle one acks from the watcher."""
    topic = kit.adopted_topic(4)
    busy = kit.make_producer()
    idle = kit.make_producer()
    idle.produce(topic, b"once", key="x")
    assert idle.flush(10) == 0

    def write(i: int) -> None:
        busy.produce(topic, b"v", key=f"k{i % 500}")

    with writing_meanwhile(busy, write, backoff=0.01):
        time.sleep(0.3)
        result = kit.controller.expand(topic, 8, timeout=20)
        assert set(result.producers) == {busy.producer_id, idle.producer_id}
        assert result.expired == {}
        acks = kit.store.acks(topic, result.epoch)
        assert set(acks) == {busy.producer_id, idle.producer_id}
        # Where known (a new-epoch record was delivered before the drain ended), the
        # last old-epoch offsets lie below the sealed boundaries.
        assert all(o < result.boundaries[p] for p, o in acks[busy.producer_id].last_offsets.items())
        assert busy.layout(topic) is not None and busy.layout(topic).active == 8
    assert busy.flush(10) == 0
    wait_until(lambda: busy.topic_state(topic) is TopicState.ROUTING, timeout=5)


def test_close_acks_at_once(kit: Kit) -> None:
    """A producer registered but closed before a transition does not hold the barrier."""
    topic = kit.adopted_topic(2)
    producer = kit.make_producer()
    producer.produce(topic, b"v", key="k")
    assert producer.close() is True
    assert producer.close() is True  # idempotent
    node = store_paths.producer_path(kit.zk_root, topic, producer.producer_id)
    assert kit.store.client.exists(node) is None
    started = time.monotonic()
    kit.controller.expand(topic, 3, timeout=20)
    assert time.monotonic() - started < 5


# --- ZooKeeper sessions --------------------------------------------------------------


class Proxy:
    """A TCP relay to ZooKeeper that the test can cut and restore (a network partition)."""

    def __init__(self, target: str) -> None:
        host, port = target.split(",")[0].rsplit(":", 1)
        self._target = (host, int(port))
        self._server = socket.create_server(("127.0.0.1", 0))
        self.port = self._server.getsockname()[1]
        self._open = threading.Event()
        self._open.set()
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()
        self._closed = False
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._server.accept()
            except OSError:
                return
            if not self._open.is_set():
                client.close()
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                client.close()
                continue
            with self._lock:
                self._sockets += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(65536):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)

    def cut(self) -> None:
        self._open.clear()
        with self._lock:
            for s in self._sockets:
                with contextlib.suppress(OSError):
                    s.shutdown(socket.SHUT_RDWR)
                s.close()
            self._sockets.clear()

    def restore(self) -> None:
        self._open.set()

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._server.close()


@pytest.fixture
def proxy(zk_hosts: str) -> Iterator[Proxy]:
    relay = Proxy(zk_hosts)
    yield relay
    relay.close()


def keyed_produce_works(producer: OrderedProducer, topic: str) -> bool:
    try:
        producer.produce(topic, b"probe", key="probe")
    except LayoutUnavailableError:
        return False
    return True


def test_suspended_session_raises_then_recovers(kit: Kit, proxy: Proxy) -> None:
    topic = kit.adopted_topic(4)
    producer = kit.make_producer(
        **{
            "ordered.zookeeper.connect": f"127.0.0.1:{proxy.port}",
            "ordered.zookeeper.session.timeout.ms": 2000,
        }
    )
    assert keyed_produce_works(producer, topic)
    node = store_paths.producer_path(kit.zk_root, topic, producer.producer_id)
    owner = kit.store.client.exists(node).ephemeralOwner

    # A short partition: SUSPENDED, the same session comes back.
    proxy.cut()
    wait_until(lambda: producer.topic_state(topic) is TopicState.SUSPENDED, timeout=10)
    with pytest.raises(LayoutUnavailableError) as caught:
        producer.produce(topic, b"v", key="k")
    assert isinstance(caught.value, BufferError) and isinstance(caught.value, OrderedError)
    # Unkeyed and explicitly partitioned records still go (no key order to keep).
    producer.produce(topic, b"unkeyed")
    producer.produce(topic, b"explicit", key="k", partition=1)
    proxy.restore()
    wait_until(lambda: keyed_produce_works(producer, topic), timeout=10)
    assert producer.topic_state(topic) is TopicState.ROUTING
    assert kit.store.client.exists(node).ephemeralOwner == owner

    # A partition longer than the session: LOST, re-registered with a new session.
    proxy.cut()
    wait_until(lambda: kit.store.client.exists(node) is None, timeout=15, what="session expiry")
    with pytest.raises(LayoutUnavailableError):
        producer.produce(topic, b"v", key="k")
    proxy.restore()
    wait_until(lambda: keyed_produce_works(producer, topic), timeout=15)
    stat = kit.store.client.exists(node)
    assert stat is not None and stat.ephemeralOwner != owner
    assert producer.topic_state(topic) is TopicState.ROUTING
    assert producer.flush(10) == 0


def test_expired_session_reregisters_and_reads_new_layout(kit: Kit) -> None:
    topic = kit.topic_factory(4)
    record = kit.controller.adopt(topic)
    producer = kit.make_producer(**{"delivery.timeout.ms": 2000, "ordered.epoch.header": True})
    assert keyed_produce_works(producer, topic)
    assert producer.flush(10) == 0
    node = store_paths.producer_path(kit.zk_root, topic, producer.producer_id)
    owner = kit.store.client.exists(node).ephemeralOwner
    expire_session(producer.zookeeper, kit.zk_hosts)
    # The registration is back under a new session, and routing resumes.
    wait_until(
        lambda: (
            (stat := kit.store.client.exists(node)) is not None and stat.ephemeralOwner != owner
        ),
        timeout=15,
    )
    wait_until(lambda: keyed_produce_works(producer, topic), timeout=15)
    # Delivery reports must be served (as in any confluent app) for the ack to come.
    assert producer.flush(10) == 0
    # The re-registered producer is in the next barrier and acks it.
    result = kit.controller.expand(topic, 5, timeout=20)
    assert producer.producer_id in result.producers
    assert result.expired == {}
    wait_until(lambda: producer.layout(topic) is not None and producer.layout(topic).active == 5)
    produce_keys(producer, topic, "after")
    for msg in consume_all(kit.bootstrap, topic, timeout=20):
        if msg.value().startswith(b"after:"):
            assert header(msg) == b"1"
            assert msg.partition() == partition_for(msg.key(), 4, 5, record.algorithm)


def test_only_error_reports_are_emulated_and_do_not_stall_the_barrier(kit: Kit) -> None:
    """librdkafka would hide successful reports from the tracking callbacks too."""
    topic = kit.adopted_topic(2)
    global_reports: list[Any] = []
    own_reports: list[Any] = []
    producer = kit.make_producer(
        **{
            "delivery.report.only.error": True,
            "on_delivery": lambda err, msg: global_reports.append(err),
        }
    )

    def write(i: int) -> None:
        producer.produce(topic, b"v", key=f"k{i % 50}")
        producer.produce(
            topic, b"w", key=f"k{i % 50}", on_delivery=lambda e, m: own_reports.append(e)
        )

    with writing_meanwhile(producer, write, pause=0.0005):
        time.sleep(0.2)
        result = kit.controller.expand(topic, 3, timeout=20)
        assert result.expired == {}
        assert producer.producer_id in result.producers
    assert producer.flush(10) == 0
    # Only failures would have been reported: there were none.
    assert global_reports == [] and own_reports == []
    # ... while every tracked record's report reached the barrier's bookkeeping (with
    # librdkafka filtering, successes would never be counted and the drain would be
    # judged on wrong counts).
    assert producer._tracker.total == 0
    # A failure is still reported, to the per-record callback.
    producer.produce(
        topic, b"x", key="k", partition=1, on_delivery=lambda e, m: own_reports.append(e)
    )
    producer.purge()
    producer.flush(10)
    assert len(own_reports) == 1 and own_reports[0] is not None


def test_pause_mode_refuses_records_until_the_switch_drains_and_tracks_none(kit: Kit) -> None:
    """``ordered.switch.mode=pause``: a BufferError until the older records are delivered.

    confluent's own ``delivery.report.only.error`` drops every success report, tracked
    ones too: a tracked record would never be counted done and the switch never acked
    (the expansion below would time out).
    """
    topic = kit.adopted_topic(2)
    reports: list[Any] = []
    producer = kit.make_producer(
        **{
            "delivery.report.only.error": True,
            "ordered.switch.mode": "pause",
            "on_delivery": lambda err, msg: reports.append(err),
        }
    )
    for i in range(200):
        producer.produce(topic, b"old", key=f"k{i}")
    # Not polled: the reports of these records stay unserved, so they are pending
    # (len > 0) when the producer switches.
    assert len(producer) > 0
    expansion = run_in_background(kit.controller.expand, topic, 3, timeout=30)
    wait_until(
        lambda: producer.topic_state(topic) is TopicState.SWITCHING,
        what="the producer to switch to the pending epoch",
    )
    with pytest.raises(SwitchDrainingError, match="poll\\(\\) and retry") as raised:
        producer.produce(topic, b"new", key="k1")
    assert isinstance(raised.value, BufferError)
    assert len(producer) > 0 and producer._tracker.total == 0

    # The usual retry loop: poll serves the reports, the drain ends, the record goes.
    def produced() -> bool:
        try:
            producer.produce(topic, b"new", key="k1")
        except BufferError:
            producer.poll(0.05)
            return False
        return True

    wait_until(produced, 20, what="the switch to drain", interval=0)
    result = expansion.join(30)
    assert result.expired == {} and producer.producer_id in result.producers
    assert producer.flush(10) == 0
    assert producer._tracker.total == 0 and not producer._tracker.tracking
    assert reports == []  # only failures are reported: there were none
    layout = producer.layout(topic)
    assert layout is not None and layout.active == 3


@pytest.mark.parametrize(
    ("compiled", "mode"),
    [(True, "track"), (False, "track"), (True, "pause")],
    ids=["compiled", "python", "pause"],
)
def test_only_error_default_callback_gets_every_failure_and_no_success(
    kit: Kit, monkeypatch: pytest.MonkeyPatch, compiled: bool, mode: str
) -> None:
    """Untracked records: the default callback sees each failure once, never a success.

    Track mode emulates the setting (the compiled or the Python filter); pause mode
    leaves it to confluent.
    """
    import ordered.producer.send as producer_module
    from ordered.producer.tracking import OnlyError

    if compiled and not producer_module.COMPILED:
        pytest.skip("the compiled send path is not built")
    if compiled:
        assert producer_module._ONLY_ERROR is not OnlyError
    else:
        monkeypatch.setattr(producer_module, "_ONLY_ERROR", OnlyError)
    topic = kit.adopted_topic(2)
    reports: list[Any] = []
    producer = kit.make_producer(
        **{
            "delivery.report.only.error": True,
            "ordered.switch.mode": mode,
            "on_delivery": lambda err, msg: reports.append((err, msg.value())),
        }
    )
    assert producer._emulate is (mode == "track")
    for i in range(500):
        producer.produce(topic, b"ok", f"k{i}")
    assert producer.flush(20) == 0
    assert reports == []
    assert not producer._tracker.tracking  # untracked: the default callback alone reports
    producer.produce(topic, b"purged-1", "k1")
    producer.produce(topic, b"purged-2", "k2")
    producer.purge()
    producer.flush(10)
    assert sorted(value for _, value in reports) == [b"purged-1", b"purged-2"]
    assert all(err.code() == KafkaError._PURGE_QUEUE for err, _ in reports)


def test_transactions_pass_through(kit: Kit) -> None:
    topic = kit.adopted_topic(3)
    producer = kit.make_producer(
        **{"transactional.id": f"tx-{topic}", "ordered.epoch.header": True}
    )
    producer.init_transactions(30)
    producer.begin_transaction()
    for key in KEYS[:20]:
        producer.produce(topic, b"committed", key=key)
    producer.commit_transaction(30)
    producer.begin_transaction()
    producer.produce(topic, b"aborted", key="x")
    producer.abort_transaction(30)
    consumer = Consumer(
        {
            "bootstrap.servers": kit.bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(3)])
        got = consume_until(consumer, 20, 20, wait=0.5, skip_errors=True)
        time.sleep(0.5)
        got += [m for m in consumer.consume(100, timeout=0.5) if m.error() is None]
    finally:
        consumer.close()
    assert sorted(m.value() for m in got) == [b"committed"] * 20
    for msg in got:
        assert header(msg) == b"0"
        assert msg.partition() == partition_for(msg.key(), 3, 3)


def test_first_use_during_a_pending_epoch(kit: Kit) -> None:
    """A producer that first sees a topic mid-transition routes by the pending epoch and
    acks it at once (it has nothing older in flight)."""
    topic = kit.adopted_topic(2)
    # Another process's producer that never acks: the barrier waits for it.
    other = kit.kazoo_factory()
    try:
        LayoutStore(other, kit.zk_root).register_producer(
            topic, producer_record("stuck", 1000, host="h", client_id="")
        )
        expand = run_in_background(kit.controller.expand, topic, 3, timeout=30)
        wait_until(lambda: (t := kit.store.get_topic(topic)) is not None and t.pending == 1)
        producer = kit.make_producer(**{"ordered.epoch.header": True})
        produce_keys(producer, topic, "mid")
        assert producer.layout(topic) == Layout(2, 3, 1)
        assert producer.topic_state(topic) is TopicState.ROUTING
        wait_until(lambda: producer.producer_id in kit.store.acks(topic, 1), timeout=10)
    finally:
        close_client(other)
    expand.join(30)
    assert kit.store.get_epoch(topic, 1).sealed
    for msg in consume_all(kit.bootstrap, topic, timeout=20):
        assert header(msg) == b"1"
        assert msg.partition() == partition_for(msg.key(), 2, 3)


def test_first_use_without_zookeeper_raises_buffer_error(
    make_producer: Callable[..., OrderedProducer],
    topic_factory: Callable[..., str],
    proxy: Proxy,
) -> None:
    topic = topic_factory(2)
    producer = make_producer(**{"ordered.zookeeper.connect": f"127.0.0.1:{proxy.port}"})
    proxy.cut()
    wait_until(lambda: producer.zookeeper.state != "CONNECTED", timeout=15)
    with pytest.raises(LayoutUnavailableError):
        producer.produce(topic, b"v", key="k")
    assert producer.topic_state(topic) is TopicState.UNKNOWN
    proxy.restore()
    wait_until(lambda: keyed_produce_works(producer, topic), timeout=15)
    assert producer.topic_state(topic) is TopicState.PLAIN
    assert producer.flush(10) == 0


def test_close_is_bounded_while_zookeeper_is_unreachable(kit: Kit, proxy: Proxy) -> None:
    topic = kit.adopted_topic(2)
    producer = kit.make_producer(**{"ordered.zookeeper.connect": f"127.0.0.1:{proxy.port}"})
    assert keyed_produce_works(producer, topic)
    proxy.cut()
    wait_until(lambda: producer.zookeeper.state != "CONNECTED", timeout=15)
    producer.produce(topic, b"unkeyed")  # still goes: no key order to keep
    started = time.monotonic()
    assert producer.close() is True
    # Flushed (Kafka is up); no ZooKeeper write is tried while it is unreachable.
    assert time.monotonic() - started < 3.0
    assert producer.zookeeper.state == "LOST"


def test_compacted_topic_gets_tombstone_copies_that_ordered_consumers_skip(kit: Kit) -> None:
    """KIP-253 section 9: a moved key's first record tombstones its old partition."""
    topic = kit.topic_factory(2, config={"cleanup.policy": "compact"})
    assert kit.controller.adopt(topic).compacted
    keys = [f"c-{i}" for i in range(40)]
    registry = CollectorRegistry()
    metrics = PrometheusHooks(registry)
    producer = kit.make_producer(**{"ordered.epoch.header": True, "ordered.hooks": [metrics]})
    reports: list[Any] = []

    def produce_all(value: bytes) -> None:
        for key in keys:
            producer.produce(
                topic, value=value, key=key, on_delivery=lambda e, m: reports.append(m)
            )
        assert producer.flush(30) == 0

    produce_all(b"v0")
    assert producer.tombstone_copies == 0  # 2 == initial: no key lives above it yet
    kit.controller.expand(topic, 4, timeout=30)
    # Copies are sent again once the producer sees the seal: wait for it, so that each
    # phase below has one route.
    wait_until(
        lambda: (record := producer.topic_record(topic)) is not None and record.pending is None,
        timeout=10,
        what="the producer to see epoch 1 sealed",
    )
    produce_all(b"v1")
    moved = {k: partition_for(k, 2, 4) for k in keys if partition_for(k, 2, 4) >= 2}
    assert moved and producer.tombstone_copies == len(moved)
    produce_all(b"v2")  # the same route: each key's copy was sent once
    assert producer.tombstone_copies == len(moved)
    # Delivery reports are the application's records only.
    assert len(reports) == 3 * len(keys) and all(m.value() is not None for m in reports)

    records = consume_all(kit.bootstrap, topic, timeout=20)
    copies = [m for m in records if m.value() is None]
    assert sorted((m.key().decode(), m.partition()) for m in copies) == sorted(
        (k, p - 2) for k, p in moved.items()
    )
    for m in copies:
        key = m.key().decode()
        assert header(m, TOMBSTONE_HEADER) == str(moved[key]).encode()
        assert header(m) == b"1"  # routed under epoch 1, like the record it goes with
        # The copy follows the key's old value in the old partition.
        old = [r for r in records if r.key() == m.key() and r.partition() == m.partition()]
        assert [r.value() for r in old] == [b"v0", None]

    group = unique("g")
    consumer = OrderedConsumer(
        {
            "bootstrap.servers": kit.bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
            "ordered.zookeeper.connect": kit.zk_hosts,
            "ordered.zookeeper.root": kit.zk_root,
            "ordered.gate.poll.interval.ms": 50,
            "ordered.violation.policy": "raise",
            "ordered.hooks": [metrics],
        }
    )
    try:
        consumer.subscribe([topic])
        seen: dict[str, list[bytes | None]] = {}
        for m in consume_until(
            consumer,
            3 * len(keys),
            30,
            after_batch=lambda _batch: consumer.commit(asynchronous=False),
        ):
            seen.setdefault(m.key().decode(), []).append(m.value())
        assert seen == {k: [b"v0", b"v1", b"v2"] for k in keys}
        assert consumer.metrics["tombstone_copies_dropped"] == len(moved)
        assert consumer.violations == 0
        sent = registry.get_sample_value(
            "ordered_producer_tombstone_copies_total", {"topic": topic}
        )
        assert sent == len(moved)
        dropped = sum(
            registry.get_sample_value(
                "ordered_consumer_tombstone_copies_dropped_total",
                {"group": group, "topic": topic, "partition": str(p)},
            )
            or 0
            for p in range(4)
        )
        assert dropped == len(moved)
    finally:
        consumer.close()
