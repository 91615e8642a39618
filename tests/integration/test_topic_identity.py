"""Topic identity against the real servers: a layout applies only to the topic it adopted.

A topic deleted and created again under the same name gets a new Kafka topic id; its
old layout must not apply to it. Producers, consumers and every command refuse it,
naming both ids, until ``ordered adopt --replace`` (or ``ordered unadopt``).
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Callable
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.admin import AdminClient
from fixtures import producer_record, run_in_background, snapshot
from helpers import consume_until, create_topic, wait_until
from kit import Kit

from coordinator.control.controller import BarrierTimeoutError
from coordinator.daemon import CoordinatorDaemon
from coordinator.kernel.errors import (
    LayoutError,
    TopicIdMismatchError,
    TransitionInProgressError,
)
from coordinator.kernel.history import load_history
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.topic_ids import TopicIds
from ordered import OrderedConsumer, OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]


@pytest.fixture
def clients(
    make_producer: Callable[..., OrderedProducer], make_consumer: Callable[..., OrderedConsumer]
) -> tuple[Callable[..., OrderedProducer], Callable[..., OrderedConsumer]]:
    return make_producer, make_consumer


def delete(bootstrap: str, topic: str) -> None:
    """Delete ``topic`` in Kafka and wait until the metadata no longer lists it."""
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.delete_topics([topic], operation_timeout=30)[topic].result(timeout=60)
    wait_until(lambda: topic not in admin.list_topics(timeout=5).topics, what=f"{topic} deleted")


def recreate(bootstrap: str, topic: str, partitions: int) -> None:
    """Delete ``topic`` in Kafka and create it again with ``partitions`` partitions."""
    delete(bootstrap, topic)

    def created() -> bool:
        try:
            create_topic(bootstrap, topic, partitions)
        except Exception as exc:  # still marked for deletion for a moment
            if "already exists" in str(exc) or "marked for deletion" in str(exc):
                time.sleep(0.2)
                return False
            raise
        return True

    wait_until(created, what=f"{topic} created again")


def consume_ordered(
    consumer: OrderedConsumer, topic: str, expected: int, timeout: float = 60.0
) -> list[tuple[str, int]]:
    consumer.subscribe([topic])
    got = consume_until(consumer, expected, timeout, batch=500, wait=0.5)
    return [(m.key().decode(), int(m.value())) for m in got]


def test_recreated_topic_is_refused_everywhere_until_adopt_replace(
    kit: Kit, clients: tuple[Callable[..., OrderedProducer], Callable[..., OrderedConsumer]]
) -> None:
    make_producer, make_consumer = clients
    admin = KafkaAdmin(kit.bootstrap)
    topic = kit.topic_factory(1)
    adopted = kit.ordered_cli("adopt", topic, "--json")
    assert adopted.returncode == 0, adopted.stderr
    old_id = admin.topic_id(topic)
    assert json.loads(adopted.stdout)["topic_id"] == old_id
    assert kit.ordered_cli("expand", topic, "--to", "2").returncode == 0

    recreate(kit.bootstrap, topic, 4)
    new_id = admin.topic_id(topic)
    assert new_id != old_id
    before = snapshot(kit.zk, kit.zk_root)

    # Every command refuses the stale layout, naming both ids, and writes nothing.
    for args in (
        ("describe", topic),
        ("describe", topic, "--group", kit.group_factory()),
        ("adopt", topic),
        ("expand", topic, "--to", "5"),
        ("shrink", topic, "--to", "1"),
    ):
        done = kit.ordered_cli(*args)
        assert done.returncode == 1, (args, done.stdout, done.stderr)
        assert f"adopted as topic id {old_id}" in done.stderr, (args, done.stderr)
        assert f"now has topic id {new_id}" in done.stderr, (args, done.stderr)
        assert "Traceback" not in done.stderr
    as_json = kit.ordered_cli("describe", topic, "--json")
    assert json.loads(as_json.stdout)["error"]["kind"] == "TopicIdMismatchError"
    assert admin.partition_count(topic) == 4

    # So do the clients: a producer at its first record (held while Kafka is asked, as
    # confluent queues a record, then failed in its delivery report), and at once from
    # then on; consumers at subscribe/assign and at every poll after.
    producer = make_producer()
    reports: list[Any] = []
    producer.produce(topic, key="k", value="1", on_delivery=lambda e, m: reports.append(e))
    assert producer.flush(30) == 0
    assert [e.code() for e in reports] == [KafkaError._UNKNOWN_TOPIC]
    assert f"adopted as topic id {old_id}" in reports[0].str()
    assert f"now has topic id {new_id}" in reports[0].str()
    with pytest.raises(TopicIdMismatchError) as refused:
        producer.produce(topic, key="k", value="1")
    assert (refused.value.recorded_id, refused.value.kafka_id) == (old_id, new_id)
    subscriber = make_consumer(kit.group_factory())
    with pytest.raises(TopicIdMismatchError):
        subscriber.subscribe([topic])
    assigned = make_consumer(kit.group_factory())
    with pytest.raises(TopicIdMismatchError):
        assigned.assign([TopicPartition(topic, 0, 0)])
    for _ in range(3):  # refused at every poll, not once
        with pytest.raises(TopicIdMismatchError):
            assigned.poll(0.1)
    with pytest.raises(TopicIdMismatchError):
        assigned.consume(10, timeout=0.1)
    # Nothing was written: the refused producer did not even register (a barrier of
    # the topic would wait for it). The refused consumers registered in the consumer
    # barrier before reading the layout, as they must, and withdrew the topic's
    # registration at the refusal: outside the barrier nothing changed, and no
    # registration is left that a transition of the topic would wait for (an ack of the
    # topic's old announcement may still land from a watch already fired; it waits for
    # nothing and ends with its session).
    after = snapshot(kit.zk, kit.zk_root)
    barrier = f"{kit.zk_root}/barrier"

    def outside(nodes: dict[str, Any]) -> dict[str, Any]:
        return {p: v for p, v in nodes.items() if not p.startswith(barrier)}

    assert outside(after) == outside(before)
    registrations = f"{barrier}/topics/{topic}/consumers/"
    held = [p for p in after if p.startswith(registrations)]
    assert held == [], f"the refused consumers are still registered: {held}"

    # Re-adopt: a fresh layout of the new topic, numbered after the old epochs.
    replaced = kit.ordered_cli("adopt", topic, "--replace", "--json")
    assert replaced.returncode == 0, replaced.stderr
    record = json.loads(replaced.stdout)
    assert record["topic_id"] == new_id
    assert (record["initial"], record["active"], record["epoch"]) == (4, 4, 2)
    again = kit.ordered_cli("adopt", topic, "--replace", "--json")  # idempotent
    assert again.returncode == 0 and json.loads(again.stdout) == record
    described = json.loads(kit.ordered_cli("describe", topic, "--json").stdout)
    assert [(e["epoch"], e["to_active"]) for e in described["epochs"]] == [(2, 4)]
    assert described["kafka_topic_id"] == new_id

    # Order holds through the new layout: the same producer, an expansion under it.
    sent: dict[str, int] = {}
    keys = [f"key-{i}" for i in range(40)]

    def send(rounds: int) -> None:
        for _ in range(rounds):
            for key in keys:
                sent[key] = sent.get(key, 0) + 1
                producer.produce(topic, key=key, value=str(sent[key]))
            producer.poll(0)
        assert producer.flush(30) == 0

    send(3)
    expanded = kit.ordered_cli("expand", topic, "--to", "6", "--json")
    assert expanded.returncode == 0, expanded.stderr
    assert json.loads(expanded.stdout)["epoch"] == 3
    send(3)
    assigned.close()  # refused above; a fresh consumer reads the re-adopted topic
    got = consume_ordered(make_consumer(kit.group_factory()), topic, 6 * len(keys))
    for key in keys:
        assert [v for k, v in got if k == key] == list(range(1, 7)), key


def test_pending_epoch_blocks_replace_and_unadopt_only_while_its_topic_lives(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    first = kit.controller.adopt(topic)
    assert first.topic_id == KafkaAdmin(kit.bootstrap).topic_id(topic)
    silent = kit.kazoo_factory()
    LayoutStore(silent, kit.zk_root).register_producer(
        topic, producer_record("silent", 60_000, host="h", client_id="c")
    )
    with pytest.raises(BarrierTimeoutError):
        kit.controller.expand(topic, 3, timeout=0.5)
    before = snapshot(kit.zk, kit.zk_root)
    for attempt in (
        lambda: kit.controller.unadopt(topic),
        lambda: kit.controller.adopt(topic, "murmur2", replace_existing=True),
    ):
        with pytest.raises(TransitionInProgressError, match=r"epoch 1 .* is pending"):
            attempt()
    assert snapshot(kit.zk, kit.zk_root) == before

    # The topic is deleted and created again: the pending epoch belongs to a topic
    # that is gone. Resuming it is refused; the daemon says so once, not every scan.
    recreate(kit.bootstrap, topic, 2)
    with pytest.raises(TopicIdMismatchError):
        kit.controller.resume(topic, timeout=1)
    said: list[str] = []
    daemon = CoordinatorDaemon(
        kit.store.client,
        KafkaAdmin(kit.bootstrap),
        root=kit.zk_root,
        progress=said.append,
        scan_interval=0.2,
        relay_interval=0,
    )
    runner = run_in_background(daemon.run)
    try:
        wait_until(lambda: any("resume of" in m for m in said), what="daemon refusal")
        time.sleep(1.5)  # several more scans
    finally:
        daemon.stop()
        runner.join(15)
    refusals = [m for m in said if "resume of" in m]
    assert len(refusals) == 1, said
    assert f"adopted as topic id {first.topic_id}" in refusals[0]

    # Now un-adopting is allowed, and idempotent.
    removed = kit.controller.unadopt(topic)
    assert removed is not None and removed.pending == 1
    assert kit.store.get_topic(topic) is None
    assert kit.store.epochs(topic) == []
    assert kit.controller.unadopt(topic) is None
    assert "silent" in kit.store.producers(topic)  # registrations are not the layout's
    assert kit.controller.describe(topic).topic is None


def test_records_of_older_versions_load_unbound_and_adopt_binds_them(kit: Kit) -> None:
    topic = kit.adopted_topic(3)
    path = f"{kit.zk_root}/topics/{topic}"
    raw = json.loads(kit.zk.get(path)[0])
    kafka_id = raw.pop("topic_id")
    raw["version"] = 1  # what an ordered before topic ids wrote
    kit.zk.set(path, json.dumps(raw, sort_keys=True).encode())

    legacy = kit.store.get_topic(topic)
    assert legacy is not None and legacy.topic_id is None
    assert kit.controller.describe(topic).topic == legacy  # nothing to check: used as before
    result = kit.controller.expand(topic, 4, timeout=10)  # and transitions run
    assert result.epoch == 1
    assert kit.store.get_topic(topic).topic_id is None  # type: ignore[union-attr]

    with pytest.raises(LayoutError, match="already adopted with algorithm murmur3"):
        kit.controller.adopt(topic, "crc32")
    bound = kit.controller.adopt(topic)
    assert bound.topic_id == kafka_id
    assert bound == kit.controller.adopt(topic)  # idempotent
    assert json.loads(kit.zk.get(path)[0])["version"] == 2

    # An unbound record whose topic has fewer partitions in Kafka than its layout
    # cannot be the adopted topic: binding is refused, nothing written.
    other = kit.adopted_topic(2)
    kit.controller.expand(other, 3, timeout=10)
    opath = f"{kit.zk_root}/topics/{other}"
    raw = json.loads(kit.zk.get(opath)[0])
    raw.pop("topic_id")
    raw["version"] = 1
    kit.zk.set(opath, json.dumps(raw, sort_keys=True).encode())
    recreate(kit.bootstrap, other, 2)
    before = snapshot(kit.zk, kit.zk_root)
    with pytest.raises(LayoutError, match="has 2 partitions in Kafka, fewer than the 3"):
        kit.controller.adopt(other)
    assert snapshot(kit.zk, kit.zk_root) == before


def test_cli_unadopt_and_replace(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    before = snapshot(kit.zk, kit.zk_root)
    missing = kit.ordered_cli("adopt", topic + "-missing", "--replace")
    assert missing.returncode == 1 and "does not exist in Kafka" in missing.stderr
    bad = kit.ordered_cli("adopt", topic, "--replace", "--algorithm", "md5")
    assert bad.returncode == 2 and "invalid choice" in bad.stderr
    assert snapshot(kit.zk, kit.zk_root) == before
    nothing = kit.ordered_cli("unadopt", topic, "--json")
    assert nothing.returncode == 0, nothing.stderr
    assert json.loads(nothing.stdout) == {
        "name": topic,
        "unadopted": False,
        "topic": None,
        "producers": [],
        "dry_run": False,
    }
    # --replace of a topic not adopted is a plain adoption.
    adopted = kit.ordered_cli("adopt", topic, "--replace", "--json")
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout)["epoch"] == 0
    assert kit.ordered_cli("expand", topic, "--to", "3").returncode == 0
    # Other settings without --replace: refused, naming the way out.
    other = kit.ordered_cli("adopt", topic, "--algorithm", "crc32")
    assert other.returncode == 1 and "--replace" in other.stderr
    # With --replace: a fresh layout of the same topic, numbered after epoch 1.
    replaced = json.loads(
        kit.ordered_cli("adopt", topic, "--algorithm", "crc32", "--replace", "--json").stdout
    )
    assert (replaced["algorithm"], replaced["initial"], replaced["epoch"]) == ("crc32", 3, 2)
    text = kit.ordered_cli("describe", topic).stdout
    assert f"topic id {KafkaAdmin(kit.bootstrap).topic_id(topic)}" in text
    assert "epoch 2 sealed: 3 -> 3" in text and "epoch 1" not in text

    removed = kit.ordered_cli("unadopt", topic)
    assert removed.returncode == 0, removed.stderr
    assert f"topic {topic}: unadopted (was: topic {topic}: initial 3" in removed.stdout
    assert kit.ordered_cli("describe", topic).stdout.startswith(
        f"{topic}: not adopted; 3 partitions in Kafka"
    )
    assert kit.zk.get(f"{kit.zk_root}/topics/{topic}")[0] == b""
    assert kit.zk.get_children(f"{kit.zk_root}/topics/{topic}/epochs") == []
    again = kit.ordered_cli("unadopt", topic)
    assert again.returncode == 0 and "not adopted; nothing to do" in again.stdout
    # Adoptable again, numbered after every epoch the name ever had.
    readopted = kit.ordered_cli("adopt", topic, "--json")
    assert readopted.returncode == 0, readopted.stderr
    assert json.loads(readopted.stdout)["epoch"] == 3


def test_load_history_refuses_another_topic_id(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    record = kit.controller.adopt(topic)
    assert record.topic_id is not None
    assert load_history(kit.store, topic, topic_id=record.topic_id).record == record
    with pytest.raises(
        TopicIdMismatchError, match=re.escape(f"adopted as topic id {record.topic_id}")
    ):
        load_history(kit.store, topic, topic_id="AAAAAAAAAAAAAAAAAAAAAA")
    ids = TopicIds.for_client({"bootstrap.servers": kit.bootstrap, "group.id": "g"})
    for _ in range(3):
        assert load_history(kit.store, topic, ids=ids).record == record
    assert ids.requests == 1  # one request per topic, not per load
    recreate(kit.bootstrap, topic, 2)
    ids.forget(topic)
    with pytest.raises(TopicIdMismatchError):
        load_history(kit.store, topic, ids=ids)


def test_deleted_topic_points_to_unadopt(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    delete(kit.bootstrap, topic)
    for args in (("describe", topic), ("expand", topic, "--to", "3"), ("adopt", topic)):
        done = kit.ordered_cli(*args)
        assert done.returncode == 1, (args, done.stderr)
        assert "does not exist in Kafka, but a layout of it is adopted" in done.stderr
        assert f"ordered unadopt {topic}" in done.stderr
    removed = kit.ordered_cli("unadopt", topic)
    assert removed.returncode == 0, removed.stderr
    plain = kit.ordered_cli("describe", topic)
    assert plain.returncode == 1
    assert plain.stderr.endswith(f"topic {topic} does not exist in Kafka\n")


def test_producer_that_cannot_ask_kafka_holds_then_times_out(kit: Kit) -> None:
    # Kafka never answers the topic-id check: the record is held (produce() returns),
    # nothing is registered, and its report fails after message.timeout.ms, as confluent's
    # would for a record that never reached Kafka.
    topic = kit.adopted_topic(2)
    reports: list[Any] = []
    producer = kit.unreachable_producer(**{"message.timeout.ms": 1000})
    try:
        before = snapshot(kit.zk, kit.zk_root)
        started = time.monotonic()
        producer.produce(topic, key="k", value="v", on_delivery=lambda e, m: reports.append(e))
        assert time.monotonic() - started < 0.5
        assert producer.flush(8) == 0
        assert snapshot(kit.zk, kit.zk_root) == before  # not registered either
    finally:
        producer.close()
    assert [e.code() for e in reports] == [KafkaError._MSG_TIMED_OUT]
