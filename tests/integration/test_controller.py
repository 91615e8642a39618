"""The controller against the real Kafka and ZooKeeper: adopt, expand, shrink, barrier."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, Producer
from fixtures import producer_record, run_in_background
from helpers import unique, wait_until
from kazoo.client import KazooClient
from kit import Kit

from coordinator.control.controller import BarrierTimeoutError, Controller, TransitionResult
from coordinator.kernel.errors import (
    LayoutError,
    NotAdoptedError,
    OrderedKafkaError,
    TransitionInProgressError,
)
from coordinator.kernel.kafka_admin import KafkaAdmin, UnknownTopicError
from coordinator.kernel.store import AckRecord, LayoutStore
from coordinator.kernel.zk import close_client
from linear_hash import key_flow

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


@pytest.fixture
def zk_client(kazoo_factory: Callable[..., KazooClient]) -> Callable[[], KazooClient]:
    """Another process's kazoo client (closed at teardown)."""
    return lambda: kazoo_factory(command_deadline_s=10.0)


@pytest.fixture
def admin(bootstrap: str) -> KafkaAdmin:
    return KafkaAdmin(bootstrap, timeout=10.0)


@pytest.fixture
def messages() -> list[str]:
    return []


@pytest.fixture
def controller(store: LayoutStore, admin: KafkaAdmin, messages: list[str]) -> Controller:
    return Controller(store, admin, progress=messages.append)


def produce(bootstrap: str, topic: str, counts: dict[int, int]) -> None:
    """Write ``counts[p]`` records to partition ``p`` with explicit partitions."""
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    for partition, n in counts.items():
        for i in range(n):
            producer.produce(topic, value=b"v%d" % i, key=b"k%d" % i, partition=partition)
    assert producer.flush(30) == 0


def test_adopt_expand_expand_shrink_without_producers(kit: Kit, admin: KafkaAdmin) -> None:
    topic = kit.topic_factory(4)
    produce(kit.bootstrap, topic, {0: 3, 1: 5, 2: 2, 3: 7})
    record = kit.controller.adopt(topic)
    assert (record.initial, record.active, record.epoch, record.pending) == (4, 4, 0, None)
    assert kit.controller.adopt(topic) == record  # idempotent
    epoch0 = kit.store.get_epoch(topic, 0)
    assert epoch0.sealed and epoch0.edges == () and epoch0.to_active == 4

    r1 = kit.controller.expand(topic, 6, timeout=30)
    assert (r1.epoch, r1.from_active, r1.to_active) == (1, 4, 6)
    assert r1.created_partitions and admin.partition_count(topic) == 6
    # Receivers 4, 5 are new (end offset 0 at publish); givers 0, 1 at seal.
    assert r1.boundaries == {0: 3, 1: 5, 4: 0, 5: 0}

    produce(kit.bootstrap, topic, {2: 4, 3: 1, 4: 6, 5: 2})
    r2 = kit.controller.expand(topic, 8, timeout=30)
    assert r2.boundaries == {2: 6, 3: 8, 6: 0, 7: 0}
    assert admin.partition_count(topic) == 8

    produce(kit.bootstrap, topic, {1: 2, 5: 3, 6: 4, 7: 9})
    r3 = kit.controller.shrink(topic, 5, timeout=30)
    # Retired 5, 6, 7 give to their ancestors 1, 2, 3: receivers at publish, givers at
    # seal, both the end offsets written above.
    assert key_flow(4, 8, 5) == [(5, 1), (6, 2), (7, 3)]
    assert r3.boundaries == {1: 7, 2: 6, 3: 8, 5: 5, 6: 4, 7: 9}
    assert not r3.created_partitions

    final = kit.store.get_topic(topic)
    assert final is not None
    assert (final.active, final.epoch, final.pending, final.physical) == (5, 3, None, 8)
    assert admin.partition_count(topic) == 8
    epochs = kit.store.epochs(topic)
    assert [(e.epoch, e.state, e.from_active, e.to_active) for e in epochs] == [
        (0, "sealed", 4, 4),
        (1, "sealed", 4, 6),
        (2, "sealed", 6, 8),
        (3, "sealed", 8, 5),
    ]
    assert [list(e.edges) for e in epochs[1:]] == [
        key_flow(4, 4, 6),
        key_flow(4, 6, 8),
        key_flow(4, 8, 5),
    ]
    assert all(e.producers == () and e.sealed_at is not None for e in epochs)
    description = kit.controller.describe(topic)
    assert description.kafka_partitions == 8 and len(description.epochs) == 4


