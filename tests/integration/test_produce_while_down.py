"""The first ``produce()`` to an adopted topic while Kafka is down is queued, as confluent's.

The topic-id check (a layout applies only to the topic id it was adopted for) asks Kafka;
while it cannot answer, the producer holds the topic's records (``ordered.producer.held``)
and ``produce()`` returns at once. Against real servers: a private cluster whose broker is
stopped and started again (the records are delivered, every key in order, also those
produced while the held ones are handed over), and the session's cluster with a producer
pointed at a port nothing listens on (Kafka never answers: the reports fail with
``_MSG_TIMED_OUT`` after ``message.timeout.ms``; ``flush(timeout)`` returns the count left).
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaError
from fixtures import run_in_background, snapshot
from helpers import create_topic, unique, wait_until
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import OrderedProducer
from ordered.devcluster.cluster import ClusterState
from ordered.devcluster.process import is_alive
from ordered.devcluster.restart import restart_node

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

FIRST_CALL_S = 0.05
"""How long the first ``produce()`` may take while Kafka is down (confluent: at once)."""


def read_all(bootstrap: str, topic: str, count: int) -> list[tuple[str, int]]:
    """Every record of ``topic`` as (key, value), per partition in offset order."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    got: list[tuple[str, int]] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 90
        while len(got) < count and time.monotonic() < deadline:
            for message in consumer.consume(500, 0.5):
                if message.error() is None:
                    got.append((message.key().decode(), int(message.value())))
    finally:
        consumer.close()
    return got


def test_first_produce_while_the_broker_is_down_is_queued_then_delivered_in_order(
    private_cluster: tuple[ClusterState, Path],
) -> None:
    state, directory = private_cluster
    bootstrap, zookeeper = state.bootstrap_servers, state.zookeeper_connect
    topic = create_topic(bootstrap, unique("down"), 3)
    client = start_client(make_client(zookeeper), 10)
    try:
        record = Controller(LayoutStore(client, "/down"), KafkaAdmin(bootstrap)).adopt(topic)
    finally:
        close_client(client)
    assert record.topic_id is not None  # bound: the first use must ask Kafka
    producer = OrderedProducer(
        {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zookeeper,
            "ordered.zookeeper.root": "/down",
            "message.timeout.ms": 120000,
            "linger.ms": 5,
            "log_level": 0,
        }
    )
    errors: list[Any] = []

    def report(err: Any, _msg: Any) -> None:
        if err is not None:
            errors.append(err)

    keys = [f"k{i}" for i in range(20)]
    sent: dict[str, int] = {}

    def send(i: int) -> None:
        key = keys[i % len(keys)]
        sent[key] = sent.get(key, 0) + 1
        producer.produce(topic, key=key, value=str(sent[key]), on_delivery=report)

    try:
        broker = next(p for p in state.processes if p.role == "broker-1")
        restarting = run_in_background(restart_node, directory, "broker-1", down_s=6.0)
        wait_until(lambda: not is_alive(broker), 30, what="the broker stopped")
        started = time.monotonic()
        send(0)
        took = time.monotonic() - started
        assert took < FIRST_CALL_S, f"the first produce() took {took:.3f} s"
        for i in range(1, 300):
            send(i)
        # Held, and counted as confluent counts its queue (librdkafka's count also
        # holds its own events: "all brokers down" and the like).
        assert len(producer) >= 300
        assert producer.flush(0.2) >= 300  # nothing can leave while Kafka is down
        restarting.join(90)
        # Keep producing through the hand-over: no later record may overtake a held one.
        for i in range(300, 3000):
            send(i)
            if i % 100 == 0:
                producer.poll(0)
                time.sleep(0.002)
        assert producer.flush(90) == 0
        assert errors == []
    finally:
        producer.close()
    got = read_all(bootstrap, topic, 3000)
    assert len(got) == 3000
    for key in keys:
        assert [v for k, v in got if k == key] == list(range(1, sent[key] + 1)), key


def test_held_records_time_out_when_kafka_never_answers(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    reports: list[tuple[Any, Any, float]] = []
    producer = kit.unreachable_producer(
        **{
            "message.timeout.ms": 1500,
            "on_delivery": lambda err, msg: reports.append((err, msg, time.monotonic())),
        }
    )
    try:
        before = snapshot(kit.zk, kit.zk_root)
        started = time.monotonic()
        producer.produce(topic, key="k0", value="0")
        took = time.monotonic() - started
        assert took < FIRST_CALL_S, f"the first produce() took {took:.3f} s"
        own: list[Any] = []
        producer.produce(topic, key="k1", value="1", callback=lambda e, m: own.append(e))
        producer.produce(topic, key="k2", value="2")
        # Counted as queued (librdkafka's own count adds its events: brokers down).
        assert len(producer) >= 3
        assert len(producer._held) == 3
        assert producer.flush(0.3) >= 3  # confluent's flush returns the count left
        assert snapshot(kit.zk, kit.zk_root) == before  # unchecked: not registered
        # A poll returns once a report is served, not after its whole timeout.
        while not reports and time.monotonic() - started < 10:
            producer.poll(10)
        returned = time.monotonic()
        assert reports, "no report within 10 s"
        assert 1.4 <= reports[0][2] - started < 3.0  # after message.timeout.ms
        assert returned - reports[0][2] < 0.5
        assert producer.flush(10) == 0
        assert len(producer._held) == 0
    finally:
        producer.close()
    assert [m.key() for _e, m, _t in reports] == [b"k0", b"k2"]  # in produce() order
    assert [m.value() for _e, m, _t in reports] == [b"0", b"2"]
    assert all(m.topic() == topic for _e, m, _t in reports)
    assert [e.code() for e, _m, _t in reports] == [KafkaError._MSG_TIMED_OUT] * 2
    assert [e.code() for e in own] == [KafkaError._MSG_TIMED_OUT]  # its own callback


def test_first_records_of_a_checked_topic_are_held_then_sent_in_order(kit: Kit) -> None:
    # Kafka up: the first produce() still returns before the check (which runs in the
    # background). The application keeps producing as fast as it can while the held
    # records are handed over (many are held by then, so the hand-over takes a while and
    # the GIL switches to this thread during it): none of its later records may overtake
    # a held one of the same key.
    topic = kit.adopted_topic(4)
    producer = kit.make_producer(**{"queue.buffering.max.messages": 1000000})
    keys = [f"k{i}" for i in range(16)]
    sent: dict[str, int] = {}

    def send(i: int) -> None:
        key = keys[i % len(keys)]
        sent[key] = sent.get(key, 0) + 1
        producer.produce(topic, key=key, value=str(sent[key]))
        for _ in range(100):  # the application's own work: mostly outside produce()
            pass

    started = time.monotonic()
    send(0)
    assert time.monotonic() - started < FIRST_CALL_S
    total = 1
    # layout() reads the route without the producer's lock (topic_state() would wait for
    # the hand-over, which holds it): the loop sees the route as soon as it is applied.
    while producer.layout(topic) is None and total < 300000:
        send(total)
        total += 1
    held_at_release = total
    for _ in range(20000):
        send(total)
        total += 1
    assert held_at_release > 1000, held_at_release  # the hand-over overlapped the sends
    assert producer.flush(120) == 0
    got = read_all(kit.bootstrap, topic, total)
    assert len(got) == total
    for key in keys:
        assert [v for k, v in got if k == key] == list(range(1, sent[key] + 1)), key
    layout = producer.layout(topic)
    assert layout is not None and layout.active == 4
