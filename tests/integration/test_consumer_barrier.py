"""The consumer barrier (docs/consumer-barrier.md) against the real servers.

The race of ``test_consumer_epoch_race.py`` again, with the barrier in force and the
consumer's topic watch reporting nothing: the announcement alone must make it check its
fetches until it read the published epoch. Then registration, acks, the controller's
wait (ack, session gone, eviction after the bound), the fallback to checks when the
flag is off or the consumer was evicted, and rewinds acked by the group's members.
"""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from confluent_kafka import TopicPartition
from helpers import consume_until, drain, moving_keys, wait_until
from kit import Kit

from coordinator.kernel.store import CONSUMER_BARRIER, FIRST_ADOPTION, BarrierRegistration
from coordinator.kernel.store import paths as store_paths
from ordered.cli.features import set_feature
from ordered.consumer import OrderedConsumer
from ordered.consumer.barrier import BarrierState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _out_of_order(seen: list[tuple[str, int, int]]) -> list[str]:
    last: dict[str, int] = {}
    found = []
    for key, seq, partition in seen:
        if seq < last.get(key, -1):
            found.append(f"{key}: {seq} (partition {partition}) after {last[key]}")
        last[key] = max(last.get(key, -1), seq)
    return found


def _deaf(consumer: OrderedConsumer) -> None:
    """The consumer's topic watches never fire: only checks (or the barrier) tell it."""
    consumer._layouts.watcher._arm = lambda topic: None  # type: ignore[method-assign]


def _in_force(consumer: OrderedConsumer) -> bool:
    consumer.consume(10, 0.05)
    return consumer._layouts.barrier.state is BarrierState.IN_FORCE


def _race(kit: Kit, consumer: OrderedConsumer) -> list[tuple[str, int, int]]:
    """Expand 2 -> 3 then shrink 3 -> 2 with the source's tail held back each time."""
    topic = kit.adopted_topic(2)
    producer = kit.make_producer(**{"ordered.epoch.header": False})
    keys = moving_keys(5)
    seq = iter(range(1000))
    seen: list[tuple[str, int, int]] = []

    def write(count: int) -> int:
        for _ in range(count):
            n = next(seq)
            producer.produce(topic, key=keys[n % len(keys)], value=str(n).encode())
        assert producer.flush(30) == 0
        return count

    def keep(messages: list[Any]) -> None:
        seen.extend((m.key().decode(), int(m.value()), m.partition()) for m in messages)

    def until(count: int) -> None:
        if len(seen) < count:
            keep(consume_until(consumer, count - len(seen), 20.0, wait=0.1))

    sent = write(10)
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    until(sent)
    tp0, tp2 = TopicPartition(topic, 0), TopicPartition(topic, 2)
    consumer.pause([tp0])
    kit.controller.expand(topic, 3)
    sent += write(10)
    consumer.incremental_assign([TopicPartition(topic, 2, 0)])
    keep(drain(consumer, 3.0))
    consumer.resume([tp0])
    until(sent)
    sent += write(10)
    consumer.pause([tp2])
    kit.controller.shrink(topic, 2)
    sent += write(10)
    keep(drain(consumer, 3.0))
    consumer.resume([tp2])
    until(sent)
    assert len(seen) == sent, f"{len(seen)} of {sent} delivered"
    return seen


def test_with_the_barrier_a_deaf_consumer_keeps_order(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, True)
    consumer = kit.make_consumer(kit.group_factory())
    _deaf(consumer)
    seen = _race(kit, consumer)
    assert _out_of_order(seen) == []
    layouts = consumer._layouts
    assert layouts.barrier.state is BarrierState.IN_FORCE


def test_without_the_barrier_in_force_every_fetch_is_checked(kit: Kit) -> None:
    """Flag off: the consumer must check (a consumer that skipped it breaks order, below)."""
    set_feature(kit.store, CONSUMER_BARRIER, False)  # whatever the test run's default
    consumer = kit.make_consumer(kit.group_factory())
    _deaf(consumer)
    seen = _race(kit, consumer)
    assert _out_of_order(seen) == []
    assert consumer._layouts.virtual_checks == 0
    assert consumer.metrics["layout_checks"] > 0
    assert consumer._layouts.barrier.state is BarrierState.OFF


