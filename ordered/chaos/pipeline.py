"""The exactly-once stage of a chaos run (``--eos``): a transactional read-process-write loop.

An ``OrderedConsumer`` (``read_committed``, ``ordered.commit.mode=application``: it never
commits on its own) reads the run's topic; a transactional ``OrderedProducer`` copies
every record (same key, same value) to the output topic; each transaction spans many
polls (about a second) and commits the processed input offsets with
``send_offsets_to_transaction``. A killed process is replaced by one with the same
``transactional.id``, which fences the dead one and aborts its open transaction. Read
with ``read_committed``, the output must hold every input record exactly once, in each
key's order: the checker's ``copies`` (a record at two output offsets) must stay 0.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ordered.consumer import OrderedConsumer
from ordered.producer import OrderedProducer

__all__ = ["run_pipeline"]

_TRANSIENT = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)


class _Transaction:
    def __init__(self, consumer: OrderedConsumer, producer: OrderedProducer) -> None:
        self.consumer, self.producer = consumer, producer
        self.done: dict[tuple[str, int], int] = {}
        self.open = False
        self.began = 0.0
        self.committed = 0

    def add(self, msg: Any, output: str) -> None:
        if not self.open:
            self.producer.begin_transaction()
            self.open, self.began = True, time.monotonic()
        while True:
            try:
                self.producer.produce(output, key=msg.key(), value=msg.value())
                break
            except BufferError:
                self.producer.poll(0.05)
        self.done[(msg.topic(), msg.partition())] = msg.offset() + 1

    def commit(self) -> None:
        if not self.open:
            return
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.done.items()]
        if offsets:
            metadata = self.consumer.consumer_group_metadata()
            self.producer.send_offsets_to_transaction(offsets, metadata, 60)
        self.producer.commit_transaction(60)
        self.done.clear()
        self.open = False
        self.committed += 1


def run_pipeline(
    spec: dict[str, Any], stop: Callable[[], bool], report: Callable[[dict[str, Any]], None]
) -> None:
    """Copy ``spec["topic"]`` to ``spec["output"]`` exactly once until ``stop()``.

    Args:
        spec: The worker spec: cluster, store root, topics, ``group`` and ``txn_id``.
        stop: Polled between batches.
        report: Called about every second with counters (``copied``, ``transactions``).
    """
    common = {
        "bootstrap.servers": spec["bootstrap"],
        "ordered.zookeeper.connect": spec["zookeeper"],
        "ordered.zookeeper.root": spec["root"],
        "ordered.zookeeper.session.timeout.ms": 6000,
    }
    consumer = OrderedConsumer(
        {
            **common,
            "group.id": spec["group"],
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
            "max.partition.fetch.bytes": 8192,
            "ordered.gate.poll.interval.ms": 100,
            "ordered.commit.mode": "application",
        }
    )
    producer = OrderedProducer(
        {**common, "transactional.id": spec["txn_id"], "transaction.timeout.ms": 30000}
    )
    producer.init_transactions(60)
    txn = _Transaction(consumer, producer)
    copied = 0
    next_report = 0.0
    try:
        consumer.subscribe([spec["topic"]], on_revoke=lambda _c, _p: txn.commit())
        while not stop():
            for msg in consumer.consume(200, 0.1):
                if msg.error() is not None:
                    if msg.error().code() in _TRANSIENT:
                        continue
                    raise KafkaException(msg.error())
                txn.add(msg, spec["output"])
                copied += 1
            if txn.open and time.monotonic() - txn.began >= 1.0:
                txn.commit()
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + 1.0
                report({"copied": copied, "transactions": txn.committed})
        txn.commit()
    finally:
        report({"copied": copied, "transactions": txn.committed, "done": True})
        consumer.close()
        producer.close()
