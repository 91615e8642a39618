"""History compaction on the real cluster: a topic through several layout changes with
traffic, a trim past the old boundaries, ``ordered compact`` drops exactly the epochs
the rule allows, and a running consumer that seeks back and a fresh group both read
every record still in Kafka, each key in order.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from fixtures import run_in_background, snapshot
from helpers import read_committing as read
from helpers import wait_until
from kit import Kit

from coordinator.daemon import CoordinatorDaemon
from coordinator.kernel.errors import LayoutError
from coordinator.kernel.history import load_history
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import paths
from coordinator.metrics.daemon_metrics import StateCollector
from coordinator.trims.history_compaction import compact_topic
from coordinator.trims.retention import Sweeper, retired_partitions, retired_status
from coordinator.trims.trim import Trimmer
from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

KEYS = 40
PER_STEP = 400
FETCH = {"max.partition.fetch.bytes": 4096}


class Produce:
    """Keyed ``key:seq`` records from one OrderedProducer, sequence numbers per key."""

    def __init__(self, producer: OrderedProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.seq = [0] * KEYS

    def write(self, count: int) -> None:
        for i in range(count):
            k = i % KEYS
            self.producer.produce(self.topic, key=f"k{k}", value=f"k{k}:{self.seq[k]}".encode())
            self.seq[k] += 1
            if i % 200 == 0:
                self.producer.poll(0)
        assert self.producer.flush(30) == 0


def out_of_order(deliveries: list[Any]) -> list[str]:
    """Every record delivered after a later record of its key."""
    last: dict[bytes, int] = {}
    found = []
    for m in deliveries:
        seq = int(m.value().split(b":")[1])
        if seq < last.get(m.key(), -1):
            found.append(f"{m.key()!r} seq {seq} (partition {m.partition()}) after {last[m.key()]}")
        last[m.key()] = max(last.get(m.key(), -1), seq)
    return found


def held_epochs(state: StateCollector, topic: str) -> float | None:
    """The ``ordered_coordinator_topic_history_epochs`` gauge of ``topic`` now."""
    for family in state.collect():
        for sample in family.samples:
            if sample.name == "ordered_coordinator_topic_history_epochs" and sample.labels == {
                "topic": topic
            }:
                return sample.value
    return None


def in_kafka(admin: KafkaAdmin, topic: str, count: int) -> set[tuple[int, int]]:
    """Every (partition, offset) still in Kafka."""
    starts = admin.start_offsets(topic, range(count))
    ends = admin.end_offsets(topic, range(count))
    return {(p, o) for p in range(count) for o in range(starts[p], ends[p])}


def test_compaction_after_a_trim_keeps_every_key_in_order(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    produce = Produce(kit.make_producer(), topic)
    produce.write(PER_STEP)
    # Epochs 1..4: 2 -> 3 -> 4 -> 3 (partition 3 retired) -> 4 (active again).
    active = 2
    for to in (3, 4, 3, 4):
        if to > active:
            kit.controller.expand(topic, to, timeout=30)
        else:
            kit.controller.shrink(topic, to, timeout=30)
        active = to
        produce.write(PER_STEP)
    admin = KafkaAdmin(kit.bootstrap)
    numbers = lambda: [e.epoch for e in kit.store.epochs(topic)]  # noqa: E731

    # Before any trim every log starts at 0: epoch 1's giving boundary holds the rest.
    early = compact_topic(kit.store, admin, topic)
    assert early.dropped == () and early.plan.drop == ()
    assert early.plan.held_by is not None and early.plan.held_by[0] == 1
    assert numbers() == [0, 1, 2, 3, 4]

    # A running consumer reads everything before the trim and the compaction.
    running = kit.make_consumer(kit.group_factory(), **FETCH)
    running.subscribe([topic])
    first = read(running, len(in_kafka(admin, topic, 4)))
    assert out_of_order(first) == []

    # Trim every partition to its boundaries of epochs 1 and 2 (not those of epoch 3).
    epochs = {e.epoch: e for e in kit.store.epochs(topic)}
    targets: dict[int, int] = {}
    for n in (1, 2):
        for p, o in epochs[n].boundaries.items():
            targets[p] = max(targets.get(p, 0), o)
    assert any(targets.get(p, 0) < o for p, o in epochs[3].boundaries.items())
    report = Trimmer(admin).trim({(topic, p): o for p, o in targets.items()}, timeout=30)
    assert report.ok, report.summary()

    dry = kit.ordered_cli("compact", topic, "--dry-run", "--json")
    assert dry.returncode == 0, dry.stderr
    planned = json.loads(dry.stdout)
    assert (planned["droppable"], planned["dropped"], planned["base"]) == ([0, 1], [], 2)
    assert numbers() == [0, 1, 2, 3, 4]

    done = kit.ordered_cli("compact", topic, "--json")
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert (result["dropped"], result["epochs_after"]) == ([0, 1], [2, 3, 4])
    assert numbers() == [2, 3, 4]
    again = kit.ordered_cli("compact", topic, "--json")
    assert json.loads(again.stdout)["dropped"] == []
    described = kit.ordered_cli("describe", topic, "--json")
    assert described.returncode == 0, described.stderr
    assert [e["epoch"] for e in json.loads(described.stdout)["epochs"]] == [2, 3, 4]
    assert "epochs before 2: compacted" in kit.ordered_cli("describe", topic).stdout

    # A change after the compaction: every reader reloads the shorter history.
    kit.controller.expand(topic, 5, timeout=30)
    produce.write(PER_STEP)
    read(running, PER_STEP)
    everything = in_kafka(admin, topic, 5)
    starts = admin.start_offsets(topic, range(5))

    # The running consumer seeks back to the log starts and reads it all again.
    for p in range(5):
        running.seek(TopicPartition(topic, p, starts[p]))
    replay = read(running, len(everything))
    assert out_of_order(replay) == []
    assert {(m.partition(), m.offset()) for m in replay} == everything

    # A group created now reads from the log starts.
    group = kit.group_factory()
    fresh = kit.make_consumer(group, **FETCH)
    fresh.subscribe([topic])
    later = read(fresh, len(everything))
    assert out_of_order(later) == []
    assert {(m.partition(), m.offset()) for m in later} == everything
    # Where the group waits, decided on the shorter history: nowhere, it read it all.
    waits = kit.ordered_cli("describe", topic, "--group", group, "--json")
    assert waits.returncode == 0, waits.stderr
    shown = json.dumps(json.loads(waits.stdout))
    assert '"state": "open"' in shown and '"closed"' not in shown, shown


def test_drop_epochs_validates_first_and_resumes_after_a_crash(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    kit.controller.expand(topic, 3, timeout=30)
    kit.controller.expand(topic, 4, timeout=30)
    e0, e1, e2 = kit.store.epochs(topic)
    before = snapshot(kit.store.client, kit.store.root)
    refusals = [
        ([e1], "leave a hole"),
        ([e0, e1, e2], "not older than its current epoch"),
        ([replace(e0, created_at=e0.created_at + 1)], "changed since it was read"),
        ([e1, e0], "ascending"),
    ]
    for epochs, message in refusals:
        with pytest.raises(LayoutError, match=message):
            kit.store.drop_epochs(topic, epochs)
        assert snapshot(kit.store.client, kit.store.root) == before, message
    held = load_history(kit.store, topic)
    # A crash after the first epoch's transaction: the history starts later, no hole.
    assert kit.store.drop_epochs(topic, [e0]) == [0]
    assert [e.epoch for e in load_history(kit.store, topic).epochs] == [1, 2]
    # The retry finishes the rest (epoch 0 is already gone).
    assert kit.store.drop_epochs(topic, [e0, e1]) == [1]
    assert kit.store.drop_epochs(topic, [e0, e1]) == []
    for n in (0, 1):
        assert kit.store.client.exists(paths.epoch_path(kit.store.root, topic, n)) is None
    # Readers take the shorter history, with and without an earlier copy.
    for history in (load_history(kit.store, topic), load_history(kit.store, topic, previous=held)):
        assert [e.epoch for e in history.epochs] == [2]
        assert history.layout is not None and history.layout.active == 4
    kit.controller.expand(topic, 5, timeout=30)
    assert [e.epoch for e in load_history(kit.store, topic, previous=held).epochs] == [2, 3]


def test_retired_partitions_outlive_their_shrink_epoch(kit: Kit) -> None:
    # No records: every boundary is 0, every epoch is passed; 3 and 2 stay retired.
    topic = kit.adopted_topic(2)
    kit.controller.expand(topic, 4, timeout=30)
    kit.controller.shrink(topic, 3, timeout=30)  # epoch 2 retires 3
    kit.controller.shrink(topic, 2, timeout=30)  # epoch 3 retires 2
    admin = KafkaAdmin(kit.bootstrap)
    report = compact_topic(kit.store, admin, topic)
    assert (report.dropped, report.recorded) == ((0, 1, 2), (3,))
    kept = kit.store.retired(topic)[3]
    assert (kept.epoch, kept.final_offset, kept.state) == (2, 0, "trimmed")
    record = kit.store.get_topic(topic)
    assert record is not None
    retired = retired_partitions(record, kit.store.epochs(topic), 4, kit.store.retired(topic))
    assert {p: r.epoch for p, r in retired.items()} == {2: 3, 3: 2}
    shown = {r.partition: (r.state, r.epoch) for r in retired_status(kit.store, admin, topic)}
    assert shown == {2: ("trimmed", 3), 3: ("trimmed", 2)}
    # The drain monitor keeps the record while the partition stays retired...
    Sweeper(kit.store, admin).sweep_topic(topic)
    assert set(kit.store.retired(topic)) == {2, 3}
    # ...and drops both once an expansion takes them back.
    kit.controller.expand(topic, 4, timeout=30)
    Sweeper(kit.store, admin).sweep_topic(topic)
    assert kit.store.retired(topic) == {}


def test_the_daemon_compacts_after_its_sweep(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    produce = Produce(kit.make_producer(), topic)
    produce.write(80)
    for to in (3, 4):
        kit.controller.expand(topic, to, timeout=30)
        produce.write(80)
    admin = KafkaAdmin(kit.bootstrap)
    epoch1 = kit.store.get_epoch(topic, 1)
    trimmed = Trimmer(admin).trim({(topic, p): o for p, o in epoch1.boundaries.items()}, 30)
    assert trimmed.ok, trimmed.summary()
    state = StateCollector(kit.store, admin, lambda: False)
    assert held_epochs(state, topic) == 3
    lines: list[str] = []
    daemon = CoordinatorDaemon(
        kit.store.client,
        admin,
        root=kit.store.root,
        progress=lines.append,
        relay_interval=0,
        sweep_interval=0.3,
        autoscale_interval=0,
    )
    running = run_in_background(daemon.run)
    try:
        wait_until(
            lambda: [e.epoch for e in kit.store.epochs(topic)] == [1, 2],
            timeout=30,
            interval=0.2,
            what="the daemon's compaction",
        )
    finally:
        daemon.stop()
        running.join(30)
    assert any(f"history compaction: {topic}" in line for line in lines), lines
    assert held_epochs(state, topic) == 2


def test_compact_refuses_a_topic_not_adopted(
    topic_factory: Callable[..., str], ordered_cli: Callable[..., Any]
) -> None:
    topic = topic_factory(2)
    for args in ((), ("--json",)):
        refused = ordered_cli("compact", topic, *args)
        assert refused.returncode == 1, (refused.stdout, refused.stderr)
        assert f"topic {topic} is not adopted" in refused.stderr
        assert "Traceback" not in refused.stderr
    missing = ordered_cli("compact", "no-such-topic-" + topic, "--dry-run")
    assert missing.returncode == 1 and "Traceback" not in missing.stderr, missing.stderr
