"""The test fixtures module: clients the tests make, and tear down, in one place.

A pytest plugin (``pytest_plugins`` in ``conftest.py``). Fixtures: ``kazoo_factory``,
``zk``, ``make_producer``, ``make_consumer``, ``ordered_cli``. Helpers: :func:`lose_connection`,
:func:`expire_session`, :func:`consume_all`, :func:`run_in_background`. Every ZooKeeper
client comes from ``coordinator.kernel.zk``; nothing here fakes a server.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from helpers import run_cli, wait_until
from kazoo.client import KazooClient, KazooState
from kazoo.protocol.connection import _CONNECTION_DROP

from coordinator.kernel.store import ProducerRecord
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import OrderedProducer, devcluster
from ordered.consumer import OrderedConsumer
from ordered.devcluster.cluster import ClusterState

__all__ = [
    "CONSUMER_DEFAULTS",
    "Background",
    "consume_all",
    "consumer_config",
    "epoch_of",
    "expire_session",
    "jvm_processes",
    "kazoo_factory",
    "lose_connection",
    "make_consumer",
    "make_producer",
    "ordered_cli",
    "producer_record",
    "run_in_background",
    "snapshot",
    "zk",
]


@pytest.fixture
def kazoo_factory(zk_hosts: str) -> Iterator[Callable[..., KazooClient]]:
    """Make started kazoo clients (``coordinator.kernel.zk``); every one is closed at teardown.

    ``kazoo_factory(hosts=None, session_timeout_s=6.0, command_deadline_s=None)``:
    ``hosts`` defaults to ``zk_hosts``, the session ZooKeeper (no chroot).
    """
    made: list[KazooClient] = []

    def make(
        hosts: str | None = None,
        *,
        session_timeout_s: float = 6.0,
        command_deadline_s: float | None = None,
    ) -> KazooClient:
        client = make_client(
            hosts or zk_hosts,
            session_timeout_s=session_timeout_s,
            command_deadline_s=command_deadline_s,
        )
        made.append(client)
        return start_client(client, 15.0)

    yield make
    for client in made:
        close_client(client)


@pytest.fixture
def zk(kazoo_factory: Callable[..., KazooClient]) -> KazooClient:
    """A started kazoo client on the session ZooKeeper (no chroot), closed at teardown."""
    return kazoo_factory()


def _hosts_of(client: KazooClient) -> str:
    return ",".join(f"{host}:{port}" for host, port in client.hosts)


def lose_connection(client: KazooClient, timeout: float = 15.0) -> None:
    """Drop ``client``'s connection (not its session), the way kazoo's own harness does.

    The client sees SUSPENDED and reconnects to the same session.
    """
    left = threading.Event()

    def watch(state: str) -> bool:
        if state != KazooState.CONNECTED:
            left.set()
            return True
        return False

    client.add_listener(watch)
    client._call(_CONNECTION_DROP, None)
    assert left.wait(timeout), "the connection was not dropped"


def expire_session(client: KazooClient, hosts: str | None = None, timeout: float = 15.0) -> None:
    """Expire ``client``'s ZooKeeper session for real, the way kazoo's own harness does.

    A second connection that reuses the session id and password and then closes makes
    the server expire the session; ``client`` sees EXPIRED_SESSION (``LOST``) and
    reconnects with a new session. Returns once it is connected again; the listener
    it adds is removed. ``hosts`` defaults to the servers ``client`` talks to.
    """
    lost = threading.Event()
    back = threading.Event()

    def watch(state: str) -> bool:
        # kazoo's thread: flags only; returning True removes the listener.
        if state == KazooState.LOST:
            lost.set()
        elif state == KazooState.CONNECTED and lost.is_set():
            back.set()
            return True
        return False

    client.add_listener(watch)
    try:
        other = make_client(hosts or _hosts_of(client), client_id=client.client_id)
        try:
            start_client(other, timeout)
        finally:
            close_client(other)
        assert lost.wait(timeout), "the session did not expire"
        assert back.wait(timeout), "the client did not reconnect after the expiry"
    finally:
        client.remove_listener(watch)


@pytest.fixture
def ordered_cli(zk_hosts: str, zk_root: str, bootstrap: str) -> Callable[..., Any]:
    """Run ``ordered`` against the session cluster under this test's store root.

    ``ordered_cli(*args, zookeeper=..., kafka=..., session_timeout="2")`` returns the
    CompletedProcess; ``session_timeout=None`` leaves the command's own default.
    """

    def run(
        *args: str,
        zookeeper: str = zk_hosts,
        kafka: str = bootstrap,
        session_timeout: str | None = "2",
    ) -> Any:
        timeout = ("--session-timeout", session_timeout) if session_timeout else ()
        return run_cli(
            *args,
            "--zookeeper",
            zookeeper,
            "--bootstrap-servers",
            kafka,
            "--root",
            zk_root,
            *timeout,
            timeout=60,
        )

    return run


def producer_record(
    producer_id: str,
    delivery_timeout_ms: int = 30000,
    *,
    host: str = "test",
    pid: int = 1,
    client_id: str = "test",
) -> ProducerRecord:
    """A producer registration as another process's producer would write it, made now."""
    return ProducerRecord(
        id=producer_id,
        host=host,
        pid=pid,
        delivery_timeout_ms=delivery_timeout_ms,
        registered_at=time.time(),
        client_id=client_id,
    )


