"""The chaos run's fault proxies in front of a real Kafka broker and a real ZooKeeper.

The cluster is this module's own: its broker has the extra ``CLIENT`` listener advertised
at a proxy's port (``devcluster.up(client_listeners=...)``), which the session cluster
has not.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from helpers import wait_until
from kazoo.client import KazooClient, KazooState

from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster
from ordered.chaos.net_faults import NetProxies
from ordered.chaos.netproxy import Mode
from ordered.devcluster.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


@pytest.fixture(scope="module")
def proxied(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[NetProxies, ClusterState]]:
    proxies = NetProxies(brokers=1)
    directory: Path = tmp_path_factory.mktemp("netproxy") / "cluster"
    try:
        state = devcluster.up(directory, client_listeners=proxies.client_listeners, timeout=180.0)
        proxies.set_zookeeper(state.zookeeper_connect)
        yield proxies, state
    finally:
        devcluster.down(directory)
        proxies.close()


def _producer(bootstrap: str) -> Producer:
    return Producer(
        {
            "bootstrap.servers": bootstrap,
            "reconnect.backoff.max.ms": 500,
            "socket.connection.setup.timeout.ms": 2000,
            "log_level": 0,
        }
    )


def test_kafka_clients_follow_the_proxy_and_stall_while_it_is_cut_or_blackholed(
    proxied: tuple[NetProxies, ClusterState],
) -> None:
    proxies, state = proxied
    [proxy] = proxies.kafka
    direct = AdminClient({"bootstrap.servers": state.bootstrap_servers})
    via = AdminClient({"bootstrap.servers": proxies.bootstrap})
    # The broker advertises its proxy to clients that came through it, itself to others.
    assert [b.port for b in via.list_topics(timeout=30).brokers.values()] == [proxy.port]
    direct_port = int(state.bootstrap_servers.rsplit(":", 1)[1])
    assert [b.port for b in direct.list_topics(timeout=30).brokers.values()] == [direct_port]
    direct.create_topics([NewTopic("np", 1, 1)])["np"].result(30)

    producer = _producer(proxies.bootstrap)
    acked: list[int] = []

    def produce() -> None:
        producer.produce("np", b"v", on_delivery=lambda err, _m: acked.append(0 if err else 1))

    produce()
    assert producer.flush(30) == 0 and acked == [1]
    before = proxy.stats.bytes_up

    for mode in (Mode.BLACKHOLE, Mode.CUT):
        proxy.set_mode(mode)
        produce()
        # Nothing reaches the broker while the fault lasts: the record stays queued.
        assert producer.flush(3) == 1, mode
        proxy.set_mode(Mode.PASS)
        assert producer.flush(30) == 0, mode
    assert acked == [1, 1, 1]
    assert proxy.stats.bytes_up > before
    assert proxy.stats.reset >= 1

    proxy.set_mode(Mode.LATENCY, latency_ms=300)
    started = time.monotonic()
    produce()
    assert producer.flush(30) == 0
    assert time.monotonic() - started >= 0.6  # at least one round trip, delayed each way
    proxy.set_mode(Mode.PASS)


def test_zookeeper_proxies_are_per_process(proxied: tuple[NetProxies, ClusterState]) -> None:
    proxies, _state = proxied
    clients: dict[str, KazooClient] = {}
    states: dict[str, list[KazooState]] = {"a": [], "b": []}
    for name in ("a", "b"):
        client = make_client(proxies.zookeeper_for(name), session_timeout_s=4.0)
        client.add_listener(states[name].append)
        clients[name] = start_client(client, 30.0)
    try:
        [proxy_a] = proxies.by_slot["a"]
        proxy_a.set_mode(Mode.CUT)
        wait_until(lambda: clients["a"].state == KazooState.SUSPENDED, timeout=10)
        # The other process keeps its session and writes on.
        clients["b"].ensure_path("/netproxy-b")
        assert clients["b"].state == KazooState.CONNECTED
        proxy_a.set_mode(Mode.PASS)
        wait_until(lambda: clients["a"].state == KazooState.CONNECTED, timeout=15)

        proxy_a.set_mode(Mode.LATENCY, latency_ms=200)
        started = time.monotonic()
        clients["a"].exists("/netproxy-b")
        assert time.monotonic() - started >= 0.4
        proxy_a.set_mode(Mode.PASS)

        # A silent partition: kazoo notices only when its read times out.
        proxy_a.set_mode(Mode.BLACKHOLE)
        wait_until(lambda: clients["a"].state == KazooState.SUSPENDED, timeout=15)
        assert clients["b"].state == KazooState.CONNECTED
        proxy_a.set_mode(Mode.PASS)
        wait_until(lambda: clients["a"].state == KazooState.CONNECTED, timeout=15)
        assert states["b"] == [KazooState.CONNECTED]
    finally:
        for client in clients.values():
            close_client(client)
