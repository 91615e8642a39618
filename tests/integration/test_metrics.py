"""Prometheus metrics over HTTP: the daemon's ``/metrics`` and a wrapper's registry.

The daemon runs as ``ordered coordinator --metrics-address 127.0.0.1:0`` and is scraped
while an expansion waits in its barrier and completes; the producer and consumer
publish into a registry the test serves with ``prometheus_client.start_http_server``,
scraped while a gate is closed and after it opens.
"""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from fixtures import producer_record
from helpers import drain, keys_for, wait_held, wait_until
from kit import Kit
from prometheus_client import CollectorRegistry, start_http_server
from prometheus_client.parser import text_string_to_metric_families

from coordinator.control.controller import BarrierTimeoutError
from coordinator.kernel.store import AckRecord
from linear_hash import Layout
from ordered.hooks import PrometheusHooks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


def scrape(url: str) -> dict[tuple[str, frozenset[tuple[str, str]]], float]:
    """Every sample at ``url``: (name, labels) -> value."""
    with urllib.request.urlopen(url, timeout=10) as response:
        assert response.status == 200
        text = response.read().decode()
    return {
        (s.name, frozenset(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: dict[Any, float], name: str, **labels: str) -> float | None:
    """The sample ``name{labels}``, or ``None``."""
    return samples.get((name, frozenset(labels.items())))


@pytest.fixture
def daemon_log(tmp_path: Path) -> Iterator[Callable[..., tuple[subprocess.Popen[bytes], Path]]]:
    started: list[subprocess.Popen[bytes]] = []

    def start(*args: str) -> tuple[subprocess.Popen[bytes], Path]:
        path = tmp_path / f"daemon-{len(started)}.log"
        with path.open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ordered.cli", "coordinator", *args],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return proc, path

    yield start
    for proc in started:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


def test_daemon_metrics_move_during_an_expansion(
    kit: Kit, daemon_log: Callable[..., tuple[subprocess.Popen[bytes], Path]]
) -> None:
    topic = kit.adopted_topic(2)
    daemon, log = daemon_log(
        *kit.cli_servers,
        "--session-timeout",
        "3",
        "--metrics-address",
        "127.0.0.1:0",
    )
    found = wait_until(
        lambda: re.search(r"metrics: serving (http://127\.0\.0\.1:\d+/metrics)", log.read_text()),
        timeout=20,
        what="the daemon's metrics address",
    )
    url = found.group(1)
    assert not url.endswith(":0/metrics")
    wait_until(
        lambda: value(scrape(url), "ordered_coordinator_leader") == 1.0,
        timeout=20,
        what="leadership in /metrics",
    )
    before = scrape(url)
    assert value(before, "ordered_coordinator_zookeeper_session_state", state="connected") == 1
    assert value(before, "ordered_coordinator_zookeeper_session_state", state="lost") == 0
    assert value(before, "ordered_coordinator_topic_epoch", topic=topic) == 0
    assert value(before, "ordered_coordinator_topic_active_partitions", topic=topic) == 2
    assert value(before, "ordered_coordinator_topic_history_epochs", topic=topic) == 1
    assert value(before, "ordered_coordinator_pending_barrier_age_seconds", topic=topic) is None
    assert value(before, "ordered_coordinator_barrier_seconds_count", topic=topic) is None

    # Lag of an interested group: 5 records in partition 0, 2 of them committed.
    plain = Producer({"bootstrap.servers": kit.bootstrap})
    for i in range(5):
        plain.produce(topic, value=b"v", key=f"k{i}", partition=0)
    assert plain.flush(30) == 0
    group = kit.group_factory()
    committer = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group})
    committer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
    committer.close()
    labels = {"group": group, "topic": topic, "partition": "0"}
    wait_until(
        lambda: value(scrape(url), "ordered_consumergroup_lag", **labels) == 3,
        timeout=20,
        what="the group's lag",
    )
    lagging = scrape(url)
    assert value(lagging, "ordered_consumergroup_current_offset", **labels) == 2

    # A producer that has not acked holds the barrier: the epoch is pending.
    kit.store.register_producer(topic, producer_record("p-held", 60000))
    with pytest.raises(BarrierTimeoutError):
        kit.controller.expand(topic, 3, timeout=0.5)
    pending = scrape(url)
    assert value(pending, "ordered_coordinator_topic_epoch", topic=topic) == 1
    assert value(pending, "ordered_coordinator_topic_active_partitions", topic=topic) == 3
    assert (value(pending, "ordered_coordinator_pending_barriers") or 0) >= 1
    age = value(pending, "ordered_coordinator_pending_barrier_age_seconds", topic=topic)
    assert age is not None and age > 0
    assert value(pending, "ordered_coordinator_barrier_waiting_producers", topic=topic) == 1
    time.sleep(1.0)
    older = value(scrape(url), "ordered_coordinator_pending_barrier_age_seconds", topic=topic)
    assert older is not None and older >= age + 0.9

    # The ack: the daemon's resume passes the barrier and seals; both are counted.
    kit.store.ack(topic, 1, AckRecord(id="p-held", epoch=1, last_offsets={}, acked_at=time.time()))
    wait_until(
        lambda: value(scrape(url), "ordered_coordinator_epochs_sealed_total", topic=topic) == 1,
        timeout=30,
        what="the seal in /metrics",
    )
    after = scrape(url)
    assert value(after, "ordered_coordinator_barrier_seconds_count", topic=topic) == 1
    barrier = value(after, "ordered_coordinator_barrier_seconds_sum", topic=topic)
    assert barrier is not None and barrier >= older
    assert value(after, "ordered_coordinator_pending_barrier_age_seconds", topic=topic) is None
    assert value(after, "ordered_coordinator_topic_epoch", topic=topic) == 1
    assert value(after, "ordered_coordinator_topic_history_epochs", topic=topic) == 2
    assert (value(after, "ordered_coordinator_relay_round_seconds_count") or 0) > 0

    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=20) == 0
    assert "Traceback" not in log.read_text()


