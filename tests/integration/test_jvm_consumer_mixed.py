"""A group of a Python ``OrderedConsumer`` and a Java ``OrderedKafkaConsumer``.

Both languages follow one consumer protocol and read the same records in ZooKeeper and
Kafka: the gate trusts committed offsets whoever committed them, and a boundary one
language announces opens a gate the other holds. While a producer writes, the topic
expands 2 -> 3, the Java member leaves and comes back (two rebalances), and the topic
expands 3 -> 4; the verify checker then finds every key in order, nothing lost and no
commit past a record the group had not returned. While both read, ``ordered describe
--group`` names each member's language, client id and host (text and ``--json``).
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from fixtures import consumer_config
from helpers import unique, wait_until
from jvm_helpers import (
    JavaReader,
    delivered,
    reader_classpath,
    reader_properties,
    verify_producer_config,
)
from kit import Kit

from ordered.verify import VerifiableProducer, VerifiableReader, check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEYS = [f"k{i}" for i in range(30)]


def test_python_and_java_consumers_share_a_group_through_expansions_and_rebalances(
    tmp_path: Path, kit: Kit, jvm_processes: list[JavaReader]
) -> None:
    controller = kit.controller
    topic = kit.adopted_topic(2)
    group = unique("g-mixed")
    history = tmp_path / "history"
    classpath = reader_classpath()
    producer = VerifiableProducer(
        verify_producer_config(kit), "py", topic, history / "producer.jsonl", KEYS
    )
    java_props = reader_properties(
        kit,
        {"session.timeout.ms": "6000", "heartbeat.interval.ms": "500", "max.poll.records": "100"},
    )

    def java(rid: str) -> JavaReader:
        reader = JavaReader(
            classpath,
            "ordered",
            topic,
            group,
            rid,
            history / f"{rid}.jsonl",
            java_props,
            commit="sync",
            delay_ms=20,
        )
        jvm_processes.append(reader)
        return reader

    second: JavaReader | None = None
    python = VerifiableReader(
        consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group, **{"client.id": "py-r"}),
        group,
        "py-r",
        topic,
        history / "py-r.jsonl",
    )
    stop_writing = stop_reading = False
    described: Exception | None = None
    writer = threading.Thread(target=lambda: producer.run(400.0, stop=lambda: stop_writing))
    python.subscribe()
    reading = threading.Thread(target=lambda: python.run(lambda: stop_reading))
    writer.start()
    reading.start()
    try:
        first = java("j1")

        def delivered_by(reader: str) -> int:
            return sum(
                1
                for e in read_events(sorted(history.glob("*.jsonl")))
                if e["ev"] == "dlv" and e["r"] == reader
            )

        wait_until(lambda: delivered_by("j1") > 50, 60, what="the Java member reads", interval=0.2)
        controller.expand(topic, 3, timeout=60)
        time.sleep(3.0)
        first.stop()  # a rebalance: the Python member takes every partition
        time.sleep(3.0)
        second = java("j2")  # another: the partitions are shared again
        wait_until(
            lambda: delivered_by("j2") > 50, 60, what="the Java member reads again", interval=0.2
        )
        try:
            _describe_names_both_languages(kit, topic, group)
        except Exception as exc:  # raised after the readers are closed, not left running
            described = exc
        controller.expand(topic, 4, timeout=60)
        time.sleep(3.0)
    finally:
        stop_writing = True
        writer.join(60)
        producer.close()
    acked = producer.acked

    try:
        wait_until(lambda: delivered(history) >= acked, 120, what="every record", interval=0.5)
    finally:
        if second is not None:
            second.stop()
        stop_reading = True
        reading.join(60)
        python.close()
    if described is not None:
        raise described
    events = list(read_events(sorted(history.glob("*.jsonl"))))
    verdict = check(events, topic=topic)
    assert verdict.holds, verdict.to_dict()
    stats = verdict.groups[group]
    assert stats["lost"] == 0 and stats["committed_past_undelivered"] == 0, stats
    readers = {e["r"] for e in events if e["ev"] == "dlv"}
    assert {"py-r", "j1", "j2"} <= readers, readers
    # Both languages read partitions that received keys, and the gates of each were opened
    # by the other's commits at least once: some partition was read by both.
    by_partition: dict[int, set[str]] = {}
    for e in events:
        if e["ev"] == "dlv":
            by_partition.setdefault(e["tp"], set()).add("java" if e["r"].startswith("j") else "py")
    assert any(langs == {"java", "py"} for langs in by_partition.values()), by_partition


def _describe_names_both_languages(kit: Kit, topic: str, group: str) -> None:
    """``describe --group``: one member line per language, with client id and host.

    The Python member's client id is configured (``py-r``); the Java member's is the one
    kafka-clients generates (``consumer-{group}-{n}``), which it reports from its metrics.
    """
    members: dict[str, dict[str, Any]] = {}

    def both() -> bool:
        run = kit.ordered_cli("describe", topic, "--group", group, "--json")
        assert run.returncode == 0, run.stderr
        members.clear()
        for m in json.loads(run.stdout)["members"]:
            members[m["language"] or "-"] = m
        return {"python", "java"} <= set(members)

    wait_until(both, 30, what="describe --group names a python and a java member", interval=1)
    python, java = members["python"], members["java"]
    assert python["client_id"] == "py-r" and python["host"], members
    assert java["client_id"].startswith(f"consumer-{group}-") and java["host"], members
    lines = [
        line.split()
        for line in kit.ordered_cli("describe", topic, "--group", group).stdout.splitlines()
    ]
    for m in (python, java):
        line = [m["consumer_id"], m["language"], m["host"], m["client_id"]]
        assert any(row[:4] == line for row in lines), (line, lines)
