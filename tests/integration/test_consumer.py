"""OrderedConsumer against the real Kafka and ZooKeeper: gates, callbacks, the hole."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Sequence
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition
from fixtures import producer_record
from helpers import consume_until, drain, keys_for, moving_keys, run_cli, wait_held, wait_until
from kit import Kit

from coordinator.kernel.errors import OrderViolationError
from coordinator.kernel.store import AckRecord
from linear_hash import Layout
from linear_hash.gating import Wait
from ordered.consumer import GateState
from ordered.listener import PartitionKeyRebalanceListener

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def produce(bootstrap: str, topic: str, layout: Layout, records: list[tuple[str, str]]) -> None:
    """Write ``(key, value)`` records to ``layout``'s partitions, with the epoch header."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 2})
    header = [("ordered.epoch", str(layout.epoch).encode())]
    for key, value in records:
        producer.produce(
            topic, value=value, key=key, partition=layout.partition_for(key), headers=header
        )
    assert producer.flush(30) == 0


OLD, NEW = Layout(2, 2, 0), Layout(2, 3, 1)
"""The layouts of :func:`split_topic`: 2 partitions, then 3 (partition 0 splits into 2)."""


def split_topic(
    kit: Kit, tail: Sequence[str], head: Sequence[str] = (), filler: int = 0
) -> tuple[str, int]:
    """A 2-partition topic split to 3 with records on both sides of partition 0's boundary.

    Writes ``filler`` keys that stay in partition 0, then ``tail``, as ``old`` under epoch
    0; expands to 3; writes ``head`` as ``new`` under epoch 1. Returns the topic and
    ``B_0(1)``, the boundary partition 2's gate waits on.
    """
    topic = kit.adopted_topic(2)
    old = [(k, "old") for k in keys_for(OLD, 0, filler, "x")] + [(k, "old") for k in tail]
    produce(kit.bootstrap, topic, OLD, old)
    kit.controller.expand(topic, 3)
    produce(kit.bootstrap, topic, NEW, [(k, "new") for k in head])
    return topic, kit.store.get_epoch(topic, 1).boundaries[0]


def committed(bootstrap: str, group: str, topic: str, partition: int) -> int:
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        [tp] = probe.committed([TopicPartition(topic, partition)], timeout=10)
        return int(tp.offset)
    finally:
        probe.close()


class Recorder(PartitionKeyRebalanceListener):
    """Keeps the KIP-253 callbacks in order."""

    def __init__(self) -> None:
        self.events: list[tuple[str, int, int]] = []

    def on_partition_key_maybe_revoked(self, partitions: list[TopicPartition]) -> None:
        self.events += [("maybe_revoked", tp.partition, tp.offset) for tp in partitions]

    def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> None:
        self.events += [("assigned", tp.partition, tp.offset) for tp in partitions]


def test_destination_held_until_source_tail_committed(kit: Kit) -> None:
    """(a) Partition 2 (split from 0) opens only after 0's tail is consumed and committed."""
    moving = moving_keys(10)
    topic, boundary = split_topic(kit, moving, moving, filler=20)
    assert boundary == 30

    group = kit.group_factory()
    destination = kit.make_consumer(group)
    destination.assign([TopicPartition(topic, 2)])
    wait_held(destination, what="the destination's first fetch reaches the gate")
    [status] = destination.gate_status()
    assert status.state is GateState.BLOCKED and status.held == 0
    assert status.waits == (Wait(0, 30, 1),)

    source_listener = Recorder()
    source = kit.make_consumer(group)
    source.key_listener = source_listener
    source.assign([TopicPartition(topic, 0), TopicPartition(topic, 1)])
    got = drain(source, 20.0, until=30)
    assert [m.offset() for m in got if m.partition() == 0] == list(range(30))
    # Delivered, not yet committed: the destination still waits.
    assert drain(destination, 1.0) == []
    assert committed(kit.bootstrap, group, topic, 0) < 30
    # The next call announces the boundary (callback, then a synchronous commit).
    source.consume(10, 0.1)
    assert source_listener.events == [("maybe_revoked", 0, 30)]
    assert committed(kit.bootstrap, group, topic, 0) == 30
    started = time.monotonic()
    opened = drain(destination, 10.0, until=10)
    assert [m.value() for m in opened] == [b"new"] * 10
    assert time.monotonic() - started < 5.0
    assert destination.gate_status()[0].state is GateState.FREE


