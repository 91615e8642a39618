"""The consumer's ZooKeeper load is bounded whatever its throughput.

A batch below the offsets an earlier layout check covered needs no check (a backlog is
read almost without any); a batch above them is still checked; and a consumer that has
caught up with a fast producer sends at most
``ordered.layout.check.max.requests.per.s`` requests per second. Requests are counted
on the consumer's own ZooKeeper client, so nothing else on the server counts.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Producer
from helpers import consume_until
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.store import CONSUMER_BARRIER, LayoutStore
from linear_hash import Layout
from ordered.cli.features import set_feature
from ordered.consumer import OrderedConsumer
from ordered.consumer.pacing import CHECK_BURST

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

KEYS = [f"k{i}".encode() for i in range(1000)]


class Counted:
    """Counts the requests one consumer's kazoo client sends (pings aside)."""

    def __init__(self, consumer: OrderedConsumer) -> None:
        self.requests = 0
        client = consumer._zk
        send = client._call

        def counted(request: Any, async_object: Any) -> Any:
            self.requests += 1
            return send(request, async_object)

        client._call = counted  # type: ignore[method-assign]


def write(bootstrap: str, topic: str, count: int, start: int = 0) -> None:
    """``count`` keyed records where the topic's first layout (4 partitions) puts them."""
    layout = Layout(4, 4, 0)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(start, start + count):
        key = KEYS[i % len(KEYS)]
        while True:
            try:
                producer.produce(topic, str(i).encode(), key, partition=layout.partition_for(key))
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0


def read(consumer: OrderedConsumer, count: int, num: int, timeout: float = 60.0) -> list[Any]:
    got = consume_until(consumer, count, timeout, batch=num, wait=0.5)
    assert len(got) == count, f"{len(got)} of {count}"
    return got


@pytest.fixture
def topic(topic_factory: Callable[..., str], controller: Controller, store: LayoutStore) -> str:
    # The fetch check's bounds: the consumer barrier (on from a new root's first adoption,
    # and answering checks without requests) is kept off; its cost is bench_scale's.
    set_feature(store, CONSUMER_BARRIER, False)
    name = topic_factory(4)
    controller.adopt(name)
    return name


def test_a_backlog_read_at_full_speed_needs_almost_no_checks_and_new_records_do(
    kit: Kit, topic: str
) -> None:
    write(kit.bootstrap, topic, 40_000)
    consumer = kit.make_consumer(kit.group_factory())
    counted = Counted(consumer)
    consumer.subscribe([topic])
    first = read(consumer, 1, 1)  # the start-up: subscription, group, first reads
    checks0, requests0 = consumer.metrics["layout_checks"], counted.requests
    started = time.monotonic()
    batches = 0
    got = 1
    while got < 40_000:
        batch = consumer.consume(400, 5.0)
        batches += 1
        got += sum(1 for m in batch if m.error() is None)
    elapsed = time.monotonic() - started
    checks = consumer.metrics["layout_checks"] - checks0
    requests = counted.requests - requests0
    assert first and batches >= 100
    # One check per batch would be >= 100 checks and >= 200 requests; the high
    # watermarks noted by the first checks cover the whole backlog (a group's consumer
    # still reads its rewind markers once per pacing slot, 188 ms here).
    assert checks <= 3 + 7 * elapsed, f"{checks} checks for {batches} batches"
    assert requests <= 3 * 3 + 20 * elapsed, f"{requests} requests in {elapsed:.1f} s"

    # A record written after those checks lies above every covered offset: checked.
    write(kit.bootstrap, topic, 10, start=40_000)
    read(consumer, 10, 100)
    assert consumer.metrics["layout_checks"] > checks0 + checks


def test_a_caught_up_consumer_sends_at_most_the_configured_requests_per_second(
    kit: Kit, topic: str
) -> None:
    write(kit.bootstrap, topic, 100)
    consumer = kit.make_consumer(
        kit.group_factory(), **{"ordered.layout.check.max.requests.per.s": 10}
    )
    counted = Counted(consumer)
    consumer.subscribe([topic])
    read(consumer, 100, 100)
    stop = threading.Event()
    written = [100]
    bootstrap = kit.bootstrap  # resolved here: the writer thread must not ask pytest

    def produce() -> None:
        # Small batches, continuously: every consume finds records above the covered
        # offsets, so without pacing each one would cost a check.
        while not stop.is_set():
            write(bootstrap, topic, 20, start=written[0])
            written[0] += 20

    writer = threading.Thread(target=produce, daemon=True)
    requests0, checks0 = counted.requests, consumer.metrics["layout_checks"]
    started = time.monotonic()
    writer.start()
    got = 0
    batches = 0
    try:
        while time.monotonic() - started < 4.0:
            got += sum(1 for m in consumer.consume(10, 0.05) if m.error() is None)
            batches += 1
    finally:
        stop.set()
        writer.join(30)
    elapsed = time.monotonic() - started
    requests = counted.requests - requests0
    checks = consumer.metrics["layout_checks"] - checks0
    assert got >= 100, "the producer was too slow for the scenario"
    # 10 requests/s at 2 per check (sync + one topic): a check per 0.2 s on average, and
    # at most CHECK_BURST checks back to back.
    burst = 2 * CHECK_BURST
    assert requests <= burst + 10 * elapsed, f"{requests} requests, {checks} checks, {batches}"
    assert checks >= 2  # checks still run while records keep coming
    # Nothing is lost by the waiting: the rest arrives.
    read(consumer, written[0] - 100 - got, 1000)
