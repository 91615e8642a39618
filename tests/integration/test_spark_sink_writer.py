"""The sink's task body (``spark_source.sink.write_batches``) on Arrow batches, without Spark.

What a Spark task hands the sink (string ``key``/``value`` columns in Arrow record
batches), against the real Kafka and ZooKeeper: every row lands where the layout puts
it, a delivery failure fails the task with the Kafka error named, the pooled
producer reports failures only (its successes never reach Python code), and a write
goes on through an expansion (its producer pauses while the switch drains).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from fixtures import consume_all, run_in_background
from helpers import drain, wait_until
from kit import Kit

from coordinator.kernel.errors import OrderedKafkaError
from linear_hash import partition_for
from ordered import TopicState

pa = pytest.importorskip("pyarrow")
sink = pytest.importorskip("spark_source.sink")
from spark_source.options import SinkOptions  # noqa: E402  (after the skip)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def batches(rows: int, size: int = 400) -> Iterator[Any]:
    for start in range(0, rows, size):
        ids = range(start, min(start + size, rows))
        yield pa.RecordBatch.from_arrays(
            [pa.array([f"k{i % 37}" for i in ids]), pa.array([f"v{i}" for i in ids])],
            names=["key", "value"],
        )


@pytest.fixture
def options(bootstrap: str, zk_hosts: str, zk_root: str) -> Callable[..., SinkOptions]:
    def make(topic: str, **extra: str) -> SinkOptions:
        config = {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zk_hosts,
            "ordered.zookeeper.root": zk_root,
            **extra,
        }
        return SinkOptions(topic=topic, producer=config)

    return make


def test_rows_land_by_the_layout_and_successes_reach_no_python_callback(
    kit: Kit, options: Callable[..., SinkOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    topic = kit.topic_factory(3)
    adopted = kit.controller.adopt(topic)
    reports: list[Any] = []
    report = sink._Pooled._on_delivery

    def on_delivery(self: Any, err: Any, msg: Any) -> None:
        reports.append(err)
        report(self, err, msg)

    monkeypatch.setattr(sink._Pooled, "_on_delivery", on_delivery)
    # The user's own delivery.report.only.error=false does not bring successes back.
    config = options(topic, **{"delivery.report.only.error": "false"})
    assert sink.write_batches(config, batches(1000)) == 1000
    assert reports == []
    records = consume_all(kit.bootstrap, topic)
    assert sorted(int(m.value()[1:]) for m in records) == list(range(1000))
    for msg in records:
        assert msg.partition() == partition_for(msg.key(), 3, 3, adopted.algorithm)


def test_a_failed_row_fails_the_task_naming_the_kafka_error(
    options: Callable[..., SinkOptions], zk_root: str
) -> None:
    missing = "no-such-topic-" + zk_root.strip("/")  # auto-create is off in the test cluster
    config = options(missing, **{"message.timeout.ms": "3000"})
    with pytest.raises(OrderedKafkaError, match="was not delivered") as info:
        sink.write_batches(config, batches(50))
    assert "_MSG_TIMED_OUT" in str(info.value) or "UNKNOWN_TOPIC" in str(info.value)


def test_a_write_goes_on_through_an_expansion_in_pause_mode(
    kit: Kit, options: Callable[..., SinkOptions], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The epoch switches mid-write: the sink's producer pauses, then every row lands once.

    Rows are read back with an ``OrderedConsumer``: each key's values in write order.
    """
    topic = kit.adopted_topic(2)
    # Rows wait in librdkafka's queue for 10 s, so the expansion surely finds rows of
    # the old epoch pending: without it, a switch that comes after they are delivered
    # closes at once, and the wait for SWITCHING below races it (a CI failure).
    config = options(topic, **{"linger.ms": "10000"})
    refused: list[BaseException] = []
    writers: list[Any] = []
    produce_of: list[Any] = []
    produce_pairs = sink._produce_pairs

    def counting(producer: Any, *args: Any) -> None:
        # The sink's producer, seen at its first batch: count its pause refusals.
        if not writers:
            writers.append(producer)
            original = producer.produce
            produce_of.append(original)

            def produce(*a: Any, **k: Any) -> None:
                try:
                    original(*a, **k)
                except BufferError as exc:
                    refused.append(exc)
                    raise

            producer.produce = produce
        produce_pairs(producer, *args)

    monkeypatch.setattr(sink, "_produce_pairs", counting)
    expansion: list[Any] = []

    def rows() -> Iterator[Any]:
        for number, batch in enumerate(batches(6000, size=500)):
            if number == 4:
                # A topic's first rows are held while its id is checked; the producer
                # registers after that. Expanded before, it would come to the new epoch
                # with no row of the old one and never switch: wait for it.
                wait_until(
                    lambda: writers[0].topic_state(topic) is TopicState.ROUTING,
                    what="the sink's producer to register for the topic",
                )
                # Switch while rows are pending: the next batch meets the drain.
                expansion.append(run_in_background(kit.controller.expand, topic, 3, timeout=60))
                wait_until(lambda: writers[0].topic_state(topic) is TopicState.SWITCHING)
            yield batch

    try:
        assert sink.write_batches(config, rows()) == 6000
    finally:
        # The pooled producer outlives the test: give it back its own send path.
        if writers:
            writers[0].produce = produce_of[0]
    result = expansion[0].join(60)
    assert result.expired == {}
    assert refused and all(type(e).__name__ == "SwitchDrainingError" for e in refused)
    consumer = kit.make_consumer(f"g-{topic}")
    consumer.subscribe([topic])
    records = drain(consumer, 60, until=6000)
    values: dict[bytes, list[int]] = {}
    for msg in records:
        values.setdefault(msg.key(), []).append(int(msg.value()[1:]))
    assert sorted(v for vs in values.values() for v in vs) == list(range(6000))
    for key, seen in values.items():
        assert seen == sorted(seen), key
