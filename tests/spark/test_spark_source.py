"""The ``ordered-kafka`` source in real local Spark: options, triggers, limits, data loss, replays.

Real Spark (``local[2]``), real Kafka, real ZooKeeper (issue 9, "Must show").
"""

from __future__ import annotations

import shutil
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from confluent_kafka.admin import AdminClient
from spark_helpers import Collector, SparkQueries, check_batches, gate_violations, offset_log

from coordinator.kernel.store import LayoutStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(180)]


def end_offsets(bootstrap: str, topic: str) -> dict[int, int]:
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        return {
            p: consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)[1]
            for p in parts
        }
    finally:
        consumer.close()


def trim(bootstrap: str, topic: str, partition: int, before: int) -> None:
    """DeleteRecords: the log of ``partition`` starts at ``before`` afterwards."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    futures = admin.delete_records([TopicPartition(topic, partition, before)])
    for future in futures.values():
        future.result(timeout=30)


@pytest.mark.parametrize(
    ("change", "names"),
    [
        ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers"),
        ({"assign": '{"t":[0]}'}, "subscribe, subscribePattern, assign"),
        ({"startingOffsets": "oldest"}, "startingOffsets"),
        ({"startingOffsets": '{"t": {"0": 1'}, "startingOffsets"),
        ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, "maxOffsetsPerTrigger"),
        ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"kafka.enable.auto.commit": "true"}, "enable.auto.commit"),
    ],
)
def test_bad_options_fail_when_the_query_is_defined(
    spark: Any, change: dict[str, Any], names: str
) -> None:
    options: dict[str, Any] = {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t"}
    options.update(change)
    reader = spark.readStream.format("ordered-kafka")
    for key, value in options.items():
        if value is not None:
            reader = reader.option(key, value)
    with pytest.raises(Exception) as info:
        reader.load()  # definition only: no query started, nothing read
    assert names in str(info.value)


def test_available_now_across_a_reshard_ends_exactly_at_the_frozen_target(
    queries: SparkQueries, store: LayoutStore
) -> None:
    topic = queries.adopted_topic(2)
    writer = queries.writer()
    for step, to in (("expand", 3), ("expand", 4), ("shrink", 3)):
        writer.write(topic, 200)
        writer.flush()
        getattr(queries.controller, step)(topic, to, timeout=30)
    writer.write(topic, 200)
    written = writer.flush()
    target = end_offsets(queries.bootstrap, topic)

    # Records written after the query froze its target are not read.
    sink = Collector(on_batch=lambda _b: (writer.write(topic, 50), writer.flush()))
    queries.run_available_now(sink, queries.options(topic), timeout=120)
    writer.close()
    log = offset_log(queries.checkpoint)
    assert len(log) >= 3, log  # the gates need several batches
    assert log[max(log)] == {topic: target}
    check_batches(sink.batches)
    assert sink.total() == written
    assert gate_violations(log, topic, store.epochs(topic)[1:], {}) == []


def test_max_offsets_per_trigger_with_a_closed_gate_keeps_free_partitions_moving(
    queries: SparkQueries, store: LayoutStore
) -> None:
    topic = queries.adopted_topic(2)
    writer = queries.writer()
    writer.write(topic, 1000)
    writer.flush()
    queries.controller.expand(topic, 3, timeout=30)
    writer.write(topic, 600)
    written = writer.flush()
    writer.close()
    boundary = store.get_epoch(topic, 1).boundaries[0]  # B_0(1): where 2's gate opens

    limit = 150
    sink = Collector()
    queries.run_available_now(sink, queries.options(topic, maxOffsetsPerTrigger=limit), None, 150)
    log = offset_log(queries.checkpoint)
    previous = {0: 0, 1: 0, 2: 0}
    closed_batches = 0
    for batch_id, offsets in log.items():
        end = offsets[topic]
        size = sum(end[p] - previous.get(p, 0) for p in end)
        assert 0 < size <= limit + len(end), (batch_id, previous, end)
        if previous[0] < boundary:
            # 2's gate is closed: it does not move, and 0 and 1 share the whole limit.
            closed_batches += 1
            assert end.get(2, 0) == 0, (batch_id, end)
            assert end[0] > previous[0] and end[1] > previous[1], (batch_id, previous, end)
            assert size >= limit - 1, (batch_id, size)
        previous = dict(end)
    assert closed_batches >= 3, log
    assert previous[2] > 0  # it moved once the gate opened
    check_batches(sink.batches)
    assert sink.total() == written


def test_crash_after_the_offset_log_reruns_the_batch_with_identical_rows(
    queries: SparkQueries,
) -> None:
    topic = queries.adopted_topic(2)
    writer = queries.writer()
    writer.write(topic, 300)
    writer.flush()
    queries.controller.expand(topic, 3, timeout=30)
    writer.write(topic, 300)
    writer.flush()
    sink = Collector(fail_at=1)
    options = queries.options(topic, maxOffsetsPerTrigger=200)
    with (
        queries.running(sink, options) as query,
        pytest.raises(Exception, match="crash injected in batch 1"),
    ):
        query.awaitTermination(60)
    # Logged, not committed: the restart must run batch 1 again as logged.
    assert (queries.checkpoint / "offsets" / "1").exists()
    assert not (queries.checkpoint / "commits" / "1").exists()
    crashed = list(sink.batches[1])
    # Meanwhile the layout and the data change: a re-plan would read differently.
    queries.controller.expand(topic, 4, timeout=30)
    writer.write(topic, 300)
    written = writer.flush()
    writer.close()

    queries.process_available(sink, options)
    assert sink.runs.count(1) == 2
    assert sink.changed == []
    assert sink.batches[1] == crashed and crashed
    check_batches(sink.batches)
    assert sink.total() == written


def test_fail_on_data_loss_true_and_false_no_alarm_for_a_retired_partition(
    queries: SparkQueries,
) -> None:
    topic = queries.adopted_topic(2)
    bootstrap, checkpoint = queries.bootstrap, queries.checkpoint
    writer = queries.writer()
    queries.controller.expand(topic, 3, timeout=30)
    writer.write(topic, 300)
    writer.flush()
    queries.controller.shrink(topic, 2, timeout=30)  # 2 retires: its keys go back to 0
    writer.write(topic, 100)
    writer.flush()
    options = queries.options(topic)
    queries.run_available_now(Collector(), options)
    read_to = offset_log(checkpoint)
    read_to_end = read_to[max(read_to)][topic]
    assert read_to_end == end_offsets(bootstrap, topic)

    # The retired partition, read to its end, is trimmed: no loss. Partition 0 is
    # trimmed past the query's position before it read the new records: a loss.
    trim(bootstrap, topic, 2, read_to_end[2])
    writer.write(topic, 200)
    writer.flush()
    writer.close()
    ends = end_offsets(bootstrap, topic)
    cut = read_to_end[0] + (ends[0] - read_to_end[0]) // 2
    trim(bootstrap, topic, 0, cut)
    spare = queries.directory / "spare"
    shutil.copytree(checkpoint, spare)

    failing = Collector()
    with (
        queries.running(failing, options, availableNow=True) as query,
        pytest.raises(Exception) as info,
    ):
        query.awaitTermination(90)
    message = str(info.value)
    assert f"{topic}-0" in message and "failOnDataLoss" in message, message
    assert f"{topic}-2" not in message
    assert failing.total() == 0

    going_on = Collector()
    queries.run_available_now(going_on, dict(options, failOnDataLoss="false"), spare)
    rows = [r for batch in going_on.batches.values() for r in batch]
    on_0 = sorted(offset for _k, _s, p, offset in rows if p == 0)
    assert on_0 and on_0[0] == cut and on_0[-1] == ends[0] - 1
    assert not [r for r in rows if r[2] == 2]
    assert sum(1 for r in rows if r[2] == 1) == ends[1] - read_to_end[1]


def test_a_plain_topic_reads_exactly_as_sparks_kafka_source(queries: SparkQueries) -> None:
    spark, bootstrap = queries.spark, queries.bootstrap
    if not getattr(spark, "kafka_connector", False):
        pytest.skip("Spark's Kafka connector is not in the cache (scripts/setup.sh fetches it)")
    from confluent_kafka import Producer

    topic = queries.topic_factory(3)
    producer = Producer({"bootstrap.servers": bootstrap})
    now_ms = int(time.time() * 1000) - 60_000  # recent: older records would be retention-deleted
    for i in range(300):
        producer.produce(
            topic,
            None if i % 50 == 7 else f"v{i}".encode(),
            None if i % 10 == 3 else f"k{i % 17}".encode(),
            partition=i % 3,
            timestamp=now_ms + i,
            headers=[("h", f"{i}".encode()), ("n", None)] if i % 4 == 0 else None,
        )
    assert producer.flush(30) == 0

    def rows(fmt: str) -> tuple[list[Any], Any]:
        frame = (
            spark.read.format(fmt)
            .option("kafka.bootstrap.servers", bootstrap)
            .option("subscribe", topic)
            .option("includeHeaders", "true")
            .load()
        )
        return frame.orderBy("partition", "offset").collect(), frame.schema

    ours, our_schema = rows("ordered-kafka")
    theirs, their_schema = rows("kafka")
    assert our_schema == their_schema
    assert len(ours) == 300 and ours == theirs
    # And the same through a stream, from earliest, in one AvailableNow run.
    streamed: list[Any] = []
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "includeHeaders": "true",
    }
    queries.run_available_now(
        lambda frame, _id: streamed.extend(frame.collect()), options, timeout=60
    )
    assert sorted(streamed, key=lambda r: (r.partition, r.offset)) == theirs
