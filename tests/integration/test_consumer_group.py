"""OrderedConsumer groups against the real servers: members coming and going through
expansions and a shrink with three live OrderedProducers, and a consumer SIGKILLed just
before a boundary.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from fixtures import consumer_config
from helpers import consume_until, kill_process, transient_error, wait_until
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore
from linear_hash import Layout
from ordered.consumer import GateState, OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener
from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]


class Checker:
    """First deliveries across the whole group, checked per (producer, key) as they happen."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.next_seq: dict[str, int] = {}
        self.errors: list[str] = []
        self.first = 0
        self.repeats = 0

    def record(self, who: str, messages: list[Any]) -> None:
        with self.lock:
            for m in messages:
                producer, key, seq_text = m.value().decode().split(":")
                stream = f"{producer}:{key}"
                seq = int(seq_text)
                due = self.next_seq.get(stream, 0)
                if seq < due:
                    self.repeats += 1
                elif seq == due:
                    self.next_seq[stream] = seq + 1
                    self.first += 1
                else:
                    self.errors.append(
                        f"{who}: {stream} seq {seq} before {due} ({m.partition()}@{m.offset()})"
                    )

    def settle(
        self,
        produced: dict[str, int],
        failures: list[BaseException],
        members: Mapping[str, object],
        leave: Callable[[str], None],
    ) -> None:
        """Wait for the first delivery of every produced record, let every member leave,
        then check: no failure, 0 out of order, 0 lost, every stream complete."""
        assert not failures, failures
        total = sum(produced.values())
        try:
            wait_until(
                lambda: self.first >= total or bool(failures) or bool(self.errors),
                timeout=60,
                what=f"all {total} records",
            )
        finally:
            for name in list(members):
                leave(name)
        assert not failures, failures
        assert self.errors == []  # 0 out of order
        assert self.first == total  # 0 lost
        assert self.next_seq == produced


class GroupCallbacks(PartitionKeyRebalanceListener):
    """The KIP-253 callbacks of every member, in the order they ran across the group."""

    def __init__(self, events: list[tuple[str, str, int, int]], lock: threading.Lock) -> None:
        self.member = ""
        self._events = events
        self._lock = lock

    def on_partition_key_maybe_revoked(self, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._events += [
                ("maybe_revoked", self.member, tp.partition, tp.offset) for tp in partitions
            ]

    def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> None:
        with self._lock:
            self._events += [
                ("assigned", self.member, tp.partition, tp.offset) for tp in partitions
            ]


def test_group_through_expansions_and_shrinks_keeps_every_key_in_order(kit: Kit) -> None:
    """(c) Three producers, a group of three whose members come and go, 2 -> 4 -> 6 -> 3.

    Every (producer, key) stream is delivered in order and completely across the group,
    and wherever a member announced a source's tail, that ``maybe_revoked`` ran before
    the ``assigned`` of the destination the keys moved to.
    """
    group = kit.group_factory()
    group_through_layout_changes(
        kit.topic_factory(2),
        kit.controller,
        kit.store,
        {
            "bootstrap.servers": kit.bootstrap,
            "ordered.zookeeper.connect": kit.zk_hosts,
            "ordered.zookeeper.root": kit.zk_root,
        },
        consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group),
    )


