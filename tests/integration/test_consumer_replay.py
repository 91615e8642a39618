"""Replays keep per-key order: a seek back, an offset reset, ``assign`` with explicit
offsets, and a rewind by one member of a group, each after a full first pass over a
topic that grew 2 -> 3 -> 4 (``docs/consumer.md``, "Replays").

Each scenario runs twice: with the replay rule (every key in order in every pass) and
with it switched off by the consumer's test-only switch (``_core.replay_guard``), where
the same scenario delivers keys out of order; that shows each test can fail.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import (
    ConsumerGroupTopicPartitions,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from helpers import commit_stored as commit
from helpers import read_committing as read
from helpers import transient_error, unique, wait_until
from kit import Kit

from coordinator.control.controller import Controller
from ordered.consumer import OrderedConsumer
from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

KEYS = 40
PER_EPOCH = 1200
# Small fetches, as with real record sizes: each fetch brings a little of every
# partition, so a replay interleaves the partitions instead of reading them one by one.
FETCH = {"max.partition.fetch.bytes": 4096}


@dataclass
class Written:
    """A topic written under epochs 0, 1, 2 (2, 3, 4 partitions): ``key:seq`` values."""

    topic: str
    total: int
    partitions: int


def out_of_order(deliveries: list[Any]) -> list[str]:
    """Every record delivered after a later record of its key (one pass)."""
    last: dict[bytes, int] = {}
    found = []
    for m in deliveries:
        seq = int(m.value().split(b":")[1])
        key = m.key()
        if seq < last.get(key, -1):
            found.append(f"{key!r} seq {seq} (partition {m.partition()}) after {last[key]}")
        last[key] = max(last.get(key, -1), seq)
    return found


def complete(deliveries: list[Any], total: int) -> bool:
    """Every record of the topic was delivered in this pass."""
    return len({(m.partition(), m.offset()) for m in deliveries}) == total


class Produce:
    """Keyed ``key:seq`` records from one OrderedProducer, sequence numbers per key."""

    def __init__(self, producer: OrderedProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.seq = [0] * KEYS
        self.sent = 0

    def write(self, count: int) -> None:
        for i in range(count):
            k = (self.sent + i) % KEYS
            self.producer.produce(self.topic, key=f"k{k}", value=f"k{k}:{self.seq[k]}".encode())
            self.seq[k] += 1
            if i % 200 == 0:
                self.producer.poll(0)
        self.sent += count
        assert self.producer.flush(30) == 0


@pytest.fixture
def written(
    topic_factory: Callable[..., str],
    controller: Controller,
    make_producer: Callable[..., OrderedProducer],
) -> Iterator[Callable[[], tuple[Written, Produce]]]:
    def make() -> tuple[Written, Produce]:
        topic = topic_factory(2)
        controller.adopt(topic)
        out = Produce(make_producer(), topic)
        out.write(PER_EPOCH)
        controller.expand(topic, 3, timeout=30)
        out.write(PER_EPOCH)
        controller.expand(topic, 4, timeout=30)
        out.write(PER_EPOCH)
        return Written(topic, out.sent, 4), out

    yield make


def check_passes(guard: bool, first: list[Any], second: list[Any], total: int) -> None:
    """The first pass is always in order; the replay only with the rule."""
    assert out_of_order(first) == []
    assert complete(first, total) and complete(second, total)
    broken = out_of_order(second)
    print(f"replay: {len(broken)} of {len(second)} deliveries out of order")
    if guard:
        assert broken == []
    else:
        assert broken, "the replay stayed in order without the replay rule"


GUARD = pytest.mark.parametrize("guard", [True, False], ids=["rule", "without-rule"])


@GUARD
@pytest.mark.parametrize("mode", ["auto", "application"])
def test_running_consumer_seeks_back_and_replays_in_order(
    guard: bool,
    mode: str,
    written: Callable[[], tuple[Written, Produce]],
    make_consumer: Callable[..., OrderedConsumer],
    group_factory: Callable[[], str],
) -> None:
    """In ``application`` commit mode nothing commits the rewind: the committed offsets
    keep saying "done" until the replay passes them, and only the consumer's own
    positions (rule 2) hold the destinations back."""
    w, _ = written()
    consumer = make_consumer(group_factory(), **FETCH, **{"ordered.commit.mode": mode})
    consumer._core.replay_guard = guard
    consumer.subscribe([w.topic])
    first = read(consumer, w.total)
    for p in range(w.partitions):
        consumer.seek(TopicPartition(w.topic, p, 0))
    second = read(consumer, w.total)
    check_passes(guard, first, second, w.total)


@GUARD
def test_offsets_reset_while_stopped_replay_in_order(
    kit: Kit, guard: bool, written: Callable[[], tuple[Written, Produce]]
) -> None:
    """The application stops consuming (``unassign``), the group's offsets are reset
    with the AdminClient (Kafka's ``--reset-offsets``), and the same consumer object
    assigns the partitions again: librdkafka starts them at the reset offsets. (A new
    consumer object has nothing cached and replays in order either way.)"""
    w, _ = written()
    group = kit.group_factory()
    consumer = kit.make_consumer(group, **FETCH)
    consumer._core.replay_guard = guard
    everything = [TopicPartition(w.topic, p) for p in range(w.partitions)]
    consumer.assign(everything)
    first = read(consumer, w.total)
    consumer.unassign()
    admin = AdminClient({"bootstrap.servers": kit.bootstrap})
    request = ConsumerGroupTopicPartitions(
        group, [TopicPartition(w.topic, p, 0) for p in range(w.partitions)]
    )
    admin.alter_consumer_group_offsets([request])[group].result(timeout=30)
    consumer.assign(everything)
    second = read(consumer, w.total)
    check_passes(guard, first, second, w.total)


@GUARD
def test_assign_with_explicit_offsets_replays_in_order(
    guard: bool,
    written: Callable[[], tuple[Written, Produce]],
    make_consumer: Callable[..., OrderedConsumer],
    group_factory: Callable[[], str],
) -> None:
    w, _ = written()
    consumer = make_consumer(group_factory(), **FETCH)
    consumer._core.replay_guard = guard
    consumer.assign([TopicPartition(w.topic, p, 0) for p in range(w.partitions)])
    first = read(consumer, w.total)
    consumer.assign([TopicPartition(w.topic, p, 0) for p in range(w.partitions)])
    second = read(consumer, w.total)
    check_passes(guard, first, second, w.total)


class GroupLog:
    """Deliveries of a whole group, in the order they were returned.

    A key's replay pass starts at its first step back (a record delivered after a later
    one of the same key); within the pass every later step back is a violation.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.last: dict[bytes, int] = {}
        self.replaying: set[bytes] = set()
        self.violations: list[str] = []
        self.count = 0
        self.upto: dict[int, int] = {}  # partition -> last delivered offset + 1

    def record(self, who: str, batch: list[Any]) -> None:
        with self.lock:
            for m in batch:
                key = m.key()
                seq = int(m.value().split(b":")[1])
                last = self.last.get(key, -1)
                if seq < last:
                    if key in self.replaying:
                        self.violations.append(
                            f"{who}: {key!r} seq {seq} (partition {m.partition()}) after {last}"
                        )
                    self.replaying.add(key)
                    self.last[key] = seq
                else:
                    self.last[key] = seq
                self.upto[m.partition()] = m.offset() + 1
                self.count += 1


