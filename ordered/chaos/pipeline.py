"""The exactly-once stage of a chaos run (``--eos``): a transactional read-process-write loop.

An ``OrderedConsumer`` (``read_committed``, ``ordered.commit.mode=application``: it never
commits on its own) reads the run's topic; a transactional ``OrderedProducer`` copies
every record (same key, same value) to the output topic; each transaction spans many
polls (about a second) and commits the processed input offsets with
``send_offsets_to_transaction``. A killed process is replaced by one with the same
``transactional.id``, which fences the dead one and aborts its open transaction. Read
with ``read_committed``, the output must hold every input record exactly once, in each
key's order: the checker's ``copies`` (a record at two output offsets) must stay 0.

A transaction that cannot commit (the group session expired in a Kafka outage, so
``send_offsets_to_transaction`` fails with ``UNKNOWN_MEMBER_ID``; an error that
requires an abort) is aborted and the consumer rewound to the group's committed offsets,
as in Kafka's and librdkafka's exactly-once examples: its input is read again and goes
into the next transaction. Only a fatal error (the producer fenced) ends the stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from ordered.consumer import OrderedConsumer
from ordered.producer import OrderedProducer

__all__ = ["run_pipeline"]

T = TypeVar("T")

_TRANSIENT = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)
"""Consumer error events librdkafka recovers from by itself: the stage reads on."""

_FENCED = frozenset(
    {KafkaError._FENCED, KafkaError.PRODUCER_FENCED, KafkaError.INVALID_PRODUCER_EPOCH}
)

_ABORTABLE = frozenset(
    {
        # The group moved on without this member (a session that expired, a rebalance):
        # the offsets of its transaction can no longer be committed.
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.FENCED_INSTANCE_ID,
        KafkaError.REBALANCE_IN_PROGRESS,
        # A call that timed out, or a transaction the producer no longer holds open.
        KafkaError._TIMED_OUT,
        KafkaError._STATE,
    }
)

_RETRY = frozenset({*_TRANSIENT, KafkaError._TIMED_OUT})
"""Errors of ``committed()`` (plain codes, never flagged retriable) that are asked again."""


def _abortable(error: KafkaError) -> bool:
    """Whether the open transaction is aborted and its input read again (not fatal)."""
    if error.fatal() or error.code() in _FENCED:
        return False
    return error.txn_requires_abort() or error.retriable() or error.code() in _ABORTABLE


def _retried(call: Callable[[], T], codes: frozenset[int] = frozenset()) -> T:
    """``call()``, made again while it fails with a retriable error (or one of ``codes``).

    librdkafka's contract: ``commit_transaction`` and ``abort_transaction`` that fail
    with a retriable error are called again (once a commit has begun, an abort is
    refused). An error that requires an abort, or is fatal, is raised.
    """
    while True:
        try:
            return call()
        except KafkaException as exc:
            error = exc.args[0]
            if error.fatal() or error.txn_requires_abort():
                raise
            if not (error.retriable() or error.code() in codes):
                raise
            time.sleep(0.1)


class _Transaction:
    def __init__(self, consumer: OrderedConsumer, producer: OrderedProducer) -> None:
        self.consumer, self.producer = consumer, producer
        self.done: dict[tuple[str, int], int] = {}
        self.open = False
        self.began = 0.0
        self.committed = 0
        self.aborted = 0
        self.failed = False  # the stage ends with an error: close()'s revocation skips it

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

    def commit(self, leaving: Iterable[TopicPartition] = ()) -> bool:
        """Commit the open transaction with its input offsets; whether it committed.

        On an error that calls for it, the transaction is aborted instead and the
        consumer rewound (:meth:`abort`); ``leaving``: partitions being revoked, not
        rewound. A fatal error is raised.
        """
        if not self.open:
            return True
        offsets = [TopicPartition(t, p, o) for (t, p), o in self.done.items()]
        try:
            if offsets:
                metadata = self.consumer.consumer_group_metadata()
                self.producer.send_offsets_to_transaction(offsets, metadata, 60)
            _retried(lambda: self.producer.commit_transaction(60))
        except KafkaException as exc:
            if not _abortable(exc.args[0]):
                raise
            self.abort(leaving)
            return False
        self.done.clear()
        self.open = False
        self.committed += 1
        return True

    def abort(self, leaving: Iterable[TopicPartition] = ()) -> None:
        """Abort the open transaction and rewind the consumer to the committed offsets.

        Every record of the aborted transaction is read again. ``leaving``: partitions
        being revoked or lost, left as they are (their next owner starts at the
        committed offsets).
        """
        if self.open:
            _retried(lambda: self.producer.abort_transaction(60))
            self.done.clear()
            self.open = False
            self.aborted += 1
        gone = {(tp.topic, tp.partition) for tp in leaving}
        kept = [tp for tp in self.consumer.assignment() if (tp.topic, tp.partition) not in gone]
        if not kept:
            return
        for tp in _retried(lambda: self.consumer.committed(kept, 60), _RETRY):
            offset = tp.offset if tp.offset >= 0 else OFFSET_BEGINNING  # nothing committed yet
            try:
                self.consumer.seek(TopicPartition(tp.topic, tp.partition, offset))
            except KafkaException as exc:
                if exc.args[0].code() != KafkaError._STATE:
                    raise  # _STATE: not fetched from yet, so it starts at the committed offset

    def revoked(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """``on_revoke``: commit what was processed (abort it on an abortable error)."""
        if not self.failed:
            self.commit(leaving=partitions)

    def lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """``on_lost``: the group moved on; the offsets cannot be committed, so abort."""
        if not self.failed:
            self.abort(leaving=partitions)


def run_pipeline(
    spec: dict[str, Any], stop: Callable[[], bool], report: Callable[[dict[str, Any]], None]
) -> None:
    """Copy ``spec["topic"]`` to ``spec["output"]`` exactly once until ``stop()``.

    Args:
        spec: The worker spec: cluster, store root, topics, ``group`` and ``txn_id``.
        stop: Polled between batches.
        report: Called about every second with counters (``copied``, ``transactions``,
            ``aborted``).
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
        {
            **common,
            "transactional.id": spec["txn_id"],
            "transaction.timeout.ms": 30000,
            "delivery.timeout.ms": 20000,
        }
    )
    producer.init_transactions(60)
    txn = _Transaction(consumer, producer)
    copied = 0
    next_report = 0.0

    def stats() -> dict[str, Any]:
        return {"copied": copied, "transactions": txn.committed, "aborted": txn.aborted}

    try:
        consumer.subscribe([spec["topic"]], on_revoke=txn.revoked, on_lost=txn.lost)
        while not stop():
            for msg in consumer.consume(200, 0.1):
                error = msg.error()
                if error is not None:
                    if error.code() in _TRANSIENT:
                        continue
                    if not _abortable(error):
                        raise KafkaException(error)
                    txn.abort()  # the rest of the batch is read again
                    break
                txn.add(msg, spec["output"])
                copied += 1
            if txn.open and time.monotonic() - txn.began >= 1.0:
                txn.commit()
            if time.monotonic() >= next_report:
                next_report = time.monotonic() + 1.0
                report(stats())
        txn.commit()
    except BaseException:
        txn.failed = True  # the transaction is the replacement's to abort (fencing)
        raise
    finally:
        report({**stats(), "done": True})
        consumer.close()
        producer.close()
