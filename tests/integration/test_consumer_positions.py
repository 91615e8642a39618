"""The position service against the real ZooKeeper and Kafka: prompt gates, interest."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import wait_until
from kit import Kit

from coordinator.kernel.positions import PositionService, Progress
from coordinator.kernel.store import LayoutStore
from ordered.consumer import GateState, OrderedConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


def test_publish_and_watch(store: LayoutStore, zk_root: str) -> None:
    service = PositionService(store.client, zk_root, "group/with:odd chars")
    seen: list[Progress] = []
    assert service.watch("t", 3, seen.append)
    assert not service.watch("t", 3, seen.append)
    service.publish("t", 3, 10)
    wait_until(lambda: [p.offset for p in seen] == [10], timeout=10, what="first progress")
    service.publish("t", 3, 5)  # never goes back
    service.publish("t", 3, 12)
    wait_until(lambda: [p.offset for p in seen] == [10, 12], timeout=10, what="update")
    assert service.progress("t")[3].offset == 12
    service.declare("t", "member-1", {3: 12, 0: 4})
    wait_until(lambda: service.interest("t"), timeout=10, what="interest")
    assert dict(service.interest("t")["member-1"].waits) == {0: 4, 3: 12}
    service.declare("t", "member-1", {})
    wait_until(lambda: not service.interest("t"), timeout=10, what="interest cleared")


def test_consumers_publish_only_what_someone_waits_on(store: LayoutStore, zk_root: str) -> None:
    """``publish_if_wanted`` writes progress only for a partition a member waits on."""
    service = PositionService(store.client, zk_root, "g-wanted")
    service.publish_if_wanted("t", 1, 5)  # nobody waits in this topic at all
    service.declare("t", "member-1", {2: 7})
    wait_until(lambda: service.interest("t"), timeout=10, what="interest")
    service.publish_if_wanted("t", 1, 6)  # someone waits, but not on partition 1
    service.publish_if_wanted("t", 2, 7)
    wait_until(lambda: 2 in service.progress("t"), timeout=10, what="progress of 2")
    time.sleep(0.3)  # the asynchronous reads of the calls above have all answered
    assert {p: r.offset for p, r in service.progress("t").items()} == {2: 7}


def test_gate_opens_on_progress_long_before_the_fallback_interval(kit: Kit) -> None:
    """With a 20 s fallback interval, the destination opens within a second of the commit."""
    topic = kit.adopted_topic(2)
    producer = Producer({"bootstrap.servers": kit.bootstrap})
    producer.produce(topic, value=b"tail", partition=0)
    assert producer.flush(30) == 0
    kit.controller.expand(topic, 3)
    producer = Producer({"bootstrap.servers": kit.bootstrap})
    producer.produce(topic, value=b"head", partition=2)
    assert producer.flush(30) == 0

    group = kit.group_factory()
    slow = {"ordered.gate.poll.interval.ms": 20_000}
    destination = kit.make_consumer(group, **slow)
    source = kit.make_consumer(group, **slow)
    try:
        destination.assign([TopicPartition(topic, 2)])

        def blocked() -> bool:
            if destination.gate_status(waits=False)[0].state is GateState.BLOCKED:
                return True
            assert destination.consume(10, 0.1) == []
            return False

        wait_until(blocked, 10, what="the destination to reach its gate", interval=0)
        # The interest is declared (the first re-check after blocking).
        service = PositionService(kit.store.client, kit.zk_root, group)
        wait_until(
            lambda: destination.consume(10, 0.05) == [] and service.interest(topic),
            timeout=10,
            what="interest",
        )
        [interest] = service.interest(topic).values()
        assert dict(interest.waits) == {0: 1}

        source.assign([TopicPartition(topic, 0)])
        wait_until(lambda: source.consume(10, 0.2), 20, what="the tail record", interval=0)
        source.consume(1, 0.0)  # announces: commit and publish
        committed_at = time.monotonic()
        head = wait_until(lambda: destination.consume(10, 0.05), 5, what="the head", interval=0)
        assert [m.value() for m in head] == [b"head"]
        assert time.monotonic() - committed_at < 1.5
        assert service.progress(topic)[0].offset == 1
        wait_until(
            lambda: destination.consume(10, 0.05) == [] and not service.interest(topic),
            timeout=10,
            what="interest cleared",
        )
    finally:
        destination.close()
        source.close()


def _daemon(tmp_path: Path, zk_hosts: str, bootstrap: str, zk_root: str) -> subprocess.Popen[bytes]:
    log = (tmp_path / "coordinator.log").open("wb")
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ordered.cli",
                "coordinator",
                "--zookeeper",
                zk_hosts,
                "--bootstrap-servers",
                bootstrap,
                "--root",
                zk_root,
                "--session-timeout",
                "2",
                "--relay-interval",
                "0.05",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finally:
        log.close()


def _blocked_destination(
    consumer: OrderedConsumer, topic: str, partition: int, service: PositionService
) -> None:
    """Assign ``partition``, wait until it is held at its gate and its wait is declared."""
    consumer.assign([TopicPartition(topic, partition)])
    wait_until(
        lambda: (
            consumer.consume(10, 0.1) == []
            and consumer.gate_status(waits=False)[0].state is GateState.BLOCKED
            and service.interest(topic)
        ),
        timeout=20,
        what=f"partition {partition} blocked with its wait declared",
    )


def _plain_commit(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """Commit as a plain consumer would: nothing is published to the position service."""
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        plain.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        plain.close()


def test_relay_opens_gates_and_a_killed_service_falls_back(kit: Kit, tmp_path: Path) -> None:
    """The daemon relays a commit nobody published; SIGKILLed, gates open by the fallback.

    The source's progress comes from a plain consumer's commit, so only the coordinator's
    relay (or the waiter's own fallback poll) can tell the waiting destination.
    """
    topic = kit.adopted_topic(2)
    producer = Producer({"bootstrap.servers": kit.bootstrap})
    producer.produce(topic, value=b"tail-0", partition=0)
    producer.produce(topic, value=b"tail-1", partition=1)
    assert producer.flush(30) == 0
    kit.controller.expand(topic, 4)  # 0 -> 2 and 1 -> 3 at epoch 1
    producer = Producer({"bootstrap.servers": kit.bootstrap})  # knows the new partitions
    producer.produce(topic, value=b"head-2", partition=2)
    producer.produce(topic, value=b"head-3", partition=3)
    assert producer.flush(30) == 0
    group = kit.group_factory()
    service = PositionService(kit.store.client, kit.zk_root, group)
    fallback_ms = 3_000
    slow = {"ordered.gate.poll.interval.ms": fallback_ms}
    daemon = _daemon(tmp_path, kit.zk_hosts, kit.bootstrap, kit.zk_root)
    first = kit.make_consumer(group, **slow)
    second = kit.make_consumer(group, **slow)
    try:
        wait_until(
            lambda: "leader" in (tmp_path / "coordinator.log").read_text(),
            timeout=20,
            what="the coordinator to lead",
        )
        # 1. With the service: the relay publishes the plain commit, the gate opens fast.
        _blocked_destination(first, topic, 2, service)
        _plain_commit(kit.bootstrap, group, topic, 0, 1)
        committed_at = time.monotonic()
        head = wait_until(lambda: first.consume(10, 0.05), 10, what="the head", interval=0)
        relayed_in = time.monotonic() - committed_at
        assert [m.value() for m in head] == [b"head-2"]
        assert relayed_in < 1.5, f"opened after {relayed_in:.2f} s: not by the relay"
        assert service.progress(topic)[0].offset == 1  # the relay's record

        # 2. The service killed: the next gate still opens, through the fallback.
        daemon.kill()
        assert daemon.wait(timeout=10) == -signal.SIGKILL
        _blocked_destination(second, topic, 3, service)
        _plain_commit(kit.bootstrap, group, topic, 1, 1)
        committed_at = time.monotonic()
        head = wait_until(lambda: second.consume(10, 0.05), 15, what="the head", interval=0)
        assert [m.value() for m in head] == [b"head-3"]
        assert 1 not in service.progress(topic)  # nobody relayed it: the fallback did
        assert time.monotonic() - committed_at < fallback_ms / 1000 + 3
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(timeout=10)
        first.close()
        second.close()