def test_adopt_with_other_settings_is_refused(
    controller: Controller, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(2, config={"cleanup.policy": "compact"})
    record = controller.adopt(topic, algorithm="murmur2")
    assert record.compacted and record.algorithm == "murmur2"
    with pytest.raises(LayoutError, match="already adopted"):
        controller.adopt(topic, algorithm="crc32")
    with pytest.raises(LayoutError, match="unknown algorithm"):
        controller.adopt(topic, algorithm="md5")
    with pytest.raises(UnknownTopicError):
        controller.adopt(unique("missing"))


def test_validation_writes_nothing(kit: Kit) -> None:
    topic = kit.topic_factory(4)
    with pytest.raises(NotAdoptedError):
        kit.controller.expand(topic, 6)
    assert kit.store.client.exists(f"{kit.store.root}/topics/{topic}") is None
    kit.controller.adopt(topic)
    before = kit.store.client.get(f"{kit.store.root}/topics/{topic}")
    with pytest.raises(LayoutError, match="above the active"):
        kit.controller.expand(topic, 4)
    with pytest.raises(LayoutError, match="below the active"):
        kit.controller.shrink(topic, 4)
    kit.controller.expand(topic, 6)
    with pytest.raises(LayoutError, match="initial partition count 4"):
        kit.controller.shrink(topic, 3)
    after = kit.store.client.get(f"{kit.store.root}/topics/{topic}")
    assert after[1].version == before[1].version + 2  # publish + seal of epoch 1 only
    epochs = sorted(kit.store.client.get_children(f"{kit.store.root}/topics/{topic}/epochs"))
    assert epochs == ["0000000000", "0000000001"]


def test_barrier_waits_for_the_ack(
    kit: Kit, zk_client: Callable[[], KazooClient], messages: list[str]
) -> None:
    topic = kit.adopted_topic(2)
    producer_client = zk_client()
    producer_store = LayoutStore(producer_client, kit.store.root)
    producer_store.register_producer(topic, producer_record("p-1", host=socket.gethostname()))
    run = run_in_background(kit.controller.expand, topic, 3, timeout=30)
    wait_until(
        lambda: (
            run.check()
            or (
                (kit.store.find_epoch(topic, 1) or None)
                and kit.store.get_epoch(topic, 1).producers == ("p-1",)
            )
        ),
        timeout=30,
        what="epoch 1 published with producer p-1",
    )
    time.sleep(0.5)
    assert run.is_alive(), "the barrier passed without the ack"
    record = kit.store.get_topic(topic)
    assert record is not None and record.pending == 1 and record.active == 3
    assert any("waiting for 1 of 1 producers (p-1)" in m for m in messages)
    acked = time.monotonic()
    producer_store.ack(
        topic, 1, AckRecord(id="p-1", epoch=1, last_offsets={}, acked_at=time.time())
    )
    result: TransitionResult = run.join()
    assert run.finished_at - acked < 1.0  # woken by the watch, not by a poll
    assert result.producers == ("p-1",) and result.expired == {}
    assert kit.store.get_epoch(topic, 1).sealed
    assert kit.store.get_topic(topic).pending is None  # type: ignore[union-attr]


def test_barrier_passes_after_expiry_and_delivery_timeout(
    kit: Kit, zk_client: Callable[[], KazooClient]
) -> None:
    topic = kit.adopted_topic(2)
    producer_client = zk_client()
    try:
        LayoutStore(producer_client, kit.store.root).register_producer(
            topic, producer_record("p-gone", 1000, host=socket.gethostname())
        )
        run = run_in_background(kit.controller.expand, topic, 4, timeout=30)
        wait_until(
            lambda: (
                run.check()
                or (
                    (kit.store.find_epoch(topic, 1) or None)
                    and kit.store.get_epoch(topic, 1).producers == ("p-gone",)
                )
            ),
            timeout=30,
            what="epoch 1 lists p-gone",
        )
    finally:
        close_client(producer_client)  # closes the session: the ephemeral registration goes
    gone = time.monotonic()
    result: TransitionResult = run.join()
    waited = run.finished_at - gone
    # delivery_timeout_ms (1 s) + 1 s grace after the controller saw the node go.
    assert 1.8 <= waited < 4.0, waited
    assert list(result.expired) == ["p-gone"]
    epoch = kit.store.get_epoch(topic, 1)
    assert epoch.sealed and list(epoch.expired) == ["p-gone"]
    assert epoch.delivery_timeouts_ms == {"p-gone": 1000}


def test_timeout_leaves_the_epoch_pending_and_resume_completes_it(
    kit: Kit, zk_client: Callable[[], KazooClient]
) -> None:
    topic = kit.adopted_topic(2)
    producer_client = zk_client()
    producer_store = LayoutStore(producer_client, kit.store.root)
    producer_store.register_producer(topic, producer_record("p-slow", host=socket.gethostname()))
    with pytest.raises(BarrierTimeoutError, match="p-slow"):
        kit.controller.expand(topic, 3, timeout=1.0)
    record = kit.store.get_topic(topic)
    assert record is not None and record.pending == 1
    # Another target while pending: refused; the same target resumes.
    with pytest.raises(TransitionInProgressError, match="transition in progress"):
        kit.controller.expand(topic, 4)
    with pytest.raises(TransitionInProgressError, match="transition in progress"):
        kit.controller.shrink(topic, 2)
    with pytest.raises(BarrierTimeoutError):
        kit.controller.expand(topic, 3, timeout=0.5)
    producer_store.ack(
        topic, 1, AckRecord(id="p-slow", epoch=1, last_offsets={0: 3}, acked_at=time.time())
    )
    result = kit.controller.resume(topic, timeout=10)
    assert result is not None and result.resumed and result.epoch == 1
    assert kit.controller.resume(topic) is None


def test_lock_held_elsewhere_is_transition_in_progress(
    kit: Kit, zk_client: Callable[[], KazooClient]
) -> None:
    topic = kit.adopted_topic(2)
    other = zk_client()
    lock = LayoutStore(other, kit.store.root).lock(topic, "someone-else")
    assert lock.acquire(timeout=5)
    with pytest.raises(TransitionInProgressError, match="transition in progress"):
        kit.controller.expand(topic, 3)
    record = kit.store.get_topic(topic)
    assert record is not None and record.epoch == 0 and record.active == 2
    lock.release()
    assert kit.controller.expand(topic, 3).epoch == 1


def test_producer_registered_after_publish_is_not_waited_for(
    kit: Kit, zk_client: Callable[[], KazooClient]
) -> None:
    topic = kit.adopted_topic(2)
    early_client = zk_client()
    late_client = zk_client()
    early = LayoutStore(early_client, kit.store.root)
    early.register_producer(topic, producer_record("early", host=socket.gethostname()))
    run = run_in_background(kit.controller.expand, topic, 3, timeout=30)
    wait_until(lambda: kit.store.find_epoch(topic, 1) is not None, timeout=10, what="epoch 1")
    LayoutStore(late_client, kit.store.root).register_producer(
        topic, producer_record("late", host=socket.gethostname())
    )
    early.ack(topic, 1, AckRecord(id="early", epoch=1, last_offsets={}, acked_at=time.time()))
    result = run.join()
    assert result.producers == ("early",)


def test_adopt_after_a_producer_registered_under_the_topic(
    kit: Kit, zk_client: Callable[[], KazooClient]
) -> None:
    topic = kit.topic_factory(3)
    producer_client = zk_client()
    producer_store = LayoutStore(producer_client, kit.store.root)
    producer_store.register_producer(
        topic, producer_record("early-bird", host=socket.gethostname())
    )
    assert kit.store.get_topic(topic) is None  # an empty topic node is "not adopted"
    seen: list[Any] = []
    watch = producer_store.watch_topic(topic, seen.append)
    record = kit.controller.adopt(topic)
    assert record.initial == 3
    wait_until(lambda: seen and seen[-1] == record, timeout=5, what="the watch")
    watch.stop()
    assert kit.store.list_topics() == [topic]


def test_kafka_errors_keep_the_kafka_error(bootstrap: str) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = time.monotonic()
    with pytest.raises(OrderedKafkaError) as info:
        KafkaAdmin(f"127.0.0.1:{port}", timeout=1.0).partition_count("any")
    assert time.monotonic() - started < 5
    assert isinstance(info.value.kafka_error, KafkaError)
    assert info.value.code() == KafkaError._TRANSPORT
    with pytest.raises(OrderedKafkaError) as bad:
        KafkaAdmin(bootstrap).end_offsets(unique("missing"), [0])
    assert isinstance(bad.value.kafka_error, KafkaError)
