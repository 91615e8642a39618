"""Kafka Streams keeps key order by configuration: ``OrderedKafkaClientSupplier``.

A backlog is written by an ``OrderedProducer`` while the topic expands 2 -> 3 -> 4. The
same stateless Streams application (``tests/jvm/StreamsReader.java``: two stream threads,
``buffered.records.per.partition=5``, so that Streams pauses and resumes its partitions
all the time, and resumes ``assignment()`` with them; 1 ms of work per record) reads it
from the beginning twice,
each time as a new application: with ``default.client.supplier`` set to
``org.orderedkafka.OrderedKafkaClientSupplier``, every key is processed in order and
nothing is lost; without it, keys are processed out of order (the test can tell the two
apart).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import unique, wait_until
from jvm_helpers import (
    StreamsReader,
    compile_streams_reader,
    delivered,
    first_out_of_order,
    reader_properties,
    write_backlog,
)
from kit import Kit

from ordered.verify import check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEYS = [f"k{i}" for i in range(40)]


def test_streams_with_the_supplier_keeps_key_order_and_without_it_does_not(
    tmp_path: Path, kit: Kit, jvm_processes: list[StreamsReader]
) -> None:
    backlog = tmp_path / "backlog"
    topic, acked = write_backlog(kit, backlog, KEYS, (("expand", 3), ("expand", 4)))
    assert acked > 5000, acked
    classpath = compile_streams_reader(tmp_path / "classes")
    figures: dict[str, int] = {}

    for supplier in ("ordered", "kafka"):
        app = unique(f"streams-{supplier}")
        hist = tmp_path / supplier
        hist.mkdir()
        (hist / "producer.jsonl").symlink_to(backlog / "producer.jsonl")
        props = reader_properties(
            kit,
            {
                "num.stream.threads": "2",
                "buffered.records.per.partition": "5",
                "commit.interval.ms": "100",
                "consumer.max.poll.records": "50",
                # Small fetches: every fetch brings a few records of each partition, so the
                # tasks read their partitions side by side (one fetch would hold a
                # partition's backlog).
                "consumer.max.partition.fetch.bytes": "4096",
                "consumer.session.timeout.ms": "6000",
                "consumer.heartbeat.interval.ms": "500",
            },
        )
        # 1 ms per record: the read lasts seconds, so every task of both threads reads at once.
        reader = StreamsReader(
            classpath, supplier, topic, app, "s", hist / "s.jsonl", props, delay_ms=1
        )
        jvm_processes.append(reader)

        def processed(hist: Path = hist, app: str = app) -> int:
            return delivered(hist, app)

        wait_until(
            lambda: processed() >= acked,
            120,
            what=lambda s=supplier, r=reader: f"{s}: {processed()} of {acked}\n{r.log()}",
            interval=0.5,
        )
        reader.stop()
        events = list(read_events(sorted(hist.glob("*.jsonl"))))
        figures[supplier] = first_out_of_order(events, app)
        stats = check(events, topic=topic).groups[app]
        assert stats["lost"] == 0, (supplier, stats)
        threads = {e["r"] for e in events if e["ev"] == "dlv"}
        assert len(threads) == 2, f"{supplier}: processed by {threads}, not two stream threads"
    print("first deliveries out of order:", figures)
    assert figures["ordered"] == 0, figures
    assert figures["kafka"] > 0, figures
