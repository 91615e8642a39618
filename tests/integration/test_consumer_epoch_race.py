"""The new-epoch race, forced: a consumer whose watch lags sees records of an epoch it
does not know yet. Producers send no epoch header. The fetch check (one ZooKeeper sync
and read per batch) must keep every key in order across an expansion and a shrink;
with it switched off (a test-only switch) the same scenario delivers keys out of order,
which shows the scenario can fail.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from fixtures import expire_session
from helpers import consume_until, drain
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.store import CONSUMER_BARRIER, LayoutStore
from linear_hash import Layout
from ordered.cli.features import set_feature
from ordered.consumer import OrderedConsumer
from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def moving_keys(count: int) -> list[str]:
    """Keys of partition 0 that move to partition 2 when 2 partitions become 3."""
    before, after = Layout(2, 2, 0), Layout(2, 3, 1)
    keys = (f"k{i}" for i in range(10_000))
    return [k for k in keys if before.partition_for(k) == 0 and after.partition_for(k) == 2][:count]


class Run:
    """One consumer with a watch that never reports, and what it delivered."""

    def __init__(self, consumer: OrderedConsumer, topic: str) -> None:
        self.consumer = consumer
        self.topic = topic
        self.seen: list[tuple[str, int, int]] = []  # key, sequence number, partition
        # The watch on the topic record reports nothing: only the fetch check can
        # tell this consumer that a new epoch exists.
        consumer._layouts.watcher.take_dirty = lambda: set()  # type: ignore[method-assign]

    def consume_for(self, seconds: float) -> None:
        """Keep whatever arrives within ``seconds`` (nothing, at a held gate)."""
        self._keep(drain(self.consumer, seconds))

    def consume_until(self, count: int, timeout: float = 20.0) -> None:
        """Keep records until ``count`` in all were delivered; fail after ``timeout``."""
        if len(self.seen) < count:
            self._keep(consume_until(self.consumer, count - len(self.seen), timeout, wait=0.1))

    def _keep(self, messages: list[Any]) -> None:
        self.seen.extend((m.key().decode(), int(m.value()), m.partition()) for m in messages)

    def tp(self, partition: int) -> TopicPartition:
        return TopicPartition(self.topic, partition)

    def out_of_order(self) -> list[str]:
        """Every delivery of a key that came after a later record of the same key."""
        last: dict[str, int] = {}
        found = []
        for key, seq, partition in self.seen:
            if seq < last.get(key, -1):
                found.append(f"{key}: {seq} (partition {partition}) after {last[key]}")
            last[key] = max(last.get(key, -1), seq)
        return found


@pytest.fixture
def scenario(
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    controller: Controller,
    make_producer: Callable[..., OrderedProducer],
    make_consumer: Callable[..., OrderedConsumer],
    store: LayoutStore,
) -> Iterator[Callable[[bool], Run]]:
    # The fetch check alone keeps order here: the consumer barrier, which a new root's
    # first adoption turns on, is kept off (test_consumer_barrier.py runs this race with it).
    set_feature(store, CONSUMER_BARRIER, False)

    def run(fetch_check: bool) -> Run:
        topic = topic_factory(2)
        controller.adopt(topic)
        producer = make_producer(**{"ordered.epoch.header": False})
        consumer = make_consumer(group_factory())
        consumer._layouts.verify_fetch = fetch_check
        keys = moving_keys(5)
        seq = iter(range(1000))

        def write(count: int) -> int:
            for _ in range(count):
                n = next(seq)
                producer.produce(topic, key=keys[n % len(keys)], value=str(n).encode())
            assert producer.flush(30) == 0
            return count

        sent = write(10)  # epoch 0: all in partition 0
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        state = Run(consumer, topic)

        # Expansion 2 -> 3: keys move 0 -> 2. The source's tail is held back by an
        # application pause, so the destination must wait for it.
        consumer.pause([state.tp(0)])
        controller.expand(topic, 3)
        sent += write(10)  # epoch 1: all in partition 2
        consumer.incremental_assign([TopicPartition(topic, 2, 0)])
        state.consume_for(3.0)
        consumer.resume([state.tp(0)])
        state.consume_until(sent)

        # Shrink 3 -> 2: keys move 2 -> 0; now partition 2's tail is held back.
        sent += write(10)  # still epoch 1: partition 2
        consumer.pause([state.tp(2)])
        controller.shrink(topic, 2)
        sent += write(10)  # epoch 2: partition 0
        state.consume_for(3.0)
        consumer.resume([state.tp(2)])
        state.consume_until(sent)
        assert len(state.seen) == sent, f"{len(state.seen)} of {sent} delivered"
        return state

    yield run  # make_producer and make_consumer close what they made


def test_lagging_watch_keeps_order_across_expand_and_shrink(
    scenario: Callable[[bool], Run],
) -> None:
    run = scenario(True)
    assert run.out_of_order() == []
    assert run.consumer.metrics["layout_checks"] > 0


@pytest.mark.serial  # the broken consumer's race shows in timed drains: it runs alone
def test_without_the_fetch_check_the_same_scenario_breaks_order(
    scenario: Callable[[bool], Run],
) -> None:
    run = scenario(False)
    broken = run.out_of_order()
    # Both transitions deliver the new epoch's records ahead of the old tail: the
    # expansion's tail is in partition 0, the shrink's in partition 2.
    assert any("(partition 0)" in b for b in broken), broken
    assert any("(partition 2)" in b for b in broken), broken


def test_an_expired_session_in_the_middle_holds_then_recovers_in_order(kit: Kit) -> None:
    """The consumer's session expires around an expansion: it reads every history again
    and keeps each key in order (its watch reports nothing, as above)."""
    topic = kit.adopted_topic(2)
    keys = moving_keys(5)
    producer = kit.make_producer(**{"ordered.epoch.header": False, "linger.ms": 5})
    consumer = kit.make_consumer(kit.group_factory())
    try:
        for n in range(10):
            producer.produce(topic, key=keys[n % 5], value=str(n).encode())
        assert producer.flush(30) == 0
        consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
        run = Run(consumer, topic)
        consumer.pause([run.tp(0)])
        expire_session(consumer._zk, kit.zk_hosts)
        kit.controller.expand(topic, 3)
        for n in range(10, 20):
            producer.produce(topic, key=keys[n % 5], value=str(n).encode())
        assert producer.flush(30) == 0
        consumer.incremental_assign([TopicPartition(topic, 2, 0)])
        run.consume_for(3.0)
        assert all(partition != 2 for _k, _s, partition in run.seen)  # held at the gate
        consumer.resume([run.tp(0)])
        run.consume_until(20)
        assert len(run.seen) == 20
        assert run.out_of_order() == []
    finally:
        consumer.close()
        producer.close()
