"""The hook protocol against the real cluster: one event of the right kind per happening.

A recording hook (every ``on_...`` method of :mod:`coordinator.kernel.hooks`) is given to the
consumer and producer (``ordered.hooks``), to the controller and to the sweeper
(``hooks=``); a blocked gate, an expansion, a violation and a trim each produce exactly
one event of their kind.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition
from helpers import drain, keys_for, moving_keys, wait_held, wait_until
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.hooks import CONSUMER_HOOKS, COORDINATOR_HOOKS, PRODUCER_HOOKS, check_hooks
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import RetentionRecord
from coordinator.trims.retention import Sweeper
from linear_hash import Layout

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

EVENT_NAMES = sorted(
    name
    for kind in CONSUMER_HOOKS + PRODUCER_HOOKS + COORDINATOR_HOOKS
    for name in vars(kind)
    if name.startswith("on_")
)


class Recorder:
    """Records every event with its arguments (all hook protocols, set up below)."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self._lock = threading.Lock()

    def of(self, name: str) -> list[tuple[Any, ...]]:
        """The arguments of every ``name`` event so far."""
        with self._lock:
            return [e[1:] for e in self.events if e[0] == name]


def _method(name: str) -> Callable[..., None]:
    def record(self: Recorder, *args: Any) -> None:
        with self._lock:
            self.events.append((name, *args))

    return record


for _name in EVENT_NAMES:
    setattr(Recorder, _name, _method(_name))


def test_every_event_method_is_recorded() -> None:
    assert len(EVENT_NAMES) == len(CONSUMER_HOOKS + PRODUCER_HOOKS + COORDINATOR_HOOKS)
    recorder = Recorder()
    assert check_hooks("ordered.hooks", [recorder]) == (recorder,)
    assert all(isinstance(recorder, kind) for kind in CONSUMER_HOOKS + PRODUCER_HOOKS)


