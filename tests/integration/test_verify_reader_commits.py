"""A real VerifiableReader records its group's commits, and the checker judges them."""

from __future__ import annotations

from pathlib import Path

import pytest
from fixtures import consumer_config
from helpers import wait_until
from kit import Kit

from ordered.verify import VerifiableProducer, VerifiableReader, check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

KEYS = [f"k{i}" for i in range(20)]


def _produce(producer: VerifiableProducer, count: int) -> None:
    for i in range(count):
        producer.send_one()
        if i % 50 == 0:
            producer.poll(0)
    producer.producer.flush(30)
    producer.poll(0)


def test_the_reader_records_its_commits_and_a_commit_past_a_gap_is_named(
    kit: Kit, tmp_path: Path
) -> None:
    topic = kit.adopted_topic(2)
    history = tmp_path / "history"
    config = {
        "bootstrap.servers": kit.bootstrap,
        "ordered.zookeeper.connect": kit.zk_hosts,
        "ordered.zookeeper.root": kit.zk_root,
        "linger.ms": 2,
    }
    producer = VerifiableProducer(config, "p1", topic, history / "p1.jsonl", KEYS, seed=3)
    try:
        _produce(producer, 400)
        kit.controller.expand(topic, 3)
        _produce(producer, 400)
    finally:
        producer.close()
    assert producer.acked == 800

    group = "commits-" + topic
    reader_config = consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group)
    reader = VerifiableReader(reader_config, group, "r1", topic, history / "r1.jsonl")
    try:
        reader.subscribe()

        def delivered() -> bool:
            if reader.delivered < 800:
                reader.poll_once(0.5)
            return reader.delivered >= 800

        wait_until(delivered, 90, what=lambda: f"800 delivered ({reader.delivered})", interval=0)
    finally:
        reader.close()

    events = list(read_events(sorted(history.iterdir())))
    commits = [e for e in events if e["ev"] == "cmt"]
    # The expansion made partition 0 a source: its boundary commit came through the hook.
    assert {e["why"] for e in commits} == {"commit", "boundary", "read"}, commits
    for event in commits:
        assert event["g"] == group and event["r"] == "r1" and event["t"] == topic
        assert event["o"] >= 0 and event["ts"] > 0
    # What the reader read back as it closed: every partition committed past its last
    # acked record (the group read everything).
    acks = [e for e in events if e["ev"] == "ack"]
    ends = {p: max(e["o"] for e in acks if e["tp"] == p) + 1 for p in {e["tp"] for e in acks}}
    read = {e["tp"]: e["o"] for e in commits if e["why"] == "read"}
    assert set(read) == {0, 1, 2}, commits
    for partition, end in ends.items():
        assert read[partition] >= end, (partition, end, read)

    verdict = check(events)
    assert verdict.holds, verdict.to_dict()
    assert verdict.groups[group]["commits"] == len(commits)
    assert verdict.groups[group]["committed_past_undelivered"] == 0

    # The same history without one delivery in the middle of a partition: the commits
    # that followed passed it.
    dlv = [e for e in events if e["ev"] == "dlv" and e["tp"] == 0]
    missing = dlv[len(dlv) // 2]
    verdict = check([e for e in events if e is not missing])
    assert verdict.committed_past_count == 1
    assert verdict.groups[group]["committed_past_undelivered"] == 1
    sample = verdict.committed_past[0]
    assert (sample["partition"], sample["offset"]) == (0, missing["o"])
    assert sample["committed"] > missing["o"] and sample["delivered_later"] is False
    assert verdict.lost_count == 1 and not verdict.holds
