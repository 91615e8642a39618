"""A live query while an expansion's barrier waits for a stalled producer.

A producer registered for the topic never acks epoch 1, so the epoch stays pending
while the query runs and a real ``OrderedProducer`` keeps writing (routing by the new
layout). The receiving partition must stay at its boundary, the other partitions must
keep flowing; after the ack and the seal the held records arrive, in order. The
source's progress figures show the records held at the gate and the wait.
Real Spark, real Kafka, real ZooKeeper.
"""

from __future__ import annotations

import socket
import time

import pytest
from fixtures import producer_record
from helpers import wait_until
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import BackgroundWriter, Collector, SparkQueries, check_batches, offset_log

from coordinator.control.controller import BarrierTimeoutError
from coordinator.kernel.store import AckRecord, LayoutStore
from spark_source.offsets import to_spark
from spark_source.options import parse_source_options
from spark_source.source import OrderedKafkaStreamReader

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]


def test_a_pending_epoch_holds_its_receiver_while_the_others_flow_then_releases_in_order(
    queries: SparkQueries, store: LayoutStore
) -> None:
    controller, checkpoint = queries.controller, queries.checkpoint
    topic = queries.adopted_topic(2)
    # The stalled producer: registered (as another process would), never acks.
    store.register_producer(topic, producer_record("p-stalled", host=socket.gethostname()))
    writer = queries.writer()
    writer.write(topic, 200)
    writer.flush()
    options = queries.options(topic)
    sink = Collector()
    with queries.running(sink, options, processingTime="500 milliseconds") as query:
        query.processAllAvailable()
        with pytest.raises(BarrierTimeoutError, match="p-stalled"):
            controller.expand(topic, 3, timeout=1.0)
        record = store.get_topic(topic)
        assert record is not None and record.pending == 1 and record.active == 3
        epoch = store.get_epoch(topic, 1)
        assert not epoch.sealed and epoch.edges == ((0, 2),)
        boundary = epoch.boundaries[2]

        pending_from = max(sink.batches, default=-1)
        background = BackgroundWriter(writer, topic, burst=20, pause=0.1)
        try:
            # Wait until batches planned during the pending epoch carried partition 0 and
            # 1 forward while partition 2 already has records past its boundary.
            def flowing() -> bool:
                later = [b for i, b in sink.batches.items() if i > pending_from]
                parts = {row[2] for rows in later for row in rows}
                return len(later) >= 3 and {0, 1} <= parts

            wait_until(flowing, timeout=120, interval=0.2, what="batches while pending")
        finally:
            pending_written = background.stop()
        query.processAllAvailable()

        # Held: no batch so far read partition 2 past its boundary.
        log = offset_log(checkpoint)
        assert all(ends.get(topic, {}).get(2, 0) <= boundary for ends in log.values()), log
        held = end_offset(queries.bootstrap, topic, 2) - boundary
        assert held > 0, "nothing was written to the receiving partition"
        assert sink.total() == pending_written - held

        # The progress figures of a reader at the query's position: the gate holds them.
        reader = OrderedKafkaStreamReader(parse_source_options(options, streaming=True))
        try:
            position = to_spark(log[max(log)])
            reader.latestOffset(position, ReadAllAvailable())
            first = dict(reader.progress)
            time.sleep(0.3)
            reader.latestOffset(position, ReadAllAvailable())
            second = dict(reader.progress)
        finally:
            reader.stop()
        assert first["recordsHeldAtGates"] == held and first["partitionsHeldAtGates"] == 1
        assert second["oldestGateWaitMs"] >= first["oldestGateWaitMs"] + 250
        assert second["maxOffsetsBehindLatest"] == held

        # The stalled producer acks; the epoch is sealed; the held records come, in order.
        store.ack(
            topic, 1, AckRecord(id="p-stalled", epoch=1, last_offsets={}, acked_at=time.time())
        )
        result = controller.resume(topic, timeout=30)
        assert result is not None and store.get_epoch(topic, 1).sealed
        writer.write(topic, 60)
        written = writer.flush()
        writer.close()
        query.processAllAvailable()

    per_key = check_batches(sink.batches)
    for key, seqs in writer.delivered.items():
        assert per_key.get(key) == sorted(seqs), key
    assert sink.total() == written
    log = offset_log(checkpoint)
    assert max(ends[topic].get(2, 0) for ends in log.values()) > boundary


def end_offset(bootstrap: str, topic: str, partition: int) -> int:
    """Kafka's end offset of one partition."""
    from confluent_kafka import Consumer, TopicPartition

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "unused"})
    try:
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=10)
        return int(high)
    finally:
        consumer.close()
