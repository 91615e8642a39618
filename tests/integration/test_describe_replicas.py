"""``ordered describe`` shows leader, replicas and ISR per partition (issue 30), as
``kafka-topics --describe`` does, in the text and in ``--json``."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka.admin import AdminClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def metadata(bootstrap: str, topic: str) -> dict[int, tuple[int, list[int], list[int]]]:
    """Leader, replicas and ISR per partition, from Kafka's metadata (the yardstick)."""
    described = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic, timeout=10)
    return {
        p.id: (p.leader, list(p.replicas), list(p.isrs))
        for p in described.topics[topic].partitions.values()
    }


def test_describe_lists_leader_replicas_isr_per_partition(
    ordered_cli: Callable[..., Any], topic_factory: Callable[..., str], bootstrap: str
) -> None:
    topic = topic_factory(2)
    assert ordered_cli("adopt", topic).returncode == 0
    assert ordered_cli("expand", topic, "--to", "4").returncode == 0
    shrunk = ordered_cli("shrink", topic, "--to", "3")
    assert shrunk.returncode == 0, shrunk.stderr
    expected = metadata(bootstrap, topic)
    assert sorted(expected) == [0, 1, 2, 3]

    described = ordered_cli("describe", topic, "--json")
    assert described.returncode == 0, described.stderr
    payload = json.loads(described.stdout)
    rows = payload["partitions"]
    assert [r["partition"] for r in rows] == [0, 1, 2, 3]
    for r in rows:
        leader, replicas, isr = expected[r["partition"]]
        assert (r["leader"], r["replicas"], r["isr"]) == (leader, replicas, isr)
    # The retired partition's role is its retirement state (an empty one is trimmed).
    [retired] = payload["retired"]
    assert retired["partition"] == 3
    assert [r["role"] for r in rows] == ["active", "active", "active", retired["state"]]

    text = ordered_cli("describe", topic).stdout
    lines = text.splitlines()
    header = next(
        i
        for i, line in enumerate(lines)
        if line.split()[:5] == ["PARTITION", "ROLE", "LEADER", "REPLICAS", "ISR"]
    )
    for p in range(4):
        leader, replicas, isr = expected[p]
        cells = lines[header + 1 + p].split()
        assert cells == [
            str(p),
            "active" if p < 3 else retired["state"],
            str(leader),
            ",".join(map(str, replicas)),
            ",".join(map(str, isr)),
        ], text


def test_describe_of_a_plain_topic_lists_its_partitions(
    ordered_cli: Callable[..., Any], topic_factory: Callable[..., str], bootstrap: str
) -> None:
    topic = topic_factory(2)
    expected = metadata(bootstrap, topic)
    described = ordered_cli("describe", topic, "--json")
    assert described.returncode == 0, described.stderr
    rows = json.loads(described.stdout)["partitions"]
    assert [(r["partition"], r["leader"], r["replicas"], r["isr"], r["role"]) for r in rows] == [
        (p, *expected[p], "plain") for p in (0, 1)
    ]
