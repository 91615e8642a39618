"""No commit passes a record the application was not given: a seal and a revoke inside a call.

The record a chaos run lost (seed 90417, group ``main``, partition 2, offset 19316) sat in
a ``consume()`` call's batch when the epoch in which partition 2 gives keys away was
sealed. The call's service step read the sealed history, found the partition's position
(advanced by the records judged into the call, not yet returned) at its boundary, and
ran the announcement there and then: ``maybe_revoked``, and a boundary commit past the
records the application did not have. A revocation later in the same call took those
records out of the call (they were never returned), and the next owner of the partition
started from that commit: the record was never delivered, and a trim removed it.

Here the seal comes while a source's whole tail sits in one long ``consume()`` call:
- with one member (``assign``), ``maybe_revoked`` must not run, and nothing be
  committed, before the call has returned the tail;
- with a second member joining inside the call (a revocation there), every record below
  the group's committed offsets must have reached a member;
- with ``enable.auto.commit``, librdkafka's timer must not commit the offsets of records a
  long call holds (they are stored when the call returns them).
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from fixtures import producer_record
from helpers import keys_for, wait_until
from kit import Kit
from test_consumer import produce

from coordinator.kernel.store import AckRecord
from linear_hash import Layout
from ordered.consumer import OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

OLD = Layout(2, 2, 0)
TAIL = 40  # records of partition 0 written under epoch 0


class _Watch(PartitionKeyRebalanceListener):
    """Notes each ``maybe_revoked`` and whether a ``consume()`` call was running then."""

    def __init__(self) -> None:
        self.in_call = threading.Event()
        self.told: list[tuple[int, int, bool]] = []  # (partition, offset, inside a call)

    def on_partition_key_maybe_revoked(self, partitions: list[TopicPartition]) -> None:
        inside = self.in_call.is_set()
        self.told += [(tp.partition, tp.offset, inside) for tp in partitions]

    def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> None:
        pass


def _committed(bootstrap: str, group: str, topic: str, partitions: int) -> dict[int, int]:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        got = probe.committed([TopicPartition(topic, p) for p in range(partitions)], timeout=10)
        return {tp.partition: tp.offset for tp in got if tp.offset >= 0}
    finally:
        probe.close()


@contextlib.contextmanager
def _sampled_commits(kit: Kit, group: str, topic: str) -> Iterator[list[int]]:
    """The group's committed offset of partition 0, sampled every 0.2 s while in the block."""
    seen: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            value = _committed(kit.bootstrap, group, topic, 1).get(0, -1)
            # A read still in flight when the block ended may see a commit made after it
            # (on a loaded machine a read takes seconds): only reads done inside count.
            if not stop.is_set():
                seen.append(value)
            time.sleep(0.2)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield seen
    finally:
        stop.set()
        sampler.join(15)


def _pending_expansion(kit: Kit, topic: str) -> threading.Thread:
    """Expand 2 -> 3 with a registered producer holding epoch 1 pending (ack it to seal)."""
    kit.store.register_producer(topic, producer_record("p-holds", 60000))
    expand = threading.Thread(target=kit.controller.expand, args=(topic, 3), kwargs={"timeout": 60})
    expand.start()
    wait_until(lambda: kit.store.find_epoch(topic, 1), timeout=20, what="epoch 1 published")
    return expand


def _seal_later(kit: Kit, topic: str, expand: threading.Thread, after: float) -> threading.Thread:
    def seal() -> None:
        time.sleep(after)
        record = AckRecord(id="p-holds", epoch=1, last_offsets={}, acked_at=time.time())
        kit.store.ack(topic, 1, record)
        expand.join(30)

    sealer = threading.Thread(target=seal, daemon=True)
    sealer.start()
    return sealer