class Member:
    """One consumer of a group, consuming in its own thread until stopped."""

    def __init__(self, name: str, consumer: OrderedConsumer, log: GroupLog, work: float) -> None:
        self.name = name
        self.consumer = consumer
        self.log = log
        self.work = work
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(15)
            assert not self._thread.is_alive()

    def _run(self) -> None:
        try:
            while not self._stop.is_set():
                batch = [m for m in self.consumer.consume(100, 0.05) if not transient_error(m)]
                assert all(m.error() is None for m in batch), [m.error() for m in batch]
                if batch:
                    self.log.record(self.name, batch)
                    commit(self.consumer)
                    time.sleep(self.work)  # the application's work on the batch
        except BaseException as exc:
            self.failures.append(exc)


@GUARD
@pytest.mark.parametrize("mode", ["auto", "application", "transaction"])
def test_rewind_by_one_member_is_seen_by_the_other(
    kit: Kit, guard: bool, mode: str, written: Callable[[], tuple[Written, Produce]]
) -> None:
    """Two members of one group: ``sources`` reads 0 and 1 (the partitions that gave keys
    to 2 and 3), ``destinations`` reads 2 and 3. New records keep coming while
    ``sources`` seeks both of its partitions back to the start: ``destinations`` must not
    deliver a new record of a moved key before the replay of its old ones is done.

    In ``application`` commit mode the consumer commits nothing: the application
    commits the sought positions itself (as ``docs/consumer.md`` asks), through the
    consumer (``application``) or in a transaction (``transaction``, which the consumer
    only sees by reading the committed offsets), and the rewind reaches the other
    member with that commit."""
    w, produce = written()
    group = kit.group_factory()
    log = GroupLog()
    settings = {**FETCH, "ordered.commit.mode": "auto" if mode == "auto" else "application"}
    sources = Member("sources", kit.make_consumer(group, **settings), log, 0.03)
    destinations = Member("destinations", kit.make_consumer(group, **settings), log, 0.0)
    members = (sources, destinations)
    for member in members:
        member.consumer._core.replay_guard = guard
    sources.consumer.assign([TopicPartition(w.topic, p) for p in (0, 1)])
    destinations.consumer.assign([TopicPartition(w.topic, p) for p in (2, 3)])
    failures = lambda: sources.failures + destinations.failures  # noqa: E731
    try:
        for member in members:
            member.start()
        wait_until(lambda: log.count >= w.total or failures(), timeout=60, what="first pass")
        assert not failures(), failures()
        assert log.violations == [] and not log.replaying
        # The rewind runs on the sources' poll thread: a confluent client is not
        # thread-safe, so that member's loop stops for it.
        sources.stop()
        blocks = destinations.consumer.metrics["blocks"]
        for p in (0, 1):
            sources.consumer.seek(TopicPartition(w.topic, p, 0))
        rewound = [TopicPartition(w.topic, p, 0) for p in (0, 1)]
        if mode == "application":
            sources.consumer.commit(offsets=rewound, asynchronous=False)
        elif mode == "transaction":
            transactional = kit.make_producer(**{"transactional.id": unique("rewind")})
            transactional.init_transactions(30)
            transactional.begin_transaction()
            metadata = sources.consumer.consumer_group_metadata()
            transactional.send_offsets_to_transaction(rewound, metadata, 30)
            transactional.commit_transaction(30)
        sources.start()
        if mode == "transaction" and guard:
            # The consumer saw the transaction's commit (it reads the committed offsets
            # every ordered.gate.poll.interval.ms) and signalled the rewind.
            wait_until(lambda: not sources.consumer._rewinds._pending, timeout=10)
        for _ in range(20):  # new records of every key, spread over the sources' replay
            produce.write(50)
            time.sleep(0.05)
        ends = {
            p: sources.consumer.get_watermark_offsets(TopicPartition(w.topic, p), timeout=10)[1]
            for p in range(w.partitions)
        }
        wait_until(
            lambda: all(log.upto.get(p, 0) >= end for p, end in ends.items()) or failures(),
            timeout=60,
            what="the replay and the new records",
        )
    finally:
        for member in members:
            member.stop()
    assert not failures(), failures()
    assert log.replaying, "no key was replayed"
    print(f"group replay: {len(log.violations)} deliveries out of order")
    if guard:
        assert log.violations == []
        # The other member did wait for the replay.
        assert destinations.consumer.metrics["blocks"] > blocks
    else:
        assert log.violations, "the group stayed in order without the replay rule"
