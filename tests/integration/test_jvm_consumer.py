"""Java readers of an ordered topic: Kafka's ``KafkaConsumer`` against ``OrderedKafkaConsumer``.

One backlog, written by an ``OrderedProducer`` while the topic goes 2 -> 3 -> 4 -> 2 -> 4,
is read by the same Java program (the jar's ``VerifiableReader``) with either consumer,
each case in a group of its own: one member; two members started together; two members of
which one is killed with SIGKILL while a gate holds one of its partitions, then started
again. On both group protocols (classic, and ``consumer`` of KIP-848) and with
``enable.auto.commit`` true and false (``commitSync()`` after each poll). Kafka's consumer
gives keys out of order; ours gives none, loses nothing and never commits past a record it
did not return (the verify checker), and after the kill the group's committed offset of
every partition the killed member held is at or below its held offset.

``ORDERED_JVM_CONSUMER_MATRIX=full`` runs every case with both consumers (the figures of
``docs/jvm.md``); by default Kafka's consumer runs the classic protocol's cases only, and
the kill on ``group.protocol=consumer`` (whose sessions last at least 45 s on the broker)
only with auto-commit.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import unique, wait_until
from jvm_helpers import (
    JavaReader,
    delivered,
    first_out_of_order,
    reader_classpath,
    reader_properties,
    write_backlog,
)
from kit import Kit

from ordered.verify import check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

KEYS = [f"k{i}" for i in range(40)]
FULL = os.environ.get("ORDERED_JVM_CONSUMER_MATRIX") == "full"
ONLY = os.environ.get("ORDERED_JVM_CONSUMER_CASE", "")  # e.g. "ordered-classic-auto-one"


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    reader = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        found = reader.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
    finally:
        reader.close()
    return {tp.partition: tp.offset for tp in found if tp.offset >= 0}


def record_committed(path: Path, bootstrap: str, group: str, topic: str) -> dict[int, int]:
    """Read the group's committed offsets back into the history (``cmt``, ``read``): the
    checker then finds any that passed a record no member had returned."""
    found = committed(bootstrap, group, topic, 4)
    with path.open("a") as f:
        for tp, o in found.items():
            event = {"ev": "cmt", "g": group, "r": "test", "t": topic, "tp": tp, "o": o}
            f.write(json.dumps({**event, "why": "read", "ts": time.monotonic_ns()}) + "\n")
    return found


def test_kafka_consumer_loses_order_and_ours_keeps_it(
    tmp_path: Path, kit: Kit, jvm_processes: list[JavaReader]
) -> None:
    bootstrap = kit.bootstrap
    backlog = tmp_path / "backlog"
    steps = (("expand", 3), ("expand", 4), ("shrink", 2), ("expand", 4))
    topic, acked = write_backlog(kit, backlog, KEYS, steps)
    assert acked > 10_000
    classpath = reader_classpath()
    figures: dict[str, int] = {}

    def run_case(impl: str, protocol: str, commit: str, case: str) -> None:
        name = f"{impl}-{protocol}-{commit}-{case}"
        group = unique("g-" + name)
        hist = tmp_path / name
        hist.mkdir()
        (hist / "producer.jsonl").symlink_to(backlog / "producer.jsonl")
        props = reader_properties(
            kit,
            {
                "group.protocol": protocol,
                "max.poll.records": "200",
                "auto.commit.interval.ms": "300",
            },
        )
        if protocol == "classic":
            props.update({"session.timeout.ms": "6000", "heartbeat.interval.ms": "500"})
        else:
            props["ordered.positions"] = "true"
        if impl == "kafka":
            props = {k: v for k, v in props.items() if not k.startswith("ordered.")}

        def start(rid: str, delay: int = 0) -> JavaReader:
            reader = JavaReader(
                classpath,
                impl,
                topic,
                group,
                rid,
                hist / f"{rid}.jsonl",
                props,
                commit=commit,
                delay_ms=delay,
            )
            jvm_processes.append(reader)
            return reader

        # Slowed down so that two members share the backlog (alone, one reads it in a second).
        delay = 0 if case == "one" else 40
        members = [start("a", delay)] + ([start("b", delay)] if case != "one" else [])
        held_at_kill: list[list[int]] = []
        victim: list[int] = []
        if case == "kill":
            ids = ["a", "b"]

            def holder() -> int | None:
                """The first member whose gates hold a partition now (either may)."""
                for i, rid in enumerate(ids):
                    path = hist / f"{rid}.jsonl"
                    if impl == "kafka":
                        return i
                    held = (
                        [e for e in read_events([path]) if e["ev"] == "held"]
                        if path.exists()
                        else []
                    )
                    if held and held[-1]["held"]:
                        return i
                return None

            def a_member_holds() -> bool:
                found = holder() if delivered(hist, group) > acked // 5 else None
                if found is not None:
                    victim.append(found)
                return found is not None

            wait_until(a_member_holds, 120, what="a member holds", interval=0.2)
            rid = ids[victim[-1]]
            members[victim[-1]].kill()
            if impl == "ordered":
                held_at_kill = next(
                    e["held"]
                    for e in reversed(list(read_events([hist / f"{rid}.jsonl"])))
                    if e["ev"] == "held"
                )
            after = record_committed(hist / "read.jsonl", bootstrap, group, topic)
            assert impl == "kafka" or held_at_kill, "the killed member held nothing"
            # After the kill, no committed offset of a held partition is past its held record.
            for tp, offset in held_at_kill:
                assert after.get(tp, 0) <= offset, (tp, offset, after)
            members.append(start(f"{rid}2"))
        wait_until(
            lambda: delivered(hist, group) >= acked,
            240,
            what=f"{name}: all delivered",
            interval=0.5,
        )
        for i, reader in enumerate(members):
            if victim and i == victim[-1]:
                reader.kill()  # killed already
            else:
                reader.stop()
        record_committed(hist / "read.jsonl", bootstrap, group, topic)
        events = list(read_events(sorted(hist.glob("*.jsonl"))))
        figures[name] = first_out_of_order(events, group)
        if impl == "ordered":
            verdict = check(events, topic=topic)
            stats = verdict.groups[group]
            assert verdict.holds, (name, verdict.to_dict())
            assert figures[name] == 0 and stats["lost"] == 0, (name, stats)
            assert stats["commits"] > 0 and stats["committed_past_undelivered"] == 0, stats

    for protocol in ("classic", "consumer"):
        for commit in ("auto", "sync"):
            for case in ("one", "two", "kill"):
                if case == "kill" and protocol == "consumer" and commit == "sync" and not FULL:
                    continue
                for impl in ("ordered", "kafka"):
                    if impl == "kafka" and not (
                        FULL or (protocol == "classic" and commit == "auto")
                    ):
                        continue
                    if not ONLY or f"{impl}-{protocol}-{commit}-{case}" == ONLY:
                        run_case(impl, protocol, commit, case)
    print("first deliveries out of order:", json.dumps(figures, indent=1, sort_keys=True))
    # Kafka's consumer loses order in every case run: the scenario can tell them apart.
    kafka = {k: v for k, v in figures.items() if k.startswith("kafka-")}
    assert ONLY or (kafka and all(v > 0 for v in kafka.values())), kafka
    assert all(v == 0 for k, v in figures.items() if k.startswith("ordered-")), figures