def snapshot(client: KazooClient, root: str) -> dict[str, tuple[bytes, int]]:
    """Every znode under ``root`` with its data and version."""
    out: dict[str, tuple[bytes, int]] = {}

    def walk(path: str) -> None:
        if client.exists(path) is None:
            return
        data, stat = client.get(path)
        out[path] = (data, stat.version)
        for child in client.get_children(path):
            walk(f"{path}/{child}")

    walk(root)
    return out


@pytest.fixture
def make_producer(
    bootstrap: str, zk_hosts: str, zk_root: str
) -> Iterator[Callable[..., OrderedProducer]]:
    """Make ``OrderedProducer``s on this test's root (``linger.ms`` 2 unless overridden).

    ``make_producer(**extra)``; every producer made is closed at teardown.
    """
    made: list[OrderedProducer] = []

    def make(**extra: Any) -> OrderedProducer:
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zk_hosts,
            "ordered.zookeeper.root": zk_root,
            "linger.ms": 2,
            **extra,
        }
        producer = OrderedProducer(config)
        made.append(producer)
        return producer

    yield make
    for producer in made:
        with contextlib.suppress(Exception):
            producer.close()


@pytest.fixture
def jvm_processes() -> Iterator[list[Any]]:
    """The driver JVMs a test starts (``jvm_helpers``' readers): the test appends each, and
    each is killed at teardown."""
    started: list[Any] = []
    yield started
    for process in started:
        process.kill()


CONSUMER_DEFAULTS: dict[str, Any] = {
    "auto.offset.reset": "earliest",
    "enable.auto.commit": False,
    "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 500,
    "ordered.gate.poll.interval.ms": 50,
}
"""The tests' ``OrderedConsumer`` settings: from the start, no auto-commit, fast gates."""


def consumer_config(
    bootstrap: str, zk_hosts: str, zk_root: str, group: str, **extra: Any
) -> dict[str, Any]:
    """The tests' ``OrderedConsumer`` configuration (:data:`CONSUMER_DEFAULTS`)."""
    return {
        **CONSUMER_DEFAULTS,
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
        **extra,
    }


@pytest.fixture
def make_consumer(
    bootstrap: str, zk_hosts: str, zk_root: str
) -> Iterator[Callable[..., OrderedConsumer]]:
    """Make ``OrderedConsumer``s on this test's root: ``make_consumer(group, **extra)``.

    Every consumer made is closed at teardown.
    """
    made: list[OrderedConsumer] = []

    def make(group: str, **extra: Any) -> OrderedConsumer:
        consumer = OrderedConsumer(consumer_config(bootstrap, zk_hosts, zk_root, group, **extra))
        made.append(consumer)
        return consumer

    yield make
    for consumer in made:
        consumer.close()


def consume_all(
    bootstrap: str, topic: str, timeout: float = 60.0, security: dict[str, str] | None = None
) -> list[Any]:
    """Every record of ``topic``: a plain consumer, all partitions from the beginning.

    Reads up to the high watermarks seen at the start; fails after ``timeout`` seconds.
    ``security``: librdkafka SASL/SSL settings (the secure cluster's users).
    """
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "unused",
            "enable.auto.commit": False,
            **(security or {}),
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        ends = {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in partitions
        }
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        seen = dict.fromkeys(ends, 0)
        out: list[Any] = []

        def at_the_ends() -> bool:
            if all(seen[p] >= ends[p] for p in ends):
                return True
            for msg in consumer.consume(10000, timeout=0.5):
                if msg.error() is not None:
                    raise KafkaException(msg.error())
                out.append(msg)
                seen[msg.partition()] = msg.offset() + 1
            return False

        wait_until(at_the_ends, timeout, what=lambda: f"offsets {ends} ({seen})", interval=0)
        return out
    finally:
        consumer.close()


def epoch_of(msg: Any) -> int:
    """The ``ordered.epoch`` header of ``msg`` as a number; fail if it has none."""
    for key, value in msg.headers() or []:
        if key == "ordered.epoch":
            return int(bytes(value).decode("ascii"))
    raise AssertionError(f"no epoch header on {msg.value()!r}")


class Background:
    """A call running in a daemon thread; ``join`` returns its result or raises its error."""

    def __init__(self, call: Callable[[], Any]) -> None:
        self._result: Any = None
        self._error: BaseException | None = None
        self.finished_at = 0.0
        self._thread = threading.Thread(target=self._run, args=(call,), daemon=True)
        self._thread.start()

    def _run(self, call: Callable[[], Any]) -> None:
        try:
            self._result = call()
        except BaseException as exc:
            self._error = exc
        self.finished_at = time.monotonic()

    def is_alive(self) -> bool:
        """Whether the call is still running."""
        return self._thread.is_alive()

    def check(self) -> None:
        """Raise the call's exception now if it failed (a wait on it would time out)."""
        if self._error is not None:
            raise self._error

    def join(self, timeout: float = 30.0) -> Any:
        """Wait up to ``timeout`` s; fail if still running, else return or raise its outcome."""
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the background call did not finish"
        if self._error is not None:
            raise self._error
        return self._result


def run_in_background(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Background:
    """Start ``call(*args, **kwargs)`` in a daemon thread and return its :class:`Background`."""
    return Background(lambda: call(*args, **kwargs))


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[tuple[ClusterState, Path]]:
    """A one-broker cluster of this test alone (its broker may be stopped or restarted)."""
    directory = tmp_path / "cluster"
    state = devcluster.up(directory)
    try:
        yield state, directory
    finally:
        devcluster.down(directory)  # idempotent: a test may have stopped it already