def group_through_layout_changes(
    topic: str,
    controller: Controller,
    store: LayoutStore,
    client_config: dict[str, Any],
    consumer_settings: dict[str, Any],
) -> None:
    """The body of the test above, on any cluster (the secure one too).

    Args:
        topic: A fresh two-partition topic.
        controller: A controller allowed to adopt, expand and shrink it.
        store: A store that reads the topic's epochs.
        client_config: The producers' configuration (servers, credentials).
        consumer_settings: The consumers' configuration (group included).
    """
    controller.adopt(topic)
    checker = Checker()
    stop_producers = threading.Event()
    produced: dict[str, int] = {}
    produced_lock = threading.Lock()
    failures: list[BaseException] = []
    metrics: list[dict[str, int]] = []
    commit_errors: list[str] = []
    events: list[tuple[str, str, int, int]] = []
    events_lock = threading.Lock()

    def produce(name: str) -> None:
        try:
            producer = OrderedProducer({**client_config, "linger.ms": 5})
            sequences: dict[str, int] = {}
            i = 0
            while not stop_producers.is_set():
                key = f"key{i % 24}"
                seq = sequences.get(key, 0)
                producer.produce(topic, value=f"{name}:{key}:{seq}".encode(), key=key)
                sequences[key] = seq + 1
                i += 1
                producer.poll(0)
                time.sleep(0.005)
            assert producer.flush(30) == 0
            producer.close()
            with produced_lock:
                produced.update({f"{name}:{k}": n for k, n in sequences.items()})
        except BaseException as exc:
            failures.append(exc)

    def consume(name: str, stop: threading.Event) -> None:
        listener = GroupCallbacks(events, events_lock)
        listener.member = name
        consumer = OrderedConsumer(dict(consumer_settings))
        try:
            consumer.subscribe([topic], key_listener=listener)
            while not stop.is_set():
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
            consumer.close()  # leaves the group: the others rebalance

    members: dict[str, tuple[threading.Thread, threading.Event]] = {}

    def join(name: str) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=consume, args=(name, stop), daemon=True)
        members[name] = (thread, stop)
        thread.start()

    def leave(name: str) -> None:
        thread, stop = members[name]
        stop.set()
        thread.join(30)

    def progress(at_least: int, what: str) -> None:
        wait_until(lambda: checker.first > at_least or failures, timeout=40, what=what)

    for name in ("c0", "c1", "c2"):
        join(name)
    producers = [threading.Thread(target=produce, args=(f"p{i}",), daemon=True) for i in range(3)]
    for thread in producers:
        thread.start()
    try:
        progress(300, "first records")
        controller.expand(topic, 4, timeout=30)
        progress(checker.first + 600, "records after 2 -> 4")
        leave("c1")  # a member leaves ...
        join("c3")  # ... and another joins, while the gates of epoch 1 may still hold
        controller.expand(topic, 6, timeout=30)
        progress(checker.first + 600, "records after 4 -> 6")
        join("c4")
        controller.shrink(topic, 3, timeout=30)
        progress(checker.first + 600, "records after 6 -> 3")
        leave("c0")
        time.sleep(1.0)
    finally:
        stop_producers.set()
        for thread in producers:
            thread.join(60)
    checker.settle(produced, failures, members, leave)
    # The gates were really in the way: boundaries were announced and gates checked.
    assert sum(m["announcements"] for m in metrics) >= 2
    assert sum(m["gate_checks"] for m in metrics) >= 2
    assert sum(m["violations"] for m in metrics) == 0
    # KIP order across the group: a source's maybe_revoked at (or past: it reports the
    # position) B_a(e) before the assigned of a destination that took keys from it at e.
    pairs = 0
    for epoch in store.epochs(topic):
        if epoch.state != "sealed":
            continue
        for a, b in epoch.edges:
            revoked = next(
                (
                    i
                    for i, (kind, _m, partition, offset) in enumerate(events)
                    if kind == "maybe_revoked" and partition == a and offset >= epoch.boundaries[a]
                ),
                None,
            )
            assigned = next(
                (
                    i
                    for i, (kind, _m, partition, offset) in enumerate(events)
                    if kind == "assigned" and partition == b and offset == epoch.boundaries[b]
                ),
                None,
            )
            if revoked is not None and assigned is not None:
                pairs += 1
                assert revoked < assigned, (a, b, epoch.epoch, events)
    assert pairs >= 2, events


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


def test_killed_source_consumer_redelivers_tail_before_destination_starts(kit: Kit) -> None:
    """(f) SIGKILL a consumer holding the source's uncommitted tail, just before B."""
    topic = kit.adopted_topic(2)
    old, new = Layout(2, 2, 0), Layout(2, 3, 1)
    producer = Producer({"bootstrap.servers": kit.bootstrap, "linger.ms": 2})
    keys = [f"k{i}" for i in range(200) if old.partition_for(f"k{i}") == 0]
    for key in keys:
        producer.produce(topic, value=b"old", key=key, partition=0)
    assert producer.flush(30) == 0
    kit.controller.expand(topic, 3)
    boundary = kit.store.get_epoch(topic, 1).boundaries[0]
    assert boundary == len(keys)
    moved = [k for k in keys if new.partition_for(k) == 2]
    producer = Producer({"bootstrap.servers": kit.bootstrap, "linger.ms": 2})  # sees partition 2
    for key in moved:
        producer.produce(topic, value=b"new", key=key, partition=2)
    assert producer.flush(30) == 0

    group = kit.group_factory()
    config = consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group)
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
        probe = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group})
        [tp] = probe.committed([TopicPartition(topic, 0)], timeout=10)
        probe.close()
        assert tp.offset < boundary

        replacement = OrderedConsumer(config)
        replacement.assign([TopicPartition(topic, 0)])
        redelivered: list[int] = []

        def tail_redelivered() -> bool:
            redelivered.extend(m.offset() for m in replacement.consume(100, 0.2))
            # The destination may not start while the tail is being redelivered.
            assert destination.consume(100, 0.0) == []
            return len(redelivered) >= boundary

        wait_until(tail_redelivered, 20, what=lambda: f"the tail {redelivered}", interval=0)
        assert redelivered == list(range(boundary))
        replacement.consume(1, 0.1)  # announces the boundary: maybe_revoked, commit
        got = consume_until(destination, len(moved), 10, what="moved records")
        assert [m.value() for m in got] == [b"new"] * len(moved)
    finally:
        kill_process(victim.pid)
        destination.close()
        if replacement is not None:
            replacement.close()
