"""The verifiable producer and reader against the real cluster, judged by the checker."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from fixtures import consumer_config
from helpers import wait_until
from kit import Kit

from ordered.verify import VerifiableProducer, VerifiableReader, check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

KEYS = [f"k{i}" for i in range(20)]


def _produce(
    producer: VerifiableProducer, count: int, every: Callable[[], None] | None = None
) -> None:
    for i in range(count):
        producer.send_one()
        if i % 50 == 0:
            producer.poll(0)
            if every is not None:
                every()
    producer.producer.flush(30)
    producer.poll(0)


def _producer(
    bootstrap: str, zk_hosts: str, zk_root: str, topic: str, history: Path, seed: int
) -> VerifiableProducer:
    """The verifiable producer "p1", writing its history under ``history``."""
    config = {
        "bootstrap.servers": bootstrap,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
        "linger.ms": 2,
    }
    return VerifiableProducer(config, "p1", topic, history / "p1.jsonl", KEYS, seed=seed)


def _drain(reader: VerifiableReader, want: int, timeout: float = 90.0) -> None:
    def delivered() -> bool:
        if reader.delivered < want:
            reader.poll_once(0.5)
        return reader.delivered >= want

    wait_until(
        delivered,
        timeout,
        what=lambda: f"{want} delivered ({reader.delivered})",
        interval=0,
    )


def test_verifiable_clients_across_an_expansion_and_a_shrink(kit: Kit, tmp_path: Path) -> None:
    topic = kit.adopted_topic(2)
    history = tmp_path / "history"
    producer = _producer(kit.bootstrap, kit.zk_hosts, kit.zk_root, topic, history, seed=1)
    try:
        _produce(producer, 600)
        kit.controller.expand(topic, 4)
        _produce(producer, 600)
        kit.controller.shrink(topic, 3)
        _produce(producer, 600)
    finally:
        producer.close()
    assert producer.acked == 1800

    group = "verify-" + topic
    config = consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group)
    reader = VerifiableReader(config, group, "r1", topic, history / "r1.jsonl")
    try:
        reader.subscribe()
        _drain(reader, 1800)
    finally:
        reader.close()

    events = list(read_events(sorted(history.iterdir())))
    dlv = [e for e in events if e["ev"] == "dlv"]
    assert {e["e"] for e in dlv} == {0, 1, 2}  # the epoch header came through
    assert {e["tp"] for e in dlv} == {0, 1, 2, 3}
    verdict = check(events)
    assert verdict.records == 1800
    assert verdict.holds, verdict.to_dict()
    assert verdict.groups[group]["delivered"] == 1800

    # The same history with one acked record's delivery removed: the checker notices.
    missing = next(e for e in dlv if e["tp"] == 3)
    verdict = check([e for e in events if e is not missing])
    assert verdict.lost_count == 1
    assert verdict.lost[0]["partition"] == 3


def test_a_running_readers_seek_back_is_checked_as_a_replay_pass(kit: Kit, tmp_path: Path) -> None:
    # The replay case of the chaos run, small: 2 -> 3 -> 4, one reader reads it all,
    # seeks every partition back to the start and reads it all again (its pass 2).
    topic = kit.adopted_topic(2)
    history = tmp_path / "history"
    producer = _producer(kit.bootstrap, kit.zk_hosts, kit.zk_root, topic, history, seed=2)
    try:
        _produce(producer, 2000)
        kit.controller.expand(topic, 3)
        _produce(producer, 2000)
        kit.controller.expand(topic, 4)
        _produce(producer, 2000)
    finally:
        producer.close()
    group = "replay-" + topic
    # Small fetches: librdkafka then interleaves the partitions, as it does with large
    # records; with 1 MB per partition it returns them one after the other.
    config = consumer_config(
        kit.bootstrap, kit.zk_hosts, kit.zk_root, group, **{"max.partition.fetch.bytes": 4096}
    )
    reader = VerifiableReader(config, group, "r1", topic, history / "r1.jsonl")
    try:
        reader.subscribe()
        _drain(reader, 6000)
        first_pass = reader.pass_no
        assert sorted(reader.seek_to_beginning()) == [0, 1, 2, 3]
        assert reader.pass_no == first_pass + 1
        _drain(reader, 12000)
    finally:
        reader.close()
    verdict = check(read_events(sorted(history.iterdir())))
    assert verdict.groups[group]["replayed"] == 6000
    assert verdict.lost_count == 0
    assert verdict.violation_count == 0, [str(v) for v in verdict.violations[:5]]
