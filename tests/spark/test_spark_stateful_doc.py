"""The stateful per-key job of docs/spark.md, run as written while its input is resized.

The code is taken from the document at test time (the ``python`` block after the
marker comment), not copied: editing the document changes what runs here. Real Spark,
real Kafka, real ZooKeeper.
"""

from __future__ import annotations

import re
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from spark_helpers import BackgroundWriter, SparkQueries

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "spark.md"
MARKER = "<!-- The test suite runs this block as written"


def doc_block() -> str:
    """The ``python`` block that follows the marker comment in docs/spark.md."""
    text = DOC.read_text()
    at = text.index(MARKER)
    match = re.compile(r"```python\n(.*?)\n```", re.S).search(text, at)
    assert match is not None, "no python block after the marker in docs/spark.md"
    return match.group(1)


def read_topic(bootstrap: str, topic: str) -> dict[str, list[str]]:
    """Every record of ``topic``, per key in offset order (the topic is never resized)."""
    consumer = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "unused", "enable.partition.eof": True}
    )
    try:
        parts = sorted(consumer.list_topics(topic, timeout=10).topics[topic].partitions)
        out: dict[str, list[str]] = defaultdict(list)
        for p in parts:
            _low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            consumer.assign([TopicPartition(topic, p, 0)])
            pos = 0
            while pos < high:
                for m in consumer.consume(1000, 5.0):
                    if m.error() is None:
                        out[m.key().decode()].append(m.value().decode())
                        pos = m.offset() + 1
        return dict(out)
    finally:
        consumer.close()


def test_running_totals_of_the_doc_match_a_sequential_fold_across_expand_and_shrink(
    queries: SparkQueries,
) -> None:
    namespace: dict[str, Any] = {"__name__": "docs_spark_stateful"}
    exec(compile(doc_block(), str(DOC), "exec"), namespace)
    start_running_totals = namespace["start_running_totals"]

    amounts, totals = queries.adopted_topic(2), queries.adopted_topic(2)
    writer = queries.writer(keys=12, amounts=True)
    writer.write(amounts, 240)
    writer.flush()
    query = start_running_totals(
        queries.spark,
        queries.options(amounts, maxOffsetsPerTrigger=300),
        queries.sink_options(totals),
        str(queries.checkpoint),
    )
    try:
        background = BackgroundWriter(writer, amounts, burst=12, pause=0.1)
        try:
            for step, to in (("expand", 3), ("expand", 4), ("shrink", 3)):
                time.sleep(1.0)
                getattr(queries.controller, step)(amounts, to, timeout=60)
            time.sleep(1.0)
        finally:
            written = background.stop()
        writer.close()
        query.processAllAvailable()
        batches = len(query.recentProgress)
    finally:
        query.stop()
    assert written > 240 and batches >= 2

    got = read_topic(queries.bootstrap, totals)
    # The sequential fold: key k's n-th total is 1 + 2 + ... + n (its n-th amount is n).
    expected = {
        key: [str((n + 1) * (n + 2) // 2) for n in sorted(seqs)]
        for key, seqs in writer.delivered.items()
    }
    assert all(seqs == set(range(len(seqs))) for seqs in writer.delivered.values())
    wrong = {k: (got.get(k, [])[:8], v[:8]) for k, v in expected.items() if got.get(k) != v}
    assert not wrong, wrong
    assert sum(len(v) for v in got.values()) == written