def test_callbacks_in_kip_order_and_new_partition_picked_up(kit: Kit) -> None:
    """(b) One subscribed consumer: maybe_revoked(0) runs before assigned(2)."""
    topic = kit.adopted_topic(2)
    old, new = Layout(2, 2, 0), Layout(2, 3, 1)
    keys = moving_keys(8)
    listener = Recorder()
    assignments: list[list[int]] = []
    consumer = kit.make_consumer(kit.group_factory())
    consumer.subscribe(
        [topic],
        on_assign=lambda c, ps: assignments.append(sorted(tp.partition for tp in ps)),
        key_listener=listener,
    )
    produce(kit.bootstrap, topic, old, [(k, "0") for k in keys])
    seen = drain(consumer, 15.0, until=len(keys))
    assert len(seen) == len(keys)
    kit.controller.expand(topic, 3)
    expanded = time.monotonic()
    produce(kit.bootstrap, topic, new, [(k, "1") for k in keys])
    seen += drain(consumer, 20.0, until=len(keys))
    assert len(seen) == 2 * len(keys)
    assert assignments[-1] == [0, 1, 2]
    assert time.monotonic() - expanded < 15.0
    by_key: dict[bytes, list[bytes]] = {}
    for m in seen:
        by_key.setdefault(m.key(), []).append(m.value())
    assert all(values == [b"0", b"1"] for values in by_key.values())
    boundary = kit.store.get_epoch(topic, 1).boundaries[0]
    assert listener.events == [("maybe_revoked", 0, boundary), ("assigned", 2, 0)]
    assert consumer.violations == 0


def test_the_hole_does_not_let_a_record_through(kit: Kit) -> None:
    """(d) docs/consumer.md: keys of 3 move 3 -> 1 -> 0 with no record in 1 in between."""
    topic = kit.adopted_topic(1)
    kit.controller.expand(topic, 4)  # epoch 1
    four = Layout(1, 4, 1)
    [key] = keys_for(four, 3, 1)
    produce(kit.bootstrap, topic, four, [(key, "first")])
    kit.controller.shrink(topic, 3)  # epoch 2: 3 -> 1
    kit.controller.shrink(topic, 2)  # epoch 3: 2 -> 0
    kit.controller.shrink(topic, 1)  # epoch 4: 1 -> 0
    epochs = {e.epoch: e for e in kit.store.epochs(topic)}
    assert epochs[2].edges == ((3, 1),) and epochs[4].edges == ((1, 0),)
    assert epochs[2].boundaries[1] == epochs[4].boundaries[1] == 0
    produce(kit.bootstrap, topic, Layout(1, 1, 4), [(key, "second")])

    group = kit.group_factory()
    # Partitions 1 and 2 are consumed (empty) and committed: 1's committed offset
    # reaches B_1(4) without any record ever consulting the gate at epoch 2.
    others = kit.make_consumer(group)
    others.assign([TopicPartition(topic, 1, 0), TopicPartition(topic, 2, 0)])
    others.commit(
        offsets=[TopicPartition(topic, 1, 0), TopicPartition(topic, 2, 0)], asynchronous=False
    )
    waiting = kit.make_consumer(group)
    waiting.assign([TopicPartition(topic, 0)])
    assert drain(waiting, 2.0) == []
    [status] = waiting.gate_status()
    assert status.state is GateState.BLOCKED
    assert Wait(3, 1, 2) in status.waits
    tail = kit.make_consumer(group)
    tail.assign([TopicPartition(topic, 3)])
    [first] = drain(tail, 10.0, until=1)
    assert first.value() == b"first"
    tail.consume(1, 0.1)  # announces: maybe_revoked, commit 3 at its boundary
    [second] = drain(waiting, 10.0, until=1)
    assert second.value() == b"second"


