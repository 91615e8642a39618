"""Sources first: a lagging consumer drains a source below its boundary before the rest.

A topic of 4 partitions holds a backlog and grows to 5 (partition 4 takes keys from
partition 0); a consumer then reads everything from the beginning. Partition 4 waits
for partition 0's tail, so the consumer should fetch partition 0 first rather than all
four partitions alike. Order holds either way; the application's own pause is kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Producer, TopicPartition
from helpers import consume_until

from coordinator.control.controller import Controller
from linear_hash import Layout
from ordered.consumer import OrderedConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PER_PARTITION = 6000
KEYS = [f"k{i}".encode() for i in range(400)]
# Small fetches and a small pre-fetch window: each fetch response holds a few hundred
# records of each partition, so which partitions librdkafka fetches is what decides the
# order of delivery; the source's log (6,000 records and more) reaches far beyond the
# window (queued.min.messages), so the source is favoured.
SMALL_FETCHES = {
    "max.partition.fetch.bytes": 32768,
    "message.max.bytes": 131072,
    "fetch.max.bytes": 131072,
    "queued.max.messages.kbytes": 256,
    "queued.min.messages": 500,
}


def write(bootstrap: str, topic: str, layout: Layout, start: int, count: int) -> Counter[int]:
    """Write records ``start..start+count`` (values) as ``layout`` routes; count by partition."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    written: Counter[int] = Counter()
    for n in range(start, start + count):
        key = KEYS[n % len(KEYS)]
        partition = layout.partition_for(key)
        written[partition] += 1
        while True:
            try:
                producer.produce(topic, str(n).encode(), key, partition=partition)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(60) == 0
    return written


@pytest.fixture
def grown(
    topic_factory: Callable[..., str], controller: Controller, bootstrap: str
) -> tuple[str, int, Counter[int]]:
    """(topic, partition 0's boundary, records written by partition)."""
    topic = topic_factory(4)
    controller.adopt(topic)
    written = write(bootstrap, topic, Layout(4, 4, 0), 0, 4 * PER_PARTITION)
    controller.expand(topic, 5)
    boundary = controller.store.get_epoch(topic, 1).boundaries[0]
    written += write(bootstrap, topic, Layout(4, 5, 1), 4 * PER_PARTITION, 2000)
    return topic, boundary, written


def read(consumer: OrderedConsumer, count: int, seen: list[Any], timeout: float = 90) -> None:
    if len(seen) < count:
        got = consume_until(consumer, count - len(seen), timeout, batch=500, wait=0.5)
        seen.extend((m.partition(), m.offset(), m.key(), int(m.value())) for m in got)
    assert len(seen) == count, f"{len(seen)} of {count}"


def in_order(seen: list[Any]) -> bool:
    last: dict[bytes, int] = {}
    for _p, _o, key, n in seen:
        if n < last.get(key, -1):
            return False
        last[key] = n
    return True


def others_while_source_drains(seen: list[Any], boundary: int) -> int:
    """Records of partitions 1-3 delivered from partition 0's first record to its boundary.

    The favour starts once the source's position is known (its first record).
    """
    first = next(i for i, (p, *_rest) in enumerate(seen) if p == 0)
    done = next(i for i, (p, o, *_rest) in enumerate(seen) if p == 0 and o >= boundary - 1)
    return sum(1 for p, *_rest in seen[first:done] if p in (1, 2, 3))


def test_the_source_drains_first_and_every_key_stays_in_order(
    grown: tuple[str, int, Counter[int]],
    group_factory: Callable[[], str],
    make_consumer: Callable[..., OrderedConsumer],
) -> None:
    topic, boundary, written = grown
    total = written.total()
    consumer = make_consumer(group_factory(), **SMALL_FETCHES)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(5)])
    seen: list[Any] = []
    read(consumer, total, seen)
    assert in_order(seen)
    # Fetched alike, partitions 1-3 deliver thousands of records while partition 0
    # drains (9000-17000 of their 18000 here); favoured, at most what was in flight.
    others = others_while_source_drains(seen, boundary)
    assert others < 3000, f"{others} records of partitions 1-3 while partition 0 drained"
    assert consumer.assignment() and not consumer._favour.paused  # all resumed


def test_the_favour_never_resumes_a_partition_the_application_paused(
    grown: tuple[str, int, Counter[int]],
    group_factory: Callable[[], str],
    make_consumer: Callable[..., OrderedConsumer],
) -> None:
    topic, _boundary, written = grown
    total = written.total()
    consumer = make_consumer(group_factory(), **SMALL_FETCHES)
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(5)])
    consumer.pause([TopicPartition(topic, 1)])
    seen: list[Any] = []
    read(consumer, total - written[1], seen)
    more = consumer.consume(500, 1.0)  # the favour is over: nothing of partition 1 yet
    assert not [m for m in more if m.error() is None]
    assert all(p != 1 for p, *_ in seen)
    consumer.resume([TopicPartition(topic, 1)])
    read(consumer, total, seen)
    assert in_order(seen)
