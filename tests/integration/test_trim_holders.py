"""A group that registered interest but never committed holds trims at 0: commands name it.

The rule (docs/operations.md): a registered ordered group without a commit on the topic
has consumed nothing, so it holds every partition at 0 until it commits, or until it has
no member and registered longer ago than ``--stale-group-ms``. Whatever holds a trim is
named: ``describe --all-groups`` lists the group (and why), ``trim --consumed
--dry-run`` names the group at each partition's minimum, in text and in ``--json``.
"""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import unique
from kit import Kit

from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import RetentionRecord
from coordinator.trims.retention import Sweeper

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def _fill(kit: Kit, topic: str, count: int) -> None:
    producer = kit.make_producer()
    for i in range(count):
        producer.produce(topic, value=b"v", key=f"k{i}")
    assert producer.flush(30) == 0


def _commit_all(kit: Kit, topic: str, partitions: int) -> str:
    """A plain group that committed every partition to its end: alone it would let trim."""
    group = unique("done")
    client = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group})
    try:
        offsets = []
        for p in range(partitions):
            _low, high = client.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            offsets.append(TopicPartition(topic, p, high))
        client.commit(offsets=offsets, asynchronous=False)
    finally:
        client.close()
    return group


def _read_some(consumer: object, want: int, timeout: float = 30.0) -> int:
    got = 0
    deadline = time.monotonic() + timeout
    while got < want and time.monotonic() < deadline:
        msg = consumer.poll(0.5)  # type: ignore[attr-defined]
        if msg is not None and msg.error() is None:
            got += 1
    return got


def _assert_named(kit: Kit, topic: str, holder: str, partitions: int) -> None:
    described = kit.ordered_cli("describe", topic, "--all-groups", "--json")
    assert described.returncode == 0, described.stderr
    groups = {g["group"]: g for g in json.loads(described.stdout)["groups"]}
    assert holder in groups, sorted(groups)
    assert groups[holder]["holds_trims"] is True
    assert "interest but no commit" in groups[holder]["holds_reason"]
    text = kit.ordered_cli("describe", topic, "--all-groups")
    assert f"group {holder} on topic {topic}" in text.stdout
    assert "holds trims: registered ordered group with interest but no commit" in text.stdout

    dry = kit.ordered_cli("trim", topic, "--consumed", "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    report = json.loads(dry.stdout)
    assert report["partitions"] == []  # held at 0: nothing to trim
    for p in range(partitions):
        [held] = report["held_by"][str(p)]
        assert (held["group"], held["committed"]) == (holder, None)
        assert held["why"] == "interest but no commit"
    plain = kit.ordered_cli("trim", topic, "--consumed", "--dry-run")
    assert plain.returncode == 0, plain.stderr
    assert f"{topic}[0]: held by {holder} (interest but no commit)" in plain.stdout
    assert f"minimum committed 0, held by {holder}" in plain.stderr


def _holder_setup(kit: Kit, prefix: str) -> tuple[str, str, Any]:
    """A 2-partition topic of 40 records all committed by another group, and a consumer
    of a new group (``prefix``...) that never commits."""
    topic = kit.adopted_topic(2)
    _fill(kit, topic, 40)
    _commit_all(kit, topic, 2)
    group = unique(prefix)
    consumer = kit.make_consumer(
        group, **{"enable.auto.commit": False, "auto.offset.reset": "earliest"}
    )
    return topic, group, consumer


def test_a_consumer_that_never_commits_is_named(kit: Kit) -> None:
    topic, group, consumer = _holder_setup(kit, "never")
    consumer.subscribe([topic])
    assert _read_some(consumer, 5) == 5  # reads, never commits: interest is registered
    _assert_named(kit, topic, group, 2)

    # The daemon's sweep says so too, once (not at every sweep).
    kit.store.set_retention(RetentionRecord(topic, 1, time.time()))
    lines: list[str] = []
    admin = KafkaAdmin(kit.bootstrap)
    try:
        sweeper = Sweeper(kit.store, admin, progress=lines.append)
        assert sweeper.sweep_topic(topic) == [] and sweeper.sweep_topic(topic) == []
    finally:
        admin.close()
    held = [line for line in lines if "interest but no commit" in line]
    assert len(held) == 1 and group in held[0], lines


def test_a_throwaway_assign_consumer_is_named(kit: Kit) -> None:
    topic, group, consumer = _holder_setup(kit, "peek")
    consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    assert _read_some(consumer, 3) == 3
    consumer.close()  # gone: no member, no commit; registered just now, so it holds
    _assert_named(kit, topic, group, 2)