def test_key_listener_exception_surfaces_from_poll(kit: Kit) -> None:
    """(e) A raising listener surfaces from poll(); the record is not lost."""
    topic = kit.adopted_topic(1)
    kit.controller.expand(topic, 2)
    new = Layout(1, 2, 1)
    produce(kit.bootstrap, topic, new, [(k, "v") for k in keys_for(new, 1, 3)])

    class Boom(PartitionKeyRebalanceListener):
        armed = True

        def on_partition_key_assigned(self, partitions: list[TopicPartition]) -> None:
            if self.armed:
                raise ValueError("state store unavailable")

    listener = Boom()
    consumer = kit.make_consumer(kit.group_factory())
    consumer.subscribe([topic], key_listener=listener)

    def polled_until_error() -> bool:
        consumer.poll(0.2)
        return False  # only the listener's error ends this wait

    with pytest.raises(ValueError, match="state store unavailable"):
        wait_until(polled_until_error, 20, what="the listener's error", interval=0)
    listener.armed = False
    got: list[tuple[int, int]] = []

    def three() -> bool:
        message = consumer.poll(0.2)
        if message is not None:
            got.append((message.partition(), message.offset()))
        return len(got) >= 3

    wait_until(three, 20, what=lambda: f"3 records after the error ({got})", interval=0)
    assert got == [(1, 0), (1, 1), (1, 2)]


def test_misplaced_record_is_a_violation(kit: Kit) -> None:
    """A key written to the wrong partition is counted, or raised with policy=raise."""
    topic = kit.adopted_topic(2)
    layout = Layout(2, 2, 0)
    [wrong] = keys_for(layout, 1, 1)
    producer = Producer({"bootstrap.servers": kit.bootstrap})
    producer.produce(topic, value=b"ok", key=keys_for(layout, 0, 1)[0], partition=0)
    producer.produce(topic, value=b"bad", key=wrong, partition=0)
    producer.produce(
        topic,
        value=b"hdr",
        key=keys_for(layout, 0, 1)[0],
        partition=0,
        headers=[("ordered.epoch", b"7")],
    )
    assert producer.flush(30) == 0

    # The full audit is opt-in (for producers outside the layer): the header audit,
    # and every record rather than one in 16 on the fast path.
    audit = {"ordered.epoch.header.audit": True, "ordered.audit.every": 1}
    logging_consumer = kit.make_consumer(kit.group_factory(), **audit)
    logging_consumer.assign([TopicPartition(topic, 0, 0)])
    got = drain(logging_consumer, 10.0, until=3)
    assert [m.value() for m in got] == [b"ok", b"bad", b"hdr"]
    assert logging_consumer.violations == 2

    quiet = kit.make_consumer(
        kit.group_factory(), **{"ordered.key.audit": False, "ordered.epoch.header.audit": False}
    )
    quiet.assign([TopicPartition(topic, 0, 0)])
    assert len(drain(quiet, 10.0, until=3)) == 3
    assert quiet.violations == 0

    strict = kit.make_consumer(
        kit.group_factory(), **audit, **{"ordered.violation.policy": "raise"}
    )
    strict.assign([TopicPartition(topic, 0, 0)])
    with pytest.raises(OrderViolationError) as info:
        drain(strict, 10.0, until=3)
    assert (info.value.partition, info.value.offset) == (0, 1)