@pytest.mark.serial  # its periodic check repairs the broken consumer: the race shows only alone
def test_a_consumer_that_skips_the_check_without_the_barrier_breaks_order(kit: Kit) -> None:
    """The scenario above can fail: skipping the check while the flag is off breaks it."""
    set_feature(kit.store, CONSUMER_BARRIER, False)
    consumer = kit.make_consumer(kit.group_factory())
    _deaf(consumer)
    consumer._layouts.barrier.relies = lambda views: True  # type: ignore[method-assign]
    assert _out_of_order(_race(kit, consumer))


@pytest.mark.serial  # its periodic check repairs the broken consumer: the race shows only alone
def test_an_unresolved_announcement_is_what_keeps_order(kit: Kit) -> None:
    """With the barrier, a consumer that ignored announcements would break order too."""
    set_feature(kit.store, CONSUMER_BARRIER, True)
    consumer = kit.make_consumer(kit.group_factory())
    _deaf(consumer)
    consumer._layouts.barrier._resolved = lambda views: True  # type: ignore[method-assign]
    assert _out_of_order(_race(kit, consumer))


def test_registration_ack_and_leaving(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, True)
    topic = kit.adopted_topic(2)
    consumer = kit.make_consumer(kit.group_factory())
    consumer.subscribe([topic])
    wait_until(lambda: _in_force(consumer), 20.0, what="the barrier in force")
    cid = consumer._layouts.barrier.id
    root, zk = kit.zk_root, kit.zk
    assert zk.exists(store_paths.barrier_member_path(root, cid))
    assert cid in kit.store.barrier_consumers(topic)
    kit.controller.expand(topic, 3)
    announcement, _ = kit.store.get_announcement(topic)
    assert announcement is not None and announcement.epoch == 1
    ack = kit.store.barrier_acks(topic)[cid]
    assert ack.announcement == announcement.id
    consumer.close()
    assert kit.store.barrier_consumers(topic) == {}


def _fake_consumer(kit: Kit, topic: str, cid: str, lease_ms: int = 500) -> Any:
    """A registration in a session of its own that never acks."""
    client = kit.kazoo_factory()
    record = BarrierRegistration(
        id=cid, group="g", host="h", pid=1, lease_ms=lease_ms, registered_at=time.time()
    )
    root = kit.zk_root
    client.create(store_paths.barrier_member_path(root, cid), b"", ephemeral=True, makepath=True)
    path = store_paths.barrier_consumer_path(root, topic, cid)
    client.create(path, record.to_json(), ephemeral=True, makepath=True)
    return client


def test_a_consumer_that_does_not_ack_is_evicted_after_the_bound(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, True)
    topic = kit.adopted_topic(2)
    _fake_consumer(kit, topic, "stuck", lease_ms=500)
    kit.controller.consumers.ack_bound_s = 1.0
    started = time.monotonic()
    result = kit.controller.expand(topic, 3, timeout=30)
    took = time.monotonic() - started
    assert result.epoch == 1
    # The bound, then the lease (0.5 s) and its grace (1 s), before the publish.
    assert took >= 2.4, took
    assert not kit.zk.exists(store_paths.barrier_member_path(kit.zk_root, "stuck"))
    announcement, _ = kit.store.get_announcement(topic)
    assert announcement is not None and "stuck" in announcement.evicted


def test_the_transition_waits_for_an_unacked_consumer_until_its_session_ends(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, True)
    topic = kit.adopted_topic(2)
    fake = _fake_consumer(kit, topic, "slow")
    done: list[Any] = []
    worker = threading.Thread(target=lambda: done.append(kit.controller.expand(topic, 3)))
    worker.start()
    time.sleep(2.0)
    assert not done, "published without the registered consumer's ack"
    assert kit.store.get_topic(topic).epoch == 0  # type: ignore[union-attr]
    fake.stop()  # its session ends: its registration goes
    worker.join(20)
    assert done and done[0].epoch == 1


def test_flag_off_and_nobody_registered_announces_nothing(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, False)
    topic = kit.adopted_topic(2)
    kit.controller.expand(topic, 3)
    assert kit.store.get_announcement(topic) == (None, -1)


