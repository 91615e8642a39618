"""OrderedProducer against the real Kafka and ZooKeeper: routing, headers, the client surface.

The switch barrier is in test_producer_switch.py, ZooKeeper sessions in
test_producer_sessions.py.
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError, KafkaException, Producer, TopicPartition
from fixtures import consume_all
from helpers import consume_until, unique, wait_until
from kit import Kit
from producer_helpers import KEYS, header, produce_keys
from prometheus_client import CollectorRegistry

from linear_hash import DEFAULT_ALGORITHM, partition_for
from ordered import (
    ConfigError,
    OrderedProducer,
    TopicState,
)
from ordered.compaction import TOMBSTONE_HEADER
from ordered.consumer import OrderedConsumer
from ordered.hooks import PrometheusHooks

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


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
