"""Supervised threads on the real servers: a failing sweeper, a failing producer worker.

Faults are injected through :func:`coordinator.kernel.supervise.inject_faults` (the
loop raises at its heartbeat, as a bug in it would); Kafka and ZooKeeper are real.
"""

from __future__ import annotations

import contextlib
import re
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from fixtures import run_in_background
from helpers import wait_until

from coordinator.control.controller import Controller
from coordinator.daemon import CoordinatorDaemon, Role
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore, RetentionRecord
from coordinator.kernel.supervise import SupervisionSettings, inject_faults
from coordinator.metrics.daemon_metrics import DaemonMetrics
from ordered import OrderedProducer
from ordered.hooks import PrometheusHooks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

# Quick restarts and a short window, so the test sees unhealthy and healthy again.
QUICK = SupervisionSettings(backoff_s=0.1, max_backoff_s=0.4, max_failures=3, window_s=4.0)


def get(url: str) -> tuple[int, str]:
    """Status and body of ``url`` (an HTTP error status is an answer too)."""
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def restarts(metrics_text: str, thread: str) -> float:
    """The sum of ``ordered_thread_restarts_total`` for ``thread`` in a scrape."""
    pattern = (
        rf'^ordered_thread_restarts_total\{{[^}}]*thread="{re.escape(thread)}"[^}}]*\}} (\S+)$'
    )
    return sum(float(m.group(1)) for m in re.finditer(pattern, metrics_text, re.M))


class Faults:
    """Raise ``OverflowError`` at the named loop's heartbeat while on."""

    def __init__(self, thread: str) -> None:
        self.thread = thread
        self.on = threading.Event()

    def __call__(self, name: str) -> None:
        if name == self.thread and self.on.is_set():
            raise OverflowError("int too big to convert (injected)")


@contextlib.contextmanager
def failing_daemon(
    store: LayoutStore, admin: KafkaAdmin, thread: str, relay_interval: float, sweep_interval: float
) -> Iterator[tuple[CoordinatorDaemon, str, Faults]]:
    """A running daemon (quick supervision) whose ``thread`` fails at its heartbeat.

    Yields the daemon, the base URL of its metrics server and the faults (on; clear
    ``faults.on`` to end them); the daemon is stopped on exit.
    """
    faults = Faults(thread)
    faults.on.set()
    metrics = DaemonMetrics(("127.0.0.1", 0))
    daemon = CoordinatorDaemon(
        store.client,
        admin,
        root=store.root,
        relay_interval=relay_interval,
        sweep_interval=sweep_interval,
        autoscale_interval=0,
        metrics=metrics,
        supervision=QUICK,
    )
    with inject_faults(faults):
        running = run_in_background(daemon.run)
        try:
            yield daemon, metrics.url.rsplit("/", 1)[0], faults
        finally:
            daemon.stop()
            running.join(30)


def wait_unhealthy(base: str) -> str:
    """Wait for ``/healthz`` to answer 503; return its body."""
    _status, body = wait_until(
        lambda: (got := get(f"{base}/healthz"))[0] == 503 and got,
        timeout=30,
        interval=0.2,
        what="/healthz 503",
    )
    text: str = body
    return text


def test_a_failing_sweeper_restarts_shows_in_healthz_and_metrics_and_trims_after(
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    controller: Controller,
    store: LayoutStore,
    bootstrap: str,
) -> None:
    topic = topic_factory(1)
    controller.adopt(topic)
    plain = Producer({"bootstrap.servers": bootstrap})
    for i in range(10):
        plain.produce(topic, value=b"v", key=f"k{i}", partition=0)
    assert plain.flush(30) == 0
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group_factory()})
    committer.commit(offsets=[TopicPartition(topic, 0, 6)], asynchronous=False)
    committer.close()
    store.set_retention(RetentionRecord(topic=topic, consumed_ms=1, updated_at=time.time()))
    admin = KafkaAdmin(bootstrap, timeout=10.0)

    with failing_daemon(store, admin, "sweeper", relay_interval=0, sweep_interval=0.3) as (
        daemon,
        base,
        faults,
    ):
        wait_until(lambda: daemon.role is Role.LEADER, what="leadership")
        # While the fault lasts: restarted again and again, unhealthy, no trim.
        body = wait_unhealthy(base)
        assert "sweeper" in body and "failing: " in body, body
        assert "OverflowError: int too big to convert (injected)" in body, body
        scraped = get(f"{base}/metrics")[1]
        assert restarts(scraped, "sweeper") >= 3, scraped
        assert 'ordered_thread_healthy{thread="sweeper"} 0.0' in scraped
        assert admin.start_offsets(topic, [0]) == {0: 0}

        faults.on.clear()
        # Once the fault stops: the same thread trims, and health comes back.
        wait_until(
            lambda: admin.start_offsets(topic, [0]) == {0: 6},
            timeout=30,
            interval=0.2,
            what="the consumed-retention trim after the fault",
        )
        assert wait_until(
            lambda: get(f"{base}/healthz") == (200, "ok\n"),
            timeout=30,
            interval=0.2,
            what="/healthz 200 after the window",
        )
        scraped = get(f"{base}/metrics")[1]
        assert 'ordered_thread_healthy{thread="sweeper"} 1.0' in scraped
        assert 'ordered_thread_healthy{thread="scanner"} 1.0' in scraped
        assert restarts(scraped, "sweeper") >= 3
        # The metrics are at /metrics only.
        assert get(f"{base}/")[0] == 404
        assert "ordered_thread_restarts_total" not in get(f"{base}/")[1]


