"""OrderedProducer against the real Kafka and ZooKeeper: ZooKeeper sessions (suspended,
expired, absent, unreachable at close).
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fixtures import consume_all, expire_session
from helpers import wait_until
from kit import Kit
from producer_helpers import header, produce_keys

from coordinator.kernel.store import paths as store_paths
from linear_hash import partition_for
from ordered import (
    LayoutUnavailableError,
    OrderedError,
    OrderedProducer,
    TopicState,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


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
    # The first record of a topic is held while its topic id is checked in the
    # background (registration included): delivered, it was checked and routed.
    return producer.flush(15) == 0


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
