"""``ordered trim``/``ordered retention`` against the one-broker cluster: real errors.

The replicated scenarios (drain, SIGSTOPped follower, re-expansion) are in
test_trim_replicated.py on the three-broker cluster.
"""

from __future__ import annotations

import functools
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import unique
from kit import Kit

from coordinator.groups.interest import InterestSettings, topic_interest
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.trims.trim import Trimmer, TrimStatus

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture
def cli(ordered_cli: Callable[..., Any]) -> Callable[..., Any]:
    return functools.partial(ordered_cli, session_timeout=None)


def fill(bootstrap: str, topic: str, partitions: int, count: int, key: bool = False) -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    for p in range(partitions):
        for i in range(count):
            producer.produce(topic, value=b"v", key=f"k{i}" if key else None, partition=p)
    assert producer.flush(30) == 0


def test_trim_partition_validation_and_offset_file(
    cli: Callable[..., Any], topic_factory: Callable[..., str], bootstrap: str, tmp_path: Path
) -> None:
    topic = topic_factory(3)
    fill(bootstrap, topic, 3, 20)
    admin = KafkaAdmin(bootstrap)

    done = cli("trim", topic, "--partition", "0", "--before", "5", "--json")
    assert done.returncode == 0, done.stderr
    [r] = json.loads(done.stdout)["partitions"]
    assert (r["requested_offset"], r["low_watermark"], r["leader_log_start_offset"]) == (5, 5, 5)
    assert r["status"] == "trimmed"
    assert admin.start_offsets(topic, [0, 1, 2]) == {0: 5, 1: 0, 2: 0}

    bad_json = tmp_path / "bad.json"
    bad_json.write_text("{not json")
    # Exit code 2: the command line is wrong; 1: the request does not fit the topic.
    cases = [
        (("--partition", "0", "--before", "-3"), "offset must be >= 0", 1),
        (("--partition", "1", "--before", "21"), "past the high watermark 20", 1),
        (("--partition", "7", "--before", "1"), "has no partition 7", 1),
        (("--partition", "1"), "--partition and --before go together", 2),
        (("--consumed",), "is not adopted", 1),
        (("--offset-json-file", str(bad_json)), "is not JSON", 1),
        ((), "name exactly one target", 2),
        (("--consumed", "--partition", "1", "--before", "2"), "name exactly one target", 2),
    ]
    for args, message, code in cases:
        refused = cli("trim", topic, *args)
        assert refused.returncode == code, (args, refused.stdout, refused.stderr)
        assert message in refused.stderr, (args, refused.stderr)
        assert "Traceback" not in refused.stderr
    assert admin.start_offsets(topic, [0, 1, 2]) == {0: 5, 1: 0, 2: 0}

    offsets = tmp_path / "offsets.json"
    offsets.write_text(
        json.dumps(
            {
                "partitions": [
                    {"topic": topic, "partition": 1, "offset": 7},
                    {"topic": topic, "partition": 2, "offset": -1},
                ],
                "version": 1,
            }
        )
    )
    dry = cli("trim", "--offset-json-file", str(offsets), "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    assert [p["status"] for p in json.loads(dry.stdout)["partitions"]] == ["dry-run"] * 2
    assert admin.start_offsets(topic, [1, 2]) == {1: 0, 2: 0}
    done = cli("trim", "--offset-json-file", str(offsets))
    assert done.returncode == 0, done.stderr
    assert f"{topic}[2]: trimmed, requested 20, low watermark 20" in done.stdout
    assert admin.start_offsets(topic, [0, 1, 2]) == {0: 5, 1: 7, 2: 20}


def test_real_error_codes(
    cli: Callable[..., Any], topic_factory: Callable[..., str], bootstrap: str
) -> None:
    compacted = topic_factory(1, config={"cleanup.policy": "compact"})
    fill(bootstrap, compacted, 1, 10, key=True)
    refused = cli("trim", compacted, "--partition", "0", "--before", "3", "--json")
    assert refused.returncode == 1
    [r] = json.loads(refused.stdout)["partitions"]
    assert r["status"] == "skipped" and r["error"] == "POLICY_VIOLATION"
    assert "POLICY_VIOLATION" in refused.stderr

    topic = topic_factory(1)
    fill(bootstrap, topic, 1, 10)
    admin = KafkaAdmin(bootstrap)
    trimmer = Trimmer(admin)
    # Past the high watermark (validation would refuse it; sent raw, the broker does).
    [r] = trimmer.trim({(topic, 0): 50}, timeout=5).results
    assert r.status is TrimStatus.FAILED and r.error == "OFFSET_OUT_OF_RANGE"
    # A partition the topic does not have: retried until the timeout, then named.
    [r] = trimmer.trim({(topic, 4): 1}, timeout=1.5).results
    assert r.status is TrimStatus.FAILED and r.error == "UNKNOWN_TOPIC_OR_PARTITION", r
    assert admin.start_offsets(topic, [0]) == {0: 0}


def test_retention_setting(cli: Callable[..., Any], topic_factory: Callable[..., str]) -> None:
    topic = topic_factory(2)
    refused = cli("retention", topic, "--consumed-ms", "1000")
    assert refused.returncode == 1 and "is not adopted" in refused.stderr
    assert cli("adopt", topic).returncode == 0
    shown = cli("retention", topic, "--json")
    assert json.loads(shown.stdout) == {"topic": topic, "consumed_ms": None}
    assert cli("retention", topic, "--consumed-ms", "60000").returncode == 0
    assert json.loads(cli("retention", topic, "--json").stdout)["consumed_ms"] == 60000
    described = json.loads(cli("describe", topic, "--json").stdout)
    assert described["consumed_retention_ms"] == 60000 and described["retired"] == []
    assert cli("retention", topic, "--consumed-ms", "0").returncode == 2
    assert cli("retention", topic, "--off").returncode == 0
    assert json.loads(cli("retention", topic, "--json").stdout)["consumed_ms"] is None


def test_interested_groups(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    fill(kit.bootstrap, topic, 2, 10)
    admin = KafkaAdmin(kit.bootstrap)
    ordered, other, idle = unique("ordered"), unique("other"), unique("idle")
    for group, offsets in ((ordered, {0: 4, 1: 6}), (other, {0: 2})):
        client = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group})
        client.commit(
            offsets=[TopicPartition(topic, p, o) for p, o in offsets.items()], asynchronous=False
        )
        client.close()
    kit.store.register_group(ordered, topic, 1.0)
    # Registered long ago, never committed, no member: stale, holds nothing.
    kit.store.register_group(idle, topic, 1.0)

    now = time.time()
    seen = topic_interest(kit.store, admin, topic, [0, 1], observe=True, now=now)
    assert {g.group for g in seen.holding} == {ordered, other}
    assert {g.group: g.registered for g in seen.groups} == {ordered: True, other: False}
    assert (seen.min_committed(0), seen.min_committed(1)) == (2, 0)

    only = topic_interest(kit.store, admin, topic, [0, 1], InterestSettings(registered_only=True))
    assert [g.group for g in only.holding] == [ordered]
    assert (only.min_committed(0), only.min_committed(1)) == (4, 6)

    # Both groups are empty; after the stale time their commits hold nothing back.
    stale = InterestSettings(stale_after_ms=60_000)
    assert len(topic_interest(kit.store, admin, topic, [0, 1], stale, now=now + 59).holding) == 2
    late = topic_interest(kit.store, admin, topic, [0, 1], stale, now=now + 61)
    assert late.holding == () and late.min_committed(0) is None
    # A new commit restarts the clock (first seen again by an observing read).
    client = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": other})
    client.commit(offsets=[TopicPartition(topic, 0, 3)], asynchronous=False)
    client.close()
    again = topic_interest(kit.store, admin, topic, [0, 1], stale, observe=True, now=now + 62)
    assert [g.group for g in again.holding] == [other]

    # A group registered just now that has not committed yet (a new group reading from
    # earliest, an exactly-once pipeline's first open transaction) has read nothing:
    # it holds every partition at 0 until it is stale.
    fresh = unique("fresh")
    kit.store.register_group(fresh, topic, time.time())
    held = topic_interest(kit.store, admin, topic, [0, 1], stale, now=time.time())
    assert fresh in {g.group for g in held.holding}
    assert (held.min_committed(0), held.min_committed(1)) == (0, 0)
    later = topic_interest(kit.store, admin, topic, [0, 1], stale, now=time.time() + 61)
    assert fresh not in {g.group for g in later.holding}

    # Unreadable offsets: nothing is trimmed on a guess.
    broken = KafkaAdmin("127.0.0.1:1", timeout=1.0)
    blind = topic_interest(kit.store, broken, topic, [0, 1])
    assert blind.unreadable and blind.min_committed(0) is None