def test_a_failing_commit_tail_is_restarted_within_the_term(
    store: LayoutStore, bootstrap: str
) -> None:
    admin = KafkaAdmin(bootstrap, timeout=10.0)
    with failing_daemon(store, admin, "commit-tail", relay_interval=0.1, sweep_interval=0) as (
        _daemon,
        base,
        faults,
    ):
        body = wait_unhealthy(base)
        assert body.startswith("unhealthy\ncommit-tail: "), body
        assert restarts(get(f"{base}/metrics")[1], "commit-tail") >= 3
        faults.on.clear()
        wait_until(
            lambda: 'ordered_thread_running{thread="commit-tail"} 1.0' in get(f"{base}/metrics")[1],
            timeout=30,
            interval=0.2,
            what="the tail running again",
        )
        assert wait_until(lambda: get(f"{base}/healthz") == (200, "ok\n"), timeout=30)


def test_a_failing_producer_worker_restarts_and_the_producer_keeps_acking(
    topic_factory: Callable[..., str],
    controller: Controller,
    make_producer: Callable[..., OrderedProducer],
) -> None:
    from prometheus_client import CollectorRegistry, generate_latest

    topic = topic_factory(2)
    controller.adopt(topic)
    registry = CollectorRegistry()
    producer = make_producer(**{"ordered.hooks": [PrometheusHooks(registry)]})
    faults = Faults("producer-worker")
    with inject_faults(faults):
        producer.produce(topic, value=b"v", key=b"k")
        assert producer.flush(30) == 0
        faults.on.set()
        wait_until(
            lambda: restarts(generate_latest(registry).decode(), "producer-worker") >= 2,
            timeout=30,
            interval=0.1,
            what="worker restarts",
        )
        faults.on.clear()
        # The worker serves the producer's events again: it acks the epoch, and the
        # next one too.
        controller.expand(topic, 3, timeout=30)
        controller.expand(topic, 4, timeout=30)
    producer.produce(topic, value=b"v", key=b"k")
    assert producer.flush(30) == 0
    # The controller clears ``pending`` once the acks are in; the producer's watch
    # sees that write a moment later.
    assert wait_until(
        lambda: (
            (r := producer.topic_record(topic)) is not None and r.epoch == 2 and r.pending is None
        ),
        timeout=30,
        what="the producer's view of epoch 2, settled",
    )
    text = generate_latest(registry).decode()
    assert 'ordered_thread_running{thread="producer-worker"} 1.0' in text, text


def test_a_stuck_sweeper_shows_in_healthz_until_it_moves_again(
    store: LayoutStore, bootstrap: str
) -> None:
    release = threading.Event()

    def hang(name: str) -> None:
        if name == "sweeper":
            release.wait(60)  # a round that never ends (say, a call with no timeout)

    metrics = DaemonMetrics(("127.0.0.1", 0))
    base = metrics.url.rsplit("/", 1)[0]
    daemon = CoordinatorDaemon(
        store.client,
        KafkaAdmin(bootstrap, timeout=10.0),
        root=store.root,
        relay_interval=0,
        sweep_interval=0.3,
        autoscale_interval=0,
        metrics=metrics,
        # Stuck after 5 intervals, at least 2 s: the sweeper (0.3 s) after 2 s.
        supervision=SupervisionSettings(stuck_intervals=5.0, min_stuck_s=2.0),
    )
    with inject_faults(hang):
        running = run_in_background(daemon.run)
        try:
            _status, body = wait_until(
                lambda: (got := get(f"{base}/healthz"))[0] == 503 and got,
                timeout=30,
                interval=0.2,
                what="/healthz 503",
            )
            assert "sweeper: running, 0 restarts: stuck: no progress for " in body, body
            assert 'ordered_thread_healthy{thread="sweeper"} 0.0' in get(f"{base}/metrics")[1]
            release.set()
            assert wait_until(
                lambda: get(f"{base}/healthz") == (200, "ok\n"), timeout=30, interval=0.2
            )
        finally:
            release.set()
            daemon.stop()
            running.join(30)