@pytest.mark.parametrize("routes", ["compiled", "memo"])
def test_fast_audit_finds_a_misplaced_key_in_a_batch_of_two_partitions(
    kit: Kit, routes: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The fast path's sample audit over batches holding both partitions, keys never
    seen before and unkeyed records: the one misplaced key is counted, the rest pass.

    ``compiled``: routes from the C router; ``memo``: from the per-layout memo.
    """
    from ordered.consumer import audit as batch_module

    if routes == "compiled" and batch_module._ROUTE is None:
        pytest.skip("the compiled helpers are not built")
    if routes == "memo":
        monkeypatch.setattr(batch_module, "_ROUTE", None)
    topic = kit.adopted_topic(2)
    layout = Layout(2, 2, 0)
    zero, one = keys_for(layout, 0, 300), keys_for(layout, 1, 300)
    [stray] = keys_for(layout, 0, 1, "stray")
    producer = Producer({"bootstrap.servers": kit.bootstrap, "linger.ms": 50})
    for i in range(300):
        producer.produce(topic, value=b"v", key=zero[i], partition=0)
        producer.produce(topic, value=b"v", key=one[i], partition=1)
        if i % 50 == 0:
            producer.produce(topic, value=b"unkeyed", partition=i % 2)
        if i == 150:
            # A key never seen before, routed to partition 0, written to partition 1.
            producer.produce(topic, value=b"bad", key=stray, partition=1)
    assert producer.flush(30) == 0
    total = 600 + 6 + 1
    consumer = kit.make_consumer(kit.group_factory(), **{"ordered.audit.every": 1})
    consumer.assign([TopicPartition(topic, 0, 0), TopicPartition(topic, 1, 0)])
    batches: list[list[Any]] = []
    got = consume_until(
        consumer, total, 30, batch=1000, wait=0.5, skip_errors=True, after_batch=batches.append
    )
    mixed = sum(len({m.partition() for m in batch}) > 1 for batch in batches)
    assert len(got) == total
    assert [m.value() for m in got].count(b"bad") == 1
    assert consumer.violations == 1
    assert mixed >= 1, "no batch held both partitions: the test did not reach its case"


def test_describe_group_shows_what_each_partition_waits_on(kit: Kit) -> None:
    """``ordered describe TOPIC --group G``: the wait, committed progress, and since when."""
    moving = moving_keys(10)
    topic, _boundary = split_topic(kit, moving, moving, filler=20)
    sealed_at = kit.store.get_epoch(topic, 1).sealed_at
    assert sealed_at is not None
    group = kit.group_factory()
    servers = kit.cli_servers

    def describe() -> dict[str, Any]:
        done = run_cli("describe", topic, "--group", group, "--json", *servers, timeout=60)
        assert done.returncode == 0, done.stderr
        return dict(json.loads(done.stdout))

    # No member yet: the gate of partition 2 is known from the epoch alone.
    first = describe()
    assert (first["group"], first["active"], first["epoch"]) == (group, 3, 1)
    by_partition = {p["partition"]: p for p in first["partitions"]}
    assert [by_partition[p]["state"] for p in (0, 1)] == ["open", "open"]
    blocked = by_partition[2]
    assert (blocked["state"], blocked["gate"], blocked["gate_epoch"]) == ("blocked", 0, 1)
    assert blocked["committed"] is None and blocked["end"] == len(moving)
    assert blocked["waits"] == [{"partition": 0, "offset": 30, "committed": None, "epoch": 1}]
    assert blocked["since"] == pytest.approx(sealed_at)

    # A member held at the gate declares its wait: "since" becomes that declaration.
    destination = kit.make_consumer(group)
    destination.assign([TopicPartition(topic, 2)])
    wait_held(destination, what="the destination blocked")

    def declared() -> bool:
        # The declaration is made by the consumer's next service step, inside a call: keep
        # polling, as an application does (nothing may pass the gate meanwhile).
        assert drain(destination, 0.3) == []
        return bool(describe()["partitions"][2]["since"] > sealed_at)

    wait_until(declared, timeout=20, what="the member's declared wait")
    text = run_cli("describe", topic, "--group", group, *servers, timeout=60)
    assert text.returncode == 0, text.stderr
    assert "partition 2 (active): committed none, log 0..10, blocked at 0 (epoch 1)" in text.stdout
    assert "waits on 0@30 (committed none)" in text.stdout

    # Partial progress shows as "committed now"; full progress opens the gate.
    plain = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": group})
    try:
        plain.commit(offsets=[TopicPartition(topic, 0, 12)], asynchronous=False)
        assert describe()["partitions"][2]["waits"][0]["committed"] == 12
        plain.commit(offsets=[TopicPartition(topic, 0, 30)], asynchronous=False)
    finally:
        plain.close()
    opened = describe()["partitions"][2]
    assert (opened["state"], opened["gate"], opened["waits"]) == ("open", None, [])

    # Bad input: a topic that is not adopted, one that does not exist.
    other = kit.topic_factory(2)
    refused = run_cli("describe", other, "--group", group, *servers, timeout=60)
    assert refused.returncode == 1 and "not adopted" in refused.stderr
    missing = run_cli("describe", "no-such-topic-x", "--group", group, *servers, timeout=60)
    assert missing.returncode == 1 and "does not exist" in missing.stderr


def test_auto_commit_cannot_open_a_gate_before_maybe_revoked(kit: Kit) -> None:
    """With ``enable.auto.commit``, the source's tail is committed only after the callback.

    The source consumer returns its whole tail and then does not poll for a while:
    librdkafka's background auto-commit runs every 50 ms meanwhile, yet the committed
    offset stays one below the boundary, so the destination keeps waiting until the next
    ``consume`` runs ``on_partition_key_maybe_revoked`` and commits the boundary.
    """
    moving = moving_keys(10)
    topic, boundary = split_topic(kit, moving, moving)
    assert boundary == len(moving)
    group = kit.group_factory()
    auto = {"enable.auto.commit": True, "auto.commit.interval.ms": 50}
    events: list[tuple[str, int, int]] = []

    class Shared(Recorder):
        def __init__(self) -> None:
            self.events = events

    destination = kit.make_consumer(group, **auto)
    destination.key_listener = Shared()
    destination.assign([TopicPartition(topic, 2)])
    wait_held(destination, what="the destination blocked")
    source = kit.make_consumer(group, **auto)
    source.key_listener = Shared()
    source.assign([TopicPartition(topic, 0)])
    tail = drain(source, 20.0, until=len(moving))
    assert [m.value() for m in tail] == [b"old"] * len(moving)
    # The source does not poll: auto-commits happen, the callback cannot run yet.
    early = drain(destination, 1.5)
    assert early == [] and events == []
    assert committed(kit.bootstrap, group, topic, 0) == boundary - 1
    # The next consume announces: maybe_revoked, the boundary commit, the gate opens.
    assert source.consume(10, 0.5) == []
    head = drain(destination, 10.0, until=len(moving))
    assert [m.value() for m in head] == [b"new"] * len(moving)
    assert events == [("maybe_revoked", 0, boundary), ("assigned", 2, 0)]
    assert committed(kit.bootstrap, group, topic, 0) == boundary


def test_manual_commit_at_a_boundary_announces_first_and_succeeds(kit: Kit) -> None:
    """``commit()`` right after the tail: maybe_revoked runs inside it, the commit succeeds.

    The announcement commits what was stored, so librdkafka's own commit finds nothing
    new (``_NO_OFFSET``); the application's commit still succeeds, as it would have
    without the announcement.
    """
    topic, boundary = split_topic(kit, keys_for(OLD, 0, 12))
    listener = Recorder()
    group = kit.group_factory()
    source = kit.make_consumer(group)
    source.key_listener = listener
    source.assign([TopicPartition(topic, 0)])
    assert len(drain(source, 20.0, until=boundary)) == boundary
    assert listener.events == []
    result = source.commit(asynchronous=False)
    assert listener.events == [("maybe_revoked", 0, boundary)]
    assert [(tp.partition, tp.offset) for tp in result] == [(0, boundary)]
    assert committed(kit.bootstrap, group, topic, 0) == boundary
    with pytest.raises(KafkaException, match="No offset stored"):
        source.commit(asynchronous=False)  # nothing new: as confluent says


def test_a_source_commits_nothing_past_a_pending_boundary(kit: Kit) -> None:
    """While the epoch is pending the source's boundary is unknown: commits stay put.

    A registered producer that has not acked holds epoch 1 pending; the source consumer
    delivers its tail and commits meanwhile, but the committed offset does not move.
    Once the epoch is sealed, the next call announces (maybe_revoked) and commits.
    """
    topic = kit.adopted_topic(2)
    old = Layout(2, 2, 0)
    produce(kit.bootstrap, topic, old, [(k, "old") for k in keys_for(old, 0, 4)])
    group = kit.group_factory()
    listener = Recorder()
    source = kit.make_consumer(group)
    source.key_listener = listener
    source.assign([TopicPartition(topic, 0)])
    assert len(drain(source, 20.0, until=4)) == 4
    source.commit(asynchronous=False)
    assert committed(kit.bootstrap, group, topic, 0) == 4

    kit.store.register_producer(topic, producer_record("p-holds", 30000))
    expand = threading.Thread(target=kit.controller.expand, args=(topic, 3), kwargs={"timeout": 30})
    expand.start()
    try:
        wait_until(lambda: kit.store.find_epoch(topic, 1), timeout=20, what="epoch 1 published")
        produce(kit.bootstrap, topic, old, [(k, "late") for k in keys_for(old, 0, 3, "late")])
        assert len(drain(source, 20.0, until=3)) == 3
        with pytest.raises(KafkaException, match="No offset stored"):
            source.commit(asynchronous=False)  # nothing may be committed past 4 yet
        assert committed(kit.bootstrap, group, topic, 0) == 4 and listener.events == []
        kit.store.ack(
            topic, 1, AckRecord(id="p-holds", epoch=1, last_offsets={}, acked_at=time.time())
        )
        expand.join(30)
        assert kit.store.get_epoch(topic, 1).sealed
    finally:
        expand.join(30)
    boundary = kit.store.get_epoch(topic, 1).boundaries[0]
    assert boundary == 7
    wait_until(
        lambda: source.consume(10, 0.1) == [] and listener.events,
        timeout=10,
        what="the announcement after the seal",
    )
    assert listener.events == [("maybe_revoked", 0, 7)]
    assert committed(kit.bootstrap, group, topic, 0) == 7


def test_consume_zero_messages_returns_at_once(kit: Kit) -> None:
    """``consume(0, -1)`` returns ``[]`` at once, as confluent's does."""
    consumer = kit.make_consumer(kit.group_factory())
    consumer.assign([TopicPartition(kit.topic_factory(1), 0, 0)])
    started = time.monotonic()
    assert consumer.consume(0, -1) == []
    assert time.monotonic() - started < 1.0


def test_an_on_revoke_that_commits_works_inside_close_as_with_confluent(kit: Kit) -> None:
    """``close()`` revokes the assignment: the application's ``on_revoke`` may commit there.

    A plain confluent consumer allows it (its handle is open until librdkafka's close
    returns); the wrapper raised ``RuntimeError: Consumer closed`` from ``close()``.
    """
    topic = kit.adopted_topic(2)
    producer = kit.make_producer()
    for i in range(20):
        producer.produce(topic, key=f"k{i}".encode(), value=b"v")
    assert producer.flush(30) == 0
    base = {"bootstrap.servers": kit.bootstrap, "auto.offset.reset": "earliest"}
    for ordered in (False, True):
        group = kit.group_factory()
        consumer: Any = (
            kit.make_consumer(group) if ordered else Consumer({**base, "group.id": group})
        )
        revoked: list[int] = []

        def on_revoke(
            c: Any, partitions: list[TopicPartition], revoked: list[int] = revoked
        ) -> None:
            marks = [TopicPartition(tp.topic, tp.partition, 1) for tp in partitions]
            c.commit(offsets=marks, asynchronous=False)
            revoked.extend(tp.partition for tp in partitions)

        consumer.subscribe([topic], on_revoke=on_revoke)
        wait_until(lambda c=consumer: c.poll(0.2) is not None and c.assignment(), 60)
        consumer.close()  # the revocation, and its commit, run in here
        assert sorted(revoked) == [0, 1], ordered
        reader = Consumer({**base, "group.id": group})
        try:
            parts = [TopicPartition(topic, p) for p in (0, 1)]
            assert [tp.offset for tp in reader.committed(parts, timeout=30)] == [1, 1], ordered
        finally:
            reader.close()