def test_daemon_refuses_a_taken_metrics_address(
    kit: Kit, daemon_log: Callable[..., tuple[subprocess.Popen[bytes], Path]]
) -> None:
    registry = CollectorRegistry()
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    try:
        port = server.server_address[1]
        servers = kit.cli_servers
        daemon, log = daemon_log(*servers, "--metrics-address", f"127.0.0.1:{port}")
        assert daemon.wait(timeout=30) == 1
        assert f"cannot serve metrics on 127.0.0.1:{port}" in log.read_text()
        assert "Traceback" not in log.read_text()
        bad, bad_log = daemon_log(*servers, "--metrics-address", "nowhere")
        assert bad.wait(timeout=30) == 2
        assert "--metrics-address: expected HOST:PORT" in bad_log.read_text()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def test_a_blocked_gate_shows_in_the_wrappers_registry(kit: Kit) -> None:
    registry = CollectorRegistry()
    metrics = PrometheusHooks(registry)
    server, thread = start_http_server(0, addr="127.0.0.1", registry=registry)
    url = f"http://127.0.0.1:{server.server_address[1]}/metrics"
    try:
        topic = kit.adopted_topic(2)
        producer = kit.make_producer(**{"ordered.hooks": [metrics]})
        old, new = Layout(2, 2, 0), Layout(2, 3, 1)
        moving = [k for k in keys_for(old, 0, 200) if new.partition_for(k) == 2][:5]
        for key in moving:
            producer.produce(topic, b"old", key)
        assert producer.flush(30) == 0
        kit.controller.expand(topic, 3, timeout=30)
        for key in moving:
            producer.produce(topic, b"new", key)
        assert producer.flush(30) == 0
        wait_until(
            lambda: value(scrape(url), "ordered_producer_barrier_ack_seconds_count", topic=topic),
            timeout=10,
            what="the producer's ack in the registry",
        )
        switched = scrape(url)
        assert value(switched, "ordered_producer_route_switches_total", topic=topic) == 1
        assert value(switched, "ordered_producer_barrier_ack_seconds_count", topic=topic) == 1

        group = kit.group_factory()
        destination = kit.make_consumer(group, **{"ordered.hooks": [metrics]})
        destination.assign([TopicPartition(topic, 2)])
        wait_held(destination, what="the destination's gate to close")
        held = scrape(url)
        gt = {"group": group, "topic": topic}
        assert value(held, "ordered_consumer_blocked_partitions", **gt) == 1
        assert value(held, "ordered_consumer_gate_blocks_total", **gt, partition="2") == 1
        assert value(held, "ordered_consumer_epoch", **gt) == 1
        assert value(held, "ordered_consumer_gate_wait_seconds_count", **gt) is None

        source = kit.make_consumer(group, **{"ordered.hooks": [metrics]})
        source.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
        assert len(drain(source, 20.0, until=len(moving))) == len(moving)
        source.consume(10, 0.1)  # the boundary announcement
        assert len(drain(destination, 10.0, until=len(moving))) == len(moving)
        opened = scrape(url)
        assert value(opened, "ordered_consumer_blocked_partitions", **gt) == 0
        assert value(opened, "ordered_consumer_gate_wait_seconds_count", **gt) == 1
        wait = value(opened, "ordered_consumer_gate_wait_seconds_sum", **gt)
        assert wait is not None and wait > 0
        assert value(opened, "ordered_consumer_announcements_total", **gt, partition="0") == 1
        assert value(opened, "ordered_consumer_violations_total", **gt, partition="0") is None
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
