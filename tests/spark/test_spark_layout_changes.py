"""A streaming query over a topic that grows and shrinks while it runs, and while it is down.

Real Spark (a standalone master and two workers unless ORDERED_TEST_SPARK_MASTER says
otherwise), real Kafka, real ZooKeeper. Shows (issue 9, "Must show"): per-key
order across batches, no key from two partitions within one batch, nothing lost, a
restart from the checkpoint after a layout change, and caps that obey the gate rule in
the query's offset log. And no ``StackOverflowError`` in any Spark log of the run
(issue 29): the queries are stopped with their ``foreachBatch`` wrapped in
:func:`spark_source.stoppable` (``spark_helpers.start`` does it for every query).
"""

from __future__ import annotations

import time

import pytest
from spark_cluster import find_in_logs, run_logs
from spark_helpers import (
    BackgroundWriter,
    Collector,
    SparkQueries,
    check_batches,
    gate_violations,
    offset_log,
    order_report,
)

from coordinator.kernel.store import LayoutStore

# 480 s: the first Spark test of a session also starts the standalone cluster and the
# session (both count against its timeout), over a minute each on a busy machine.
pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(480)]


def test_expand_shrink_during_the_query_then_restart_after_a_change(
    queries: SparkQueries, store: LayoutStore, tmp_path_factory: pytest.TempPathFactory
) -> None:
    controller = queries.controller
    topic = queries.adopted_topic(2)
    writer = queries.writer()
    writer.write(topic, 400)
    writer.flush()
    options = queries.options(topic, maxOffsetsPerTrigger=500)
    sink = Collector()

    with queries.running(sink, options) as query:
        background = BackgroundWriter(writer, topic)
        try:
            for step, to in (("expand", 3), ("expand", 4), ("shrink", 3)):
                time.sleep(0.7)
                getattr(controller, step)(topic, to, timeout=30)
            time.sleep(0.7)
        finally:
            written = background.stop()
        query.processAllAvailable()
    assert sink.total() == written, (sink.total(), written)

    # Down: the layout changes and more is written.
    writer.write(topic, 200)
    background = BackgroundWriter(writer, topic)
    try:
        controller.expand(topic, 5, timeout=30)
        time.sleep(0.5)
    finally:
        written = background.stop()
    writer.write(topic, 100)
    written = writer.flush()
    writer.close()

    batches_before = len(sink.batches)
    queries.process_available(sink, options)
    assert len(sink.batches) > batches_before

    report = order_report(sink.batches, writer.delivered)
    print(f"[spark e2e] master {queries.spark.sparkContext.master}: {report}")
    assert report["records"] == written and report["batches"] > 0
    assert report["out_of_order"] == report["lost"] == report["split_batches"] == 0, report
    per_key = check_batches(sink.batches)
    # Nothing lost, nothing twice: every delivered sequence number, once, in order.
    for key, seqs in writer.delivered.items():
        assert per_key.get(key) == sorted(seqs), key
    assert sink.total() == written

    epochs = store.epochs(topic)
    assert [e.to_active for e in epochs] == [2, 3, 4, 3, 5]
    assert all(e.sealed for e in epochs)
    log = offset_log(queries.checkpoint)
    assert len(log) == len(sink.batches)
    # The gate rule, checked on what Spark logged (batch 0 starts at the earliest: 0).
    assert gate_violations(log, topic, epochs[1:], {}) == []
    # And the receivers were held back at least once (the check above can fail).
    assert any(
        log[i].get(topic, {}).get(b, 0) == e.boundaries[b]
        for i in log
        for e in epochs[1:]
        for _a, b in e.edges
    ), log

    # A stop that lands in a batch must not kill the stream thread (issue 29).
    driver, others = run_logs(queries.spark, tmp_path_factory.getbasetemp())
    logs = [*others, *([driver] if driver is not None else [])]
    print(f"[spark e2e] checked {len(logs)} Spark logs (driver stderr: {driver is not None})")
    overflow = find_in_logs(logs, "StackOverflowError")
    assert overflow == [], overflow[:5]
