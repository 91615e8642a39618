"""OrderedConsumer groups against the real servers: threads through an expansion and a
shrink with a live OrderedProducer, and a consumer SIGKILLed just before a boundary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from helpers import kill_process, transient_error, wait_until
from kazoo.client import KazooClient

from coordinator.controller import Controller
from coordinator.kafka_admin import KafkaAdmin
from coordinator.store import LayoutStore
from linear_hash import Layout
from ordered.consumer import GateState, OrderedConsumer
from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def store(zk_hosts: str, zk_root: str) -> Iterator[LayoutStore]:
    client = KazooClient(hosts=zk_hosts, timeout=6.0, command_retry={"deadline": 10.0})
    client.start(timeout=10)
    try:
        yield LayoutStore(client, zk_root)
    finally:
        client.stop()
        client.close()


@pytest.fixture
def controller(store: LayoutStore, bootstrap: str) -> Controller:
    return Controller(store, KafkaAdmin(bootstrap, timeout=10.0))


def consumer_config(bootstrap: str, zk_hosts: str, zk_root: str, group: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
        "ordered.gate.poll.interval.ms": 50,
    }


class Checker:
    """First deliveries across the whole group, checked per key as they happen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next_seq: dict[str, int] = {}
        self.errors: list[str] = []
        self.first = 0
        self.repeats = 0

    def record(self, who: str, messages: list[Any]) -> None:
        with self.lock:
            for m in messages:
                key, seq_text = m.value().decode().split(":")
                seq = int(seq_text)
                due = self.next_seq.get(key, 0)
                if seq < due:
                    self.repeats += 1
                elif seq == due:
                    self.next_seq[key] = seq + 1
                    self.first += 1
                else:
                    self.errors.append(
                        f"{who}: {key} seq {seq} before {due} ({m.partition()}@{m.offset()})"
                    )


def test_group_through_expansion_and_shrink_keeps_every_key_in_order(
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    controller: Controller,
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
) -> None:
    """(c) Three consumer threads, one producer, expand 2 -> 4 then shrink 4 -> 3."""
    topic = topic_factory(2)
    controller.adopt(topic)
    group = group_factory()
    checker = Checker()
    stop_consumers = threading.Event()
    stop_producer = threading.Event()
    produced: dict[str, int] = {}
    failures: list[BaseException] = []
    metrics: list[dict[str, int]] = []
    commit_errors: list[str] = []

    def produce() -> None:
        try:
            producer = OrderedProducer(
                {
                    "bootstrap.servers": bootstrap,
                    "linger.ms": 5,
                    "ordered.zookeeper.connect": zk_hosts,
                    "ordered.zookeeper.root": zk_root,
                }
            )
            i = 0
            while not stop_producer.is_set():
                key = f"key{i % 24}"
                seq = produced.get(key, 0)
                producer.produce(topic, value=f"{key}:{seq}".encode(), key=key)
                produced[key] = seq + 1
                i += 1
                producer.poll(0)
                time.sleep(0.002)
            assert producer.flush(30) == 0
            producer.close()
        except BaseException as exc:
            failures.append(exc)

    def consume(name: str) -> None:
        consumer = OrderedConsumer(consumer_config(bootstrap, zk_hosts, zk_root, group))
        try:
            consumer.subscribe([topic])
            while not stop_consumers.is_set():
                batch = consumer.consume(200, 0.2)
                if batch:
                    batch = [m for m in batch if not transient_error(m)]
                    assert all(m.error() is None for m in batch), [m.error() for m in batch]
                    checker.record(name, batch)
                    try:
                        consumer.commit(asynchronous=False)
                    except KafkaException as exc:
                        # A rebalance can fail a commit (or leave nothing stored): the
                        # records are then re-delivered, as with any consumer.
                        commit_errors.append(str(exc))
        except BaseException as exc:
            failures.append(exc)
        finally:
            metrics.append(consumer.metrics)
            consumer.close()

    threads = [threading.Thread(target=consume, args=(f"c{i}",), daemon=True) for i in range(3)]
    producer_thread = threading.Thread(target=produce, daemon=True)
    for thread in threads:
        thread.start()
    producer_thread.start()
    try:
        wait_until(lambda: checker.first > 200 or failures, timeout=30, what="first records")
        controller.expand(topic, 4, timeout=30)
        wait_until(lambda: checker.first > 1200 or failures, timeout=40, what="after expand")
        controller.shrink(topic, 3, timeout=30)
        time.sleep(2.0)
    finally:
        stop_producer.set()
        producer_thread.join(60)
    total = sum(produced.values())
    try:
        wait_until(
            lambda: checker.first >= total or failures or checker.errors,
            timeout=60,
            what=f"all {total} records",
        )
    finally:
        stop_consumers.set()
        for thread in threads:
            thread.join(30)
    assert not failures, failures
    assert checker.errors == []
    assert checker.first == total
    assert checker.next_seq == produced
    # The gates were really in the way: boundaries were announced and gates checked.
    assert sum(m["announcements"] for m in metrics) >= 2
    assert sum(m["gate_checks"] for m in metrics) >= 2
    assert sum(m["violations"] for m in metrics) == 0