def test_expansion_and_blocked_gate_each_report_one_event(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    coordinator, producing = Recorder(), Recorder()
    controller = Controller(kit.store, KafkaAdmin(kit.bootstrap, timeout=10.0), hooks=[coordinator])
    controller.adopt(topic)
    producer = kit.make_producer(**{"ordered.hooks": [producing]})
    moving = moving_keys(5)
    filler = keys_for(Layout(2, 2, 0), 0, 10, "x")
    for key in filler + moving:
        producer.produce(topic, b"old", key)
    assert producer.flush(30) == 0

    # The expansion: the idle producer acks at once, the controller seals.
    controller.expand(topic, 3, timeout=30)
    assert coordinator.of("on_epoch_published") == [(topic, 1, 2, 3)]
    [(t, epoch, barrier_s)] = coordinator.of("on_barrier_passed")
    assert (t, epoch) == (topic, 1) and 0 <= barrier_s < 30
    [(t, epoch, sealed_s)] = coordinator.of("on_epoch_sealed")
    assert (t, epoch) == (topic, 1) and barrier_s <= sealed_s < 30
    wait_until(lambda: producing.of("on_barrier_ack"), timeout=10, what="the producer's ack")
    assert producing.of("on_route_switch") == [(topic, 0, 1)]
    [(t, epoch, latency)] = producing.of("on_barrier_ack")
    assert (t, epoch) == (topic, 1) and 0 <= latency < 30
    for key in moving:
        producer.produce(topic, b"new", key)
    assert producer.flush(30) == 0
    boundary = kit.store.get_epoch(topic, 1).boundaries[0]
    assert boundary == len(filler) + len(moving)

    # The blocked gate: partition 2 waits for 0's tail to be committed by the group.
    group = kit.group_factory()
    waiting, reading = Recorder(), Recorder()
    destination = kit.make_consumer(group, **{"ordered.hooks": [waiting]})
    destination.assign([TopicPartition(topic, 2)])
    wait_held(destination, what="the destination's gate to close")
    blocked_at = time.monotonic()
    drain(destination, 0.5)  # re-checks of the held gate are no new blocks
    assert waiting.of("on_gate_blocked") == [(group, topic, 2, 0)]
    assert waiting.of("on_gate_opened") == []
    assert (group, topic, 1) in waiting.of("on_layout_reload")
    assert len(waiting.of("on_gate_check")) >= 2

    # A held partition that is unassigned stops waiting without its gate opening.
    leaving = Recorder()
    other = kit.make_consumer(group, **{"ordered.hooks": [leaving]})
    other.assign([TopicPartition(topic, 2)])
    wait_held(other, what="the other consumer's gate to close")
    other.unassign()
    [(g, t, p, held_s)] = leaving.of("on_gate_dropped")
    assert (g, t, p) == (group, topic, 2) and held_s > 0
    assert leaving.of("on_gate_opened") == []
    assert other.metrics["blocked_partitions"] == 0

    source = kit.make_consumer(group, **{"ordered.hooks": [reading]})
    source.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    assert len(drain(source, 20.0, until=boundary)) == boundary
    source.consume(10, 0.1)  # announces: maybe_revoked, then the boundary commit
    assert reading.of("on_announcement") == [(group, topic, 0, boundary)]
    opened = drain(destination, 10.0, until=len(moving))
    assert [m.value() for m in opened] == [b"new"] * len(moving)
    [(g, t, p, wait_s)] = waiting.of("on_gate_opened")
    assert (g, t, p) == (group, topic, 2)
    assert 0.5 <= wait_s <= time.monotonic() - blocked_at + 0.5
    assert waiting.of("on_gate_blocked") == [(group, topic, 2, 0)]
    assert waiting.of("on_gate_dropped") == []
    delivered = sum(count for _g, count in waiting.of("on_records_delivered"))
    assert delivered == len(moving) == destination.metrics["delivered"]
    assert destination.metrics["blocks"] == destination.metrics["gates_opened"] == 1
    assert destination.metrics["layout_reloads"] == len(waiting.of("on_layout_reload")) > 0
    assert reading.of("on_violation") == waiting.of("on_violation") == []


def test_a_violation_reports_one_event(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    layout = Layout(2, 2, 0)
    [wrong] = keys_for(layout, 1, 1)
    plain = Producer({"bootstrap.servers": kit.bootstrap})
    for key in (keys_for(layout, 0, 1)[0], wrong, keys_for(layout, 0, 2)[1]):
        plain.produce(topic, value=b"v", key=key, partition=0)
    assert plain.flush(30) == 0

    recorder = Recorder()
    group = kit.group_factory()
    consumer = kit.make_consumer(group, **{"ordered.hooks": [recorder], "ordered.audit.every": 1})
    consumer.assign([TopicPartition(topic, 0, 0)])
    assert len(drain(consumer, 10.0, until=3)) == 3
    [(g, t, partition, offset, problem)] = recorder.of("on_violation")
    assert (g, t, partition, offset) == (group, topic, 0, 1)
    assert "routes elsewhere" in problem
    assert consumer.violations == consumer.metrics["violations"] == 1
    with pytest.raises(AttributeError):
        consumer.violations = 0  # type: ignore[misc]
    assert recorder.of("on_gate_blocked") == []


def test_a_raising_hook_is_logged_once_and_changes_nothing(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    topic = kit.adopted_topic(1)
    plain = Producer({"bootstrap.servers": kit.bootstrap})
    for i in range(5):
        plain.produce(topic, value=b"v", key=f"k{i}", partition=0)
    assert plain.flush(30) == 0

    class Broken:
        calls = 0

        def on_records_delivered(self, group: str, count: int) -> None:
            Broken.calls += 1
            raise RuntimeError("metrics backend down")

    consumer = kit.make_consumer(kit.group_factory(), **{"ordered.hooks": [Broken()]})
    consumer.assign([TopicPartition(topic, 0, 0)])
    assert len(drain(consumer, 10.0, until=5)) == 5
    assert Broken.calls >= 1
    assert consumer.metrics["delivered"] == 5
    logged = [
        r for r in caplog.records if r.exc_info and "metrics backend down" in str(r.exc_info[1])
    ]
    assert len(logged) == 1


def test_each_sweep_trim_reports_one_event(kit: Kit) -> None:
    topic = kit.adopted_topic(1)
    kit.controller.expand(topic, 2, timeout=30)
    plain = Producer({"bootstrap.servers": kit.bootstrap})
    for partition in (0, 1):
        for i in range(4):
            plain.produce(topic, value=b"v", key=f"k{i}", partition=partition)
    assert plain.flush(30) == 0
    kit.controller.shrink(topic, 1, timeout=30)  # retires partition 1 at its end: 4
    assert kit.store.get_epoch(topic, 2).boundaries[1] == 4
    group = kit.group_factory()
    committer = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group})
    committer.commit(
        offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 4)], asynchronous=False
    )
    committer.close()
    kit.store.set_retention(RetentionRecord(topic=topic, consumed_ms=1, updated_at=time.time()))
    time.sleep(0.05)  # every record is older than the 1 ms retention

    recorder = Recorder()
    admin = KafkaAdmin(kit.bootstrap, timeout=10.0)
    trims = Sweeper(kit.store, admin, hooks=[recorder]).sweep_topic(topic)
    assert sorted((t.partition, t.requested) for t in trims) == [(0, 2), (1, 4)]
    assert sorted(recorder.of("on_trim")) == [
        (topic, 0, 2, "retention", True),
        (topic, 1, 4, "drained", True),
    ]
