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

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import unique, wait_until
from jvm_helpers import StreamsReader, compile_streams_reader

from coordinator.client.store import LayoutStore
from coordinator.control.controller import Controller
from ordered.verify import VerifiableProducer, check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEYS = [f"k{i}" for i in range(40)]


def first_out_of_order(events: list[dict[str, Any]], group: str) -> int:
    """First deliveries to ``group`` whose sequence is below one delivered before for the key."""
    seen: set[tuple[str, int]] = set()
    top: dict[tuple[str, str], int] = {}
    bad = 0
    dlv = (e for e in events if e["ev"] == "dlv" and e["g"] == group)
    for ev in sorted(dlv, key=lambda e: e["ts"]):
        rid = (ev["p"], int(ev["s"]))
        if rid in seen:
            continue
        seen.add(rid)
        key = (ev["p"], ev["k"])
        if int(ev["s"]) < top.get(key, -1):
            bad += 1
        top[key] = max(top.get(key, -1), int(ev["s"]))
    return bad


@pytest.fixture
def apps() -> Iterator[list[StreamsReader]]:
    started: list[StreamsReader] = []
    yield started
    for app in started:
        app.kill()


def test_streams_with_the_supplier_keeps_key_order_and_without_it_does_not(
    tmp_path: Path,
    topic_factory: Callable[..., str],
    controller: Controller,
    store: LayoutStore,
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
    apps: list[StreamsReader],
) -> None:
    topic = topic_factory(2)
    controller.adopt(topic)
    backlog = tmp_path / "backlog"
    producer = VerifiableProducer(
        {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zk_hosts,
            "ordered.zookeeper.root": zk_root,
            "linger.ms": 5,
        },
        "py",
        topic,
        backlog / "producer.jsonl",
        KEYS,
        padding=80,
    )
    stop = False
    writer = threading.Thread(target=lambda: producer.run(2500.0, stop=lambda: stop))
    writer.start()
    try:
        time.sleep(1.5)
        for to in (3, 4):
            controller.expand(topic, to, timeout=60)
            time.sleep(1.5)
    finally:
        stop = True
        writer.join(60)
        producer.close()
    assert [e.to_active for e in store.epochs(topic)] == [2, 3, 4]
    acked = int(producer.acked)
    assert producer.nacked == 0 and acked > 5000, (acked, producer.nacked)
    classpath = compile_streams_reader(tmp_path / "classes")
    figures: dict[str, int] = {}

    for supplier in ("ordered", "kafka"):
        app = unique(f"streams-{supplier}")
        hist = tmp_path / supplier
        hist.mkdir()
        (hist / "producer.jsonl").symlink_to(backlog / "producer.jsonl")
        props = {
            "bootstrap.servers": bootstrap,
            "num.stream.threads": "2",
            "buffered.records.per.partition": "5",
            "commit.interval.ms": "100",
            "consumer.max.poll.records": "50",
            # Small fetches: every fetch brings a few records of each partition, so the tasks
            # read their partitions side by side (one fetch would hold a partition's backlog).
            "consumer.max.partition.fetch.bytes": "4096",
            "consumer.session.timeout.ms": "6000",
            "consumer.heartbeat.interval.ms": "500",
            "ordered.zookeeper.connect": zk_hosts,
            "ordered.zookeeper.root": zk_root,
            "ordered.gate.poll.interval.ms": "50",
        }
        # 1 ms per record: the read lasts seconds, so every task of both threads reads at once.
        reader = StreamsReader(
            classpath, supplier, topic, app, "s", hist / "s.jsonl", props, delay_ms=1
        )
        apps.append(reader)

        def processed(hist: Path = hist, app: str = app) -> int:
            return len(
                {
                    (e["p"], e["s"])
                    for e in read_events(sorted(hist.glob("*.jsonl")))
                    if e["ev"] == "dlv" and e["g"] == app
                }
            )

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