def test_a_seal_inside_a_call_announces_only_after_the_call_returned_the_tail(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    produce(kit.bootstrap, topic, OLD, [(k, "old") for k in keys_for(OLD, 0, TAIL)])
    expand = _pending_expansion(kit, topic)
    group = kit.group_factory()
    watch = _Watch()
    consumer = kit.make_consumer(group)
    consumer.key_listener = watch
    consumer.assign([TopicPartition(topic, 0, 0)])
    sealer = _seal_later(kit, topic, expand, after=2.0)
    watch.in_call.set()
    try:
        # One long call: the tail is judged at once, the seal comes while it waits. The
        # group's committed offset meanwhile: never past what was returned.
        with _sampled_commits(kit, group, topic) as committed_in_call:
            got = consumer.consume(100_000, 6.0)
    finally:
        watch.in_call.clear()
        sealer.join(40)
    assert kit.store.get_epoch(topic, 1).sealed
    assert [m.offset() for m in got] == list(range(TAIL))
    inside = [t for t in watch.told if t[2]]
    assert not inside, f"maybe_revoked ran inside the call that held the tail: {inside}"
    assert max(committed_in_call, default=-1) <= 0, (
        f"committed {max(committed_in_call)} while the call still held offsets 0..{TAIL - 1}"
    )
    # The next call announces and commits the boundary, the application having the tail.
    wait_until(
        lambda: consumer.consume(10, 0.1) == [] and watch.told,
        timeout=10,
        what="the announcement after the call",
    )
    assert watch.told == [(0, TAIL, False)]
    assert _committed(kit.bootstrap, group, topic, 1).get(0) == TAIL


def test_a_seal_then_a_revoke_inside_a_call_loses_no_record(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    produce(kit.bootstrap, topic, OLD, [(k, "old") for k in keys_for(OLD, 0, TAIL)])
    produce(kit.bootstrap, topic, OLD, [(k, "old") for k in keys_for(OLD, 1, TAIL)])
    expand = _pending_expansion(kit, topic)
    group = kit.group_factory()
    given: dict[str, set[tuple[int, int]]] = {"a": set(), "b": set()}
    revoked = threading.Event()

    def take(member: str, consumer: OrderedConsumer, records: list[Any]) -> None:
        for m in records:
            assert m.error() is None, m.error()
            given[member].add((m.partition(), m.offset()))
        if records:
            # Nothing stored yet (a source in a pending epoch keeps its offset): _NO_OFFSET.
            with contextlib.suppress(KafkaException):
                consumer.commit(asynchronous=False)

    def on_revoke(_consumer: Any, _partitions: list[Any]) -> None:
        revoked.set()

    first = kit.make_consumer(group)
    second = kit.make_consumer(group)
    first.subscribe([topic], on_revoke=on_revoke)
    deadline = time.monotonic() + 30
    while not first.assignment() and time.monotonic() < deadline:
        take("a", first, first.consume(1, 0.2))  # joins the group: at most one record
    assert first.assignment(), "the first member was never assigned"
    # The call that gets the assignment may also fetch and return one record; the rest of
    # both tails is left for the long call.
    assert len(given["a"]) <= 1, (
        f"the first member got {len(given['a'])} records before its long call"
    )

    def join() -> None:
        time.sleep(4.0)  # the seal (at 2 s) has been read inside the first member's call
        second.subscribe([topic])
        end = time.monotonic() + 20
        while time.monotonic() < end:
            take("b", second, second.consume(500, 0.5))

    sealer = _seal_later(kit, topic, expand, after=2.0)
    joiner = threading.Thread(target=join, daemon=True)
    joiner.start()
    # Before the fix the seal's announcement ran inside this call, and the revocation
    # came inside it too; now the call returns the tail at the seal, before any
    # librdkafka call, and the revocation comes at a later one.
    take("a", first, first.consume(100_000, 12.0))
    end = time.monotonic() + 10
    while time.monotonic() < end:
        take("a", first, first.consume(500, 0.5))
    joiner.join(40)
    sealer.join(40)
    assert revoked.is_set(), "the second member's join revoked nothing"
    committed = _committed(kit.bootstrap, group, topic, 3)
    reached = given["a"] | given["b"]
    skipped = sorted(
        (p, o) for p, upto in committed.items() for o in range(upto) if (p, o) not in reached
    )
    assert not skipped, (
        f"the group committed {committed} past {len(skipped)} records no member was "
        f"given, e.g. {skipped[:5]}"
    )
    assert {(p, o) for p in (0, 1) for o in range(TAIL)} <= reached


def test_auto_commit_inside_a_call_commits_nothing_the_call_holds(kit: Kit) -> None:
    topic = kit.topic_factory(1)
    produce(kit.bootstrap, topic, Layout(1, 1, 0), [(f"k{i}", "v") for i in range(TAIL)])
    group = kit.group_factory()
    consumer = kit.make_consumer(
        group, **{"enable.auto.commit": True, "auto.commit.interval.ms": 100}
    )
    consumer.assign([TopicPartition(topic, 0, 0)])
    # The backlog is judged at once and held while the call waits for more: a process
    # killed now has given the application nothing, so nothing may be committed.
    with _sampled_commits(kit, group, topic) as seen:
        got = consumer.consume(100_000, 3.0)
    assert len(got) == TAIL
    assert seen and max(seen) <= 0, f"auto-commit wrote {max(seen)} while the call held them all"
    wait_until(
        lambda: _committed(kit.bootstrap, group, topic, 1).get(0) == TAIL,
        timeout=10,
        what="the auto-commit after the call returned them",
    )


NEW = Layout(2, 3, 1)
CALLS = {
    "poll": lambda c: [m for m in [c.poll(0.2)] if m is not None],  # the served stack
    "consume-1": lambda c: c.consume(1, 0.2),
    "consume-100": lambda c: c.consume(100, 0.3),  # served batches taken 100 at a time
    "consume-500": lambda c: c.consume(500, 0.5),  # judged batches
    "consume-long": lambda c: c.consume(100_000, 3.0),  # a fill across many fetches
}


@pytest.mark.parametrize("auto_commit", [False, True], ids=["commit-after-call", "auto-commit"])
@pytest.mark.parametrize("call", list(CALLS))
def test_a_revocation_commits_only_what_was_given(kit: Kit, call: str, auto_commit: bool) -> None:
    """A member joins while the first reads a source's tail and a gated partition's head.

    Records sit where the call style leaves them at the revocation (the served stack,
    the ready records, a stash at partition 2's gate, a held gate, a long call's fill),
    partition 0 a source with its boundary in the backlog. At each revocation the group's
    committed offset of a revoked partition (after the application's own commit of the
    stored offsets) is at most the first record of it no member was given, and at the end
    every record below the committed offsets reached a member.
    """
    moving = [k for k in keys_for(OLD, 0, 400) if NEW.partition_for(k) == 2][:30]
    topic = kit.adopted_topic(2)
    produce(kit.bootstrap, topic, OLD, [(k, "old") for k in keys_for(OLD, 0, 300, "s")])
    produce(kit.bootstrap, topic, OLD, [(k, "old") for k in moving])
    produce(kit.bootstrap, topic, OLD, [(k, "old") for k in keys_for(OLD, 1, 200, "o")])
    kit.controller.expand(topic, 3)
    produce(kit.bootstrap, topic, NEW, [(k, "new") for k in moving * 3])
    group = kit.group_factory()
    extra = {"enable.auto.commit": auto_commit, "auto.commit.interval.ms": 100}
    given: set[tuple[int, int]] = set()
    lock = threading.Lock()
    at_revoke: list[tuple[int, int, int]] = []  # (partition, committed, first not given)

    def first_not_given(partition: int) -> int:
        offset = 0
        with lock:
            while (partition, offset) in given:
                offset += 1
        return offset

    def on_revoke(consumer: Any, partitions: list[Any]) -> None:
        with contextlib.suppress(KafkaException):
            consumer.commit(asynchronous=False)  # the stored offsets, as applications do
        revoked = {tp.partition for tp in partitions}
        now = _committed(kit.bootstrap, group, topic, 3)
        at_revoke.extend((p, now[p], first_not_given(p)) for p in revoked if p in now)

    def take(consumer: OrderedConsumer, records: list[Any]) -> None:
        with lock:
            for m in records:
                if m.error() is None:
                    given.add((m.partition(), m.offset()))
        if records and not auto_commit:
            with contextlib.suppress(KafkaException):
                consumer.commit(asynchronous=False)

    first = kit.make_consumer(group, **extra)
    second = kit.make_consumer(group, **extra)
    first.subscribe([topic], on_revoke=on_revoke)
    read = CALLS[call]

    def join() -> None:
        time.sleep(1.5)  # the first member has the backlog in hand by now
        second.subscribe([topic], on_revoke=on_revoke)
        end = time.monotonic() + 12
        while time.monotonic() < end:
            take(second, second.consume(500, 0.3))

    joiner = threading.Thread(target=join, daemon=True)
    joiner.start()
    end = time.monotonic() + 14
    while time.monotonic() < end:
        take(first, read(first))
    joiner.join(30)
    assert at_revoke, "no revocation came"
    past = [(p, c, f) for p, c, f in at_revoke if c > f]
    assert not past, f"committed past a record not given at a revocation: {past}"
    committed = _committed(kit.bootstrap, group, topic, 3)
    skipped = [(p, o) for p, upto in committed.items() for o in range(upto) if (p, o) not in given]
    assert not skipped, f"committed {committed} past {len(skipped)} records, e.g. {skipped[:5]}"
