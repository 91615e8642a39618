"""The ``ordered-kafka`` sink: a pipeline from an ordered topic through Spark into another.

The output topic is expanded while the pipeline runs; every key keeps its order end to
end (checked against the epoch header of each output record), nothing is lost.
"""

from __future__ import annotations

import time
from collections import defaultdict
from typing import Any

import pytest
from fixtures import consume_all, epoch_of
from spark_helpers import BackgroundWriter, SparkQueries

from coordinator.kernel.store import LayoutStore
from linear_hash import partition_for

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(180)]


def test_pipeline_keeps_key_order_while_the_output_topic_grows(
    queries: SparkQueries, store: LayoutStore
) -> None:
    controller = queries.controller
    source = queries.adopted_topic(2)
    target = queries.topic_factory(2)
    adopted = controller.adopt(target)
    writer = queries.writer()
    writer.write(source, 300)
    writer.flush()

    query = (
        queries.spark.readStream.format("ordered-kafka")
        .options(**queries.options(source, maxOffsetsPerTrigger=200))
        .load()
        .select("key", "value")
        .writeStream.format("ordered-kafka")
        .options(**queries.sink_options(target))
        # The checks below read each record's epoch from its header (off by default):
        # an instrument of this test; the sink passes ordered.* settings through.
        .option("ordered.epoch.header", "true")
        .option("checkpointLocation", str(queries.checkpoint))
        .start()
    )
    try:
        background = BackgroundWriter(writer, source)
        try:
            time.sleep(1.5)
            controller.expand(target, 3, timeout=60)
            time.sleep(0.5)
            controller.expand(source, 3, timeout=60)
            time.sleep(1.0)
        finally:
            written = background.stop()
        writer.close()
        query.processAllAvailable()
        assert query.exception() is None, query.exception()
    finally:
        query.stop()

    epochs = store.epochs(target)
    assert [e.to_active for e in epochs] == [2, 3] and epochs[1].sealed
    active = {e.epoch: e.to_active for e in epochs}
    records = consume_all(queries.bootstrap, target)
    assert len(records) == written
    per_key: dict[str, list[tuple[int, int, int, int]]] = defaultdict(list)
    for msg in records:
        epoch = epoch_of(msg)
        # Placed by the layout of its epoch (Spark's own sink would use murmur2).
        assert msg.partition() == partition_for(msg.key(), 2, active[epoch], adopted.algorithm)
        key, seq = msg.value().decode().split(":")
        per_key[key].append((epoch, msg.partition(), msg.offset(), int(seq)))
    assert any(e == 1 for items in per_key.values() for e, *_ in items)
    for key, items in per_key.items():
        # Within an epoch a key has one partition; across epochs the epoch orders.
        items.sort()
        seqs = [s for *_, s in items]
        assert seqs == sorted(writer.delivered[key]), (key, seqs[:20])


def test_a_delivery_error_fails_the_write_naming_the_kafka_error(
    spark: Any, bootstrap: str, zk_hosts: str, zk_root: str
) -> None:
    frame = spark.createDataFrame([("k1", "v1"), ("k2", "v2")], "key string, value string")
    with pytest.raises(Exception) as info:
        (
            frame.write.format("ordered-kafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("kafka.message.timeout.ms", "3000")
            .option("ordered.zookeeper.connect", zk_hosts)
            .option("ordered.zookeeper.root", zk_root)
            .option("topic", "no-such-topic-" + zk_root.strip("/"))  # auto-create is off
            .save()
        )
    message = str(info.value)
    # librdkafka reports a missing topic as unknown, or as timed out waiting for it.
    assert "was not delivered" in message, message
    assert "_MSG_TIMED_OUT" in message or "UNKNOWN_TOPIC" in message, message


def test_missing_value_column_is_refused_before_any_task(
    spark: Any, bootstrap: str, zk_hosts: str
) -> None:
    frame = spark.createDataFrame([("k1",)], "key string")
    with pytest.raises(Exception, match="Required attribute 'value' not found"):
        (
            frame.write.format("ordered-kafka")
            .mode("append")
            .option("kafka.bootstrap.servers", bootstrap)
            .option("ordered.zookeeper.connect", zk_hosts)
            .option("topic", "t")
            .save()
        )