def test_an_evicted_consumer_checks_then_registers_again(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, True)
    topic = kit.adopted_topic(2)
    consumer = kit.make_consumer(kit.group_factory())
    consumer.subscribe([topic])
    wait_until(lambda: _in_force(consumer), 20.0, what="the barrier in force")
    barrier = consumer._layouts.barrier
    states: list[BarrierState] = []
    original = barrier._set

    def recording(new: BarrierState) -> None:
        states.append(new)
        original(new)

    barrier._set = recording  # type: ignore[method-assign]
    kit.store.evict_consumer(topic, barrier.id)
    producer = kit.make_producer()
    for n in range(200):
        producer.produce(topic, key=f"k{n}", value=b"v")
        producer.flush(10)
        consumer.consume(100, 0.05)
        if BarrierState.LOST in states and barrier.state is BarrierState.IN_FORCE:
            break
    assert BarrierState.LOST in states  # the lease renewal found the member node gone
    wait_until(lambda: _in_force(consumer), 20.0, what="registered again")
    assert kit.zk.exists(store_paths.barrier_member_path(kit.zk_root, barrier.id))


def test_a_rewind_is_acked_by_the_other_members_before_it_goes_on(kit: Kit) -> None:
    set_feature(kit.store, CONSUMER_BARRIER, True)
    topic = kit.adopted_topic(2)
    group = kit.group_factory()
    a, b = kit.make_consumer(group), kit.make_consumer(group)
    a.assign([TopicPartition(topic, 0, 0)])
    b.assign([TopicPartition(topic, 1, 0)])
    for c in (a, b):
        wait_until(lambda c=c: _in_force(c), 20.0, what="the barrier in force")
    a._layouts.mark_rewound(topic)
    # Returned only once b acked: b has the rewind waiting for its next batch.
    acks = kit.store.rewind_acks(topic)
    assert b._layouts.barrier.id in acks
    assert b._layouts.rewind_waiting or topic in b._layouts.take_rewound()


def test_the_features_command_is_validated_and_idempotent(kit: Kit) -> None:
    disable = kit.ordered_cli("features", "disable", "consumer-barrier", "--json")
    assert disable.returncode == 0, disable.stderr
    first = kit.ordered_cli("features", "enable", "consumer-barrier", "--json")
    again = kit.ordered_cli("features", "enable", "consumer-barrier", "--json")
    assert first.returncode == 0 and again.returncode == 0, (first.stderr, again.stderr)
    assert json.loads(first.stdout) == {
        "changed": True,
        "enabled": True,
        "feature": "consumer-barrier",
    }
    assert json.loads(again.stdout)["changed"] is False
    status = json.loads(kit.ordered_cli("features", "status", "--json").stdout)
    assert status["consumer-barrier"]["enabled"] is True
    before = kit.store.get_feature(CONSUMER_BARRIER)
    bad = kit.ordered_cli("features", "enable", "no-such-feature")
    assert bad.returncode == 2  # refused before anything connects
    assert kit.store.get_feature(CONSUMER_BARRIER) == before


def test_a_new_roots_first_adoption_turns_the_barrier_on_and_nothing_else_does(kit: Kit) -> None:
    """A root nothing was adopted on and whose flag was never written is a new one."""
    if kit.store.get_feature(CONSUMER_BARRIER) is not None:
        pytest.skip("this run writes the flag before any adoption (ORDERED_TEST_CONSUMER_BARRIER)")
    kit.adopted_topic(2)
    flag = kit.store.get_feature(CONSUMER_BARRIER)
    assert flag is not None and flag.enabled and flag.changed_by == FIRST_ADOPTION
    # An operator's choice stays: later adoptions never write the flag again.
    set_feature(kit.store, CONSUMER_BARRIER, False)
    kit.adopted_topic(2)
    assert kit.store.feature_enabled(CONSUMER_BARRIER) is False


def test_a_root_with_an_adopted_topic_keeps_the_barrier_off(kit: Kit) -> None:
    """A root an older version adopted on (no flag node) may still run its controllers."""
    if kit.store.get_feature(CONSUMER_BARRIER) is not None:
        pytest.skip("this run writes the flag before any adoption (ORDERED_TEST_CONSUMER_BARRIER)")
    kit.zk.ensure_path(store_paths.topic_path(kit.zk_root, "adopted-by-an-older-version"))
    kit.adopted_topic(2)
    assert kit.store.get_feature(CONSUMER_BARRIER) is None
