"""The fast path of ``poll()``/``consume()`` (``ordered.consumer.calls``) against the real servers.

Each hand-over to the slow path has a test that fails without it: a gate, a new epoch,
a rebalance (a new assignment), a seek, a revocation (and a pause), a re-check slot.
Then ``poll()`` and ``consume()`` interleaved by a group across expansions and members
coming and going: every key in order, nothing lost.
"""

from __future__ import annotations

import contextlib
import random
import threading
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaException, TopicPartition
from helpers import transient_error, wait_until
from test_consumer_group import Checker

from coordinator.control.controller import Controller
from ordered.consumer import OrderedConsumer
from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

PER_PARTITION = 1500


def _fill(producer: OrderedProducer, topic: str, count: int, tag: str = "r") -> None:
    for i in range(count):
        producer.produce(topic, value=f"{tag}{i}".encode(), key=f"k{i % 64}")
        if i % 1000 == 0:
            producer.poll(0)
    assert producer.flush(30) == 0


def _first(consumer: OrderedConsumer, timeout: float = 30.0) -> Any:
    """The first record ``poll()`` returns (loads a served batch)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        m = consumer.poll(0.5)
        if m is not None and m.error() is None:
            return m
    raise AssertionError("no record")


def _served(consumer: OrderedConsumer) -> int:
    return len(consumer._path.left)  # type: ignore[union-attr]


Filler = Callable[..., tuple[str, OrderedProducer]]


@pytest.fixture
def filler(
    topic_factory: Callable[..., str],
    controller: Controller,
    make_producer: Callable[..., OrderedProducer],
) -> Filler:
    """``filler(partitions, count, tag="r")``: a new adopted topic with ``count`` records
    (keys spread over its partitions), and the producer that wrote them."""

    def fill(partitions: int, count: int, tag: str = "r") -> tuple[str, OrderedProducer]:
        topic = topic_factory(partitions)
        controller.adopt(topic)
        producer = make_producer()
        _fill(producer, topic, count, tag)
        return topic, producer

    return fill


@pytest.fixture
def filled(filler: Filler) -> str:
    """An adopted 2-partition topic with about ``PER_PARTITION`` records per partition."""
    return filler(2, 2 * PER_PARTITION)[0]


def _assigned(
    make_consumer: Callable[..., OrderedConsumer],
    group: str,
    topic: str,
    partitions: tuple[int, ...] = (0, 1),
) -> OrderedConsumer:
    consumer = make_consumer(group)
    consumer.assign([TopicPartition(topic, p) for p in partitions])
    return consumer


def test_poll_serves_a_judged_batch(
    filled: str, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    """Steady state: one slow call serves a batch; the rest is popped, delivery recorded."""
    consumer = _assigned(make_consumer, group_factory(), filled)
    first = _first(consumer)
    assert _served(consumer) > 0
    got = [first] + [consumer.poll(1.0) for _ in range(_served(consumer))]
    last = {}
    for m in got:
        last[m.partition()] = m.offset()
    consumer.commit(asynchronous=False)  # hands over: the offsets handed out are stored
    committed = consumer.committed([TopicPartition(filled, p) for p in last], timeout=10)
    assert {tp.partition: tp.offset for tp in committed} == {p: o + 1 for p, o in last.items()}
    assert consumer.metrics["delivered"] == len(got)


def test_seek_hands_over(
    filled: str, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    consumer = _assigned(make_consumer, group_factory(), filled)
    first = _first(consumer)
    assert _served(consumer) > 0
    consumer.seek(TopicPartition(filled, first.partition(), 0))
    mine: list[int] = []
    deadline = time.monotonic() + 30
    while len(mine) < 3 and time.monotonic() < deadline:
        m = consumer.poll(1.0)
        if m is not None and m.error() is None and m.partition() == first.partition():
            mine.append(m.offset())
    # Without the hand-over the served batch (offsets past the first) comes first.
    assert mine[:3] == [0, 1, 2], mine[:3]


def test_revocation_hands_over(
    filled: str, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    consumer = _assigned(make_consumer, group_factory(), filled)
    first = _first(consumer)
    gone = first.partition()
    assert _served(consumer) > 0
    consumer.incremental_unassign([TopicPartition(filled, gone)])
    after = [m for m in (consumer.poll(0.2) for _ in range(300)) if m is not None]
    assert [m for m in after if m.partition() == gone] == []


def test_pause_hands_over(
    filled: str, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    consumer = _assigned(make_consumer, group_factory(), filled)
    first = _first(consumer)
    held = first.partition()
    assert _served(consumer) > 0
    consumer.pause([TopicPartition(filled, held)])
    after = [m for m in (consumer.poll(0.2) for _ in range(300)) if m is not None]
    assert [m for m in after if m.partition() == held] == []
    consumer.resume([TopicPartition(filled, held)])
    resumed = [m for m in (consumer.poll(1.0) for _ in range(50)) if m is not None]
    assert [m.offset() for m in resumed if m.partition() == held][:1] == [first.offset() + 1]


def test_new_assignment_hands_over(
    filled: str, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    """A rebalance as the application does it (``assign``): nothing of the old one is served."""
    consumer = _assigned(make_consumer, group_factory(), filled)
    first = _first(consumer)
    other = 1 - first.partition()
    assert _served(consumer) > 0
    consumer.assign([TopicPartition(filled, other)])
    after = [m for m in (consumer.poll(0.5) for _ in range(200)) if m is not None]
    assert after and {m.partition() for m in after} == {other}


def test_new_epoch_hands_over(
    filled: str,
    make_consumer: Callable[..., OrderedConsumer],
    group_factory: Callable[[], str],
    controller: Controller,
) -> None:
    """The topic's watch (kazoo's thread) stops the fast path: the next call reloads."""
    consumer = _assigned(make_consumer, group_factory(), filled)
    _first(consumer)
    assert _served(consumer) > 0
    reloads = consumer.metrics["layout_reloads"]
    controller.expand(filled, 3, timeout=30)
    wait_until(lambda: _served(consumer) == 0, timeout=10, what="the fast path halted")
    consumer.poll(1.0)
    assert consumer.metrics["layout_reloads"] > reloads


def test_recheck_slot_hands_over(
    filled: str, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    """A position-service notice (a held gate's re-check is due) stops the fast path."""
    consumer = _assigned(make_consumer, group_factory(), filled)
    first = _first(consumer)
    assert _served(consumer) > 0
    before = consumer._core.next_check
    consumer._checker._on_progress(None)  # type: ignore[arg-type]  # as kazoo's thread calls it
    assert _served(consumer) == 0
    after = [consumer.poll(1.0) for _ in range(300)]
    assert consumer._core.next_check > before  # the slow call re-checked the gates
    # ... and went on where the served batch stopped: the slow path's own hand-over put
    # the rest of it back (librdkafka's rebalances run in there too, after it).
    mine = [m.offset() for m in after if m is not None and m.partition() == first.partition()]
    assert mine and mine == list(range(first.offset() + 1, first.offset() + 1 + len(mine)))


@pytest.mark.parametrize("call", ["poll", "consume_500"])
def test_gate_hands_over(
    call: str,
    filler: Filler,
    controller: Controller,
    make_consumer: Callable[..., OrderedConsumer],
    group_factory: Callable[[], str],
) -> None:
    """A batch with a record at a closed gate is neither served (``poll()``) nor judged at
    once (``consume(500)``): the gate holds it."""
    topic, producer = filler(2, 400, "old")
    controller.expand(topic, 3, timeout=30)
    _fill(producer, topic, 1200, "new")
    # The destination alone: its source never commits.
    consumer = _assigned(make_consumer, group_factory(), topic, (2,))
    got: list[Any] = []
    for _ in range(25 if call == "poll" else 10):
        if call == "poll":
            m = consumer.poll(0.2)
            got += [] if m is None else [m]
        else:
            got += consumer.consume(500, 0.3)
    assert [m for m in got if m.error() is None] == []
    assert consumer.metrics["blocks"] >= 1


def test_consume_judges_a_steady_batch_as_it_comes(
    filler: Filler, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    """``consume(500)`` below the covered offsets: judged in one pass, no queue, no check."""
    topic = filler(2, 8000)[0]
    consumer = _assigned(make_consumer, group_factory(), topic)
    fetcher = consumer._fetcher  # type: ignore[attr-defined]
    got: list[Any] = []
    # The first batches have checks of their own (until one noted both partitions' high
    # watermarks), and one is taken ahead during each: until nothing is left over.
    for _ in range(8):
        got += consumer.consume(500, 5.0)
        if got and fetcher._pending is None and not fetcher.ready:
            break
    skipped, checks = fetcher.skipped, consumer.metrics["layout_checks"]
    usual: list[Any] = []  # batches that went the usual way (_begin, the ready queue)
    begin = fetcher._begin
    fetcher._begin = lambda batch, moved: usual.append(batch) or begin(batch, moved)
    upkeep = consumer._upkeep  # type: ignore[attr-defined]
    services: list[float] = []
    service = upkeep.service
    upkeep.service = lambda: services.append(time.monotonic()) or service()
    for _ in range(3):
        batch = consumer.consume(500, 5.0)
        assert len(batch) == 500 and not fetcher.ready and fetcher._pending is None
        got += batch
    assert usual == [] and fetcher.skipped == skipped + 3
    # Quiet: the service step ran at most once (its re-check slot is 100 ms apart).
    assert len(services) <= 1
    ran = len(services)
    consumer._checker._on_progress(None)  # type: ignore[attr-defined]  # kazoo's thread
    got += consumer.consume(500, 5.0)
    assert len(services) > ran  # the notice halted the quiet: the step ran
    assert consumer.metrics["layout_checks"] - checks <= 1  # at most the periodic rewind read
    last = {}
    for m in got:
        last[m.partition()] = m.offset()
    consumer.commit(asynchronous=False)  # stores what was delivered, as per record
    committed = consumer.committed([TopicPartition(topic, p) for p in last], timeout=10)
    assert {tp.partition: tp.offset for tp in committed} == {p: o + 1 for p, o in last.items()}
    assert consumer.metrics["delivered"] == len(got)


def test_poll_and_consume_interleaved_through_expansions_and_rebalances(
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    controller: Controller,
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
    make_consumer: Callable[..., OrderedConsumer],
) -> None:
    """Members mixing ``poll()`` and ``consume(n)``: every key in order, none lost."""
    topic = topic_factory(2)
    controller.adopt(topic)
    group = group_factory()
    checker = Checker()
    produced: dict[str, int] = {}
    failures: list[BaseException] = []
    stop_producing = threading.Event()
    client = {
        "bootstrap.servers": bootstrap,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
    }

    def produce() -> None:
        try:
            producer = OrderedProducer({**client, "linger.ms": 5})
            seqs: dict[str, int] = {}
            i = 0
            while not stop_producing.is_set():
                for _ in range(20):
                    key = f"key{i % 24}"
                    seq = seqs.get(key, 0)
                    producer.produce(topic, value=f"p0:{key}:{seq}".encode(), key=key)
                    seqs[key] = seq + 1
                    i += 1
                producer.poll(0)
                time.sleep(0.01)
            assert producer.flush(30) == 0
            producer.close()
            produced.update({f"p0:{k}": n for k, n in seqs.items()})
        except BaseException as exc:
            failures.append(exc)

    def consume(name: str, stop: threading.Event, seed: int) -> None:
        rng = random.Random(seed)
        consumer = make_consumer(group)
        try:
            consumer.subscribe([topic])
            while not stop.is_set():
                choice = rng.choice((0, 0, 1, 7, 200, 500, 1000))
                if choice == 0:
                    m = consumer.poll(0.1)
                    batch = [] if m is None else [m]
                else:
                    batch = consumer.consume(choice, 0.1)
                batch = [m for m in batch if not transient_error(m)]
                assert all(m.error() is None for m in batch), [m.error() for m in batch]
                if batch:
                    checker.record(name, batch)
                if rng.random() < 0.05:
                    # A rebalance in progress may fail it: redelivered, as with any consumer.
                    with contextlib.suppress(KafkaException):
                        consumer.commit(asynchronous=False)
        except BaseException as exc:
            failures.append(exc)
        finally:
            consumer.close()  # leaves the group: the others rebalance

    members: dict[str, tuple[threading.Thread, threading.Event]] = {}

    def join(name: str, seed: int) -> None:
        stop = threading.Event()
        thread = threading.Thread(target=consume, args=(name, stop, seed), daemon=True)
        members[name] = (thread, stop)
        thread.start()

    def leave(name: str) -> None:
        thread, stop = members.pop(name)
        stop.set()
        thread.join(30)

    def progress(at_least: int, what: str) -> None:
        wait_until(lambda: checker.first > at_least or failures, timeout=60, what=what)

    join("c0", 1)
    producer = threading.Thread(target=produce, daemon=True)
    producer.start()
    try:
        progress(500, "first records")
        controller.expand(topic, 3, timeout=30)
        join("c1", 2)  # a rebalance while the new partition's gate may hold
        progress(checker.first + 800, "records after 2 -> 3")
        controller.expand(topic, 4, timeout=30)
        leave("c0")
        join("c2", 3)
        progress(checker.first + 800, "records after 3 -> 4")
    finally:
        stop_producing.set()
        producer.join(60)
    checker.settle(produced, failures, members, leave)


def test_consume_fills_the_batch_until_the_timeout(
    filler: Filler,
    make_consumer: Callable[..., OrderedConsumer],
    group_factory: Callable[[], str],
) -> None:
    """As confluent's: 50 queued and 100 arriving over a second fill ``consume(100, 10.0)``.

    confluent returns 100 records after about 0.5 s; a consumer that returns what is
    ready (the old behaviour) returns the 50 it holds at once.
    """
    topic, producer = filler(1, 51, "q")
    consumer = _assigned(make_consumer, group_factory(), topic, (0,))
    _first(consumer)  # offset 0; the 50 after it are taken from librdkafka, judged, served

    def trickle() -> None:
        for i in range(100):
            producer.produce(topic, value=f"a{i}".encode(), key=f"k{i % 64}")
            producer.poll(0)
            time.sleep(0.01)
        producer.flush(10)

    thread = threading.Thread(target=trickle, daemon=True)
    started = time.monotonic()
    thread.start()
    try:
        batch = consumer.consume(100, 10.0)
        elapsed = time.monotonic() - started
    finally:
        thread.join(30)
    assert len(batch) == 100, (len(batch), elapsed)
    assert [m.offset() for m in batch] == list(range(1, 101))
    assert 0.2 < elapsed < 5.0, elapsed
    rest = consumer.consume(100, 5.0)
    assert [m.offset() for m in rest] == list(range(101, 151))
    assert consumer.metrics["delivered"] == 151


def test_consume_returns_a_short_batch_at_the_timeout(
    filler: Filler, make_consumer: Callable[..., OrderedConsumer], group_factory: Callable[[], str]
) -> None:
    """Fewer records than asked for: all of them, when the timeout ends (not at once)."""
    topic, _producer = filler(1, 50, "q")
    consumer = _assigned(make_consumer, group_factory(), topic, (0,))
    _first(consumer)  # the first fetch (and its layout check) is behind us
    started = time.monotonic()
    batch = consumer.consume(100, 1.5)
    elapsed = time.monotonic() - started
    assert [m.offset() for m in batch] == list(range(1, 50))
    assert elapsed >= 1.4, elapsed