# The consumer that gets killed: delivers partition 0 up to the record just below the
# boundary, never commits, prints what it delivered, then waits to be SIGKILLed.
VICTIM = r"""
import json, sys, time
from confluent_kafka import TopicPartition
from ordered.consumer import OrderedConsumer

config, topic, last = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
consumer = OrderedConsumer(config)
consumer.assign([TopicPartition(topic, 0)])
seen = -1
while seen < last:
    for m in consumer.consume(100, 0.2):
        seen = m.offset()
print("HELD", seen, flush=True)
time.sleep(600)
"""


def test_killed_source_consumer_redelivers_tail_before_destination_starts(
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    controller: Controller,
    store: LayoutStore,
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
) -> None:
    """(f) SIGKILL a consumer holding the source's uncommitted tail, just before B."""
    topic = topic_factory(2)
    controller.adopt(topic)
    old, new = Layout(2, 2, 0), Layout(2, 3, 1)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    keys = [f"k{i}" for i in range(200) if old.partition_for(f"k{i}") == 0]
    for key in keys:
        producer.produce(topic, value=b"old", key=key, partition=0)
    assert producer.flush(30) == 0
    controller.expand(topic, 3)
    boundary = store.get_epoch(topic, 1).boundaries[0]
    assert boundary == len(keys)
    moved = [k for k in keys if new.partition_for(k) == 2]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})  # sees partition 2
    for key in moved:
        producer.produce(topic, value=b"new", key=key, partition=2)
    assert producer.flush(30) == 0

    group = group_factory()
    config = consumer_config(bootstrap, zk_hosts, zk_root, group)
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    victim = subprocess.Popen(
        [sys.executable, "-c", VICTIM, json.dumps(config), topic, str(boundary - 1)],
        stdout=subprocess.PIPE,
        text=True,
        env=env,
    )
    destination = OrderedConsumer(config)
    replacement: OrderedConsumer | None = None
    try:
        assert victim.stdout is not None
        line = victim.stdout.readline()
        assert line.split() == ["HELD", str(boundary - 1)]
        kill_process(victim.pid)
        destination.assign([TopicPartition(topic, 2)])
        deadline = time.monotonic() + 2.0
        while time.monotonic() < deadline:
            assert destination.consume(100, 0.2) == []
        assert destination.gate_status()[0].state is GateState.BLOCKED
        probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
        [tp] = probe.committed([TopicPartition(topic, 0)], timeout=10)
        probe.close()
        assert tp.offset < boundary

        replacement = OrderedConsumer(config)
        replacement.assign([TopicPartition(topic, 0)])
        redelivered: list[int] = []
        deadline = time.monotonic() + 20
        while len(redelivered) < boundary and time.monotonic() < deadline:
            redelivered += [m.offset() for m in replacement.consume(100, 0.2)]
            # The destination may not start while the tail is being redelivered.
            assert destination.consume(100, 0.0) == []
        assert redelivered == list(range(boundary))
        replacement.consume(1, 0.1)  # announces the boundary: maybe_revoked, commit
        got: list[Any] = []
        deadline = time.monotonic() + 10
        while len(got) < len(moved) and time.monotonic() < deadline:
            got += destination.consume(100, 0.2)
        assert [m.value() for m in got] == [b"new"] * len(moved)
    finally:
        kill_process(victim.pid)
        destination.close()
        if replacement is not None:
            replacement.close()
