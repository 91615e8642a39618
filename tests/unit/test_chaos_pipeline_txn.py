"""The exactly-once stage's transaction: an abortable error aborts, rewinds and goes on.

A chaos run's stage crashed when its group session expired during a Kafka blackhole:
``send_offsets_to_transaction`` failed with ``UNKNOWN_MEMBER_ID`` (librdkafka marks it
``txn_requires_abort``) and the error left the stage, from the main loop and from
``on_revoke`` inside ``close()``. As in Kafka's and librdkafka's exactly-once examples,
such an error now aborts the transaction and rewinds the consumer to the group's
committed offsets; the next record begins a new transaction. Fatal errors still end
the stage.

The fakes stand for the two clients' transactional calls only: this is the control flow
of ``_Transaction``, no Kafka in it.
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

from ordered.chaos.pipeline import _Transaction

TOPIC = "in"
OUTPUT = "out"


class _Msg:
    def __init__(self, partition: int, offset: int) -> None:
        self._partition, self._offset = partition, offset

    def topic(self) -> str:
        return TOPIC

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._offset

    def key(self) -> bytes:
        return b"k"

    def value(self) -> bytes:
        return f"{self._partition}:{self._offset}".encode()


class _Producer:
    """Records the transactional calls; ``fail[name]``: errors the next calls raise."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.fail: dict[str, list[KafkaError]] = {}

    def _call(self, name: str) -> None:
        self.calls.append(name)
        errors = self.fail.get(name)
        if errors:
            raise KafkaException(errors.pop(0))

    def begin_transaction(self) -> None:
        self._call("begin")

    def produce(self, topic: str, key: bytes, value: bytes) -> None:
        self._call("produce")

    def poll(self, timeout: float) -> int:
        return 0

    def send_offsets_to_transaction(
        self, offsets: list[Any], metadata: Any, timeout: float
    ) -> None:
        self._call("send_offsets")
        self.sent = [(tp.partition, tp.offset) for tp in offsets]

    def commit_transaction(self, timeout: float) -> None:
        self._call("commit")

    def abort_transaction(self, timeout: float) -> None:
        self._call("abort")


class _Consumer:
    """Two assigned partitions; partition 0 has a committed offset, partition 1 none."""

    def __init__(self) -> None:
        self.assigned = [TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)]
        self.committed_at = {0: 5, 1: -1001}  # -1001: OFFSET_INVALID, nothing committed
        self.sought: list[tuple[int, int]] = []
        self.seek_error: KafkaError | None = None
        self.committed_fail: list[KafkaError] = []

    def assignment(self) -> list[TopicPartition]:
        return list(self.assigned)

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[TopicPartition]:
        if self.committed_fail:
            raise KafkaException(self.committed_fail.pop(0))
        return [
            TopicPartition(tp.topic, tp.partition, self.committed_at[tp.partition])
            for tp in partitions
        ]

    def seek(self, tp: TopicPartition) -> None:
        if self.seek_error is not None:
            raise KafkaException(self.seek_error)
        self.sought.append((tp.partition, tp.offset))

    def consumer_group_metadata(self) -> object:
        return object()


def _open(records: int = 3) -> tuple[_Transaction, _Producer, _Consumer]:
    producer, consumer = _Producer(), _Consumer()
    txn = _Transaction(consumer, producer)  # type: ignore[arg-type]
    for i in range(records):
        txn.add(_Msg(i % 2, 10 + i), OUTPUT)
    assert txn.open
    return txn, producer, consumer


# How librdkafka reports what the group's move-on does to a transaction's offsets.
ABORTABLE = {
    "unknown member, requires abort": KafkaError(
        KafkaError.UNKNOWN_MEMBER_ID, "Commit failed", txn_requires_abort=True
    ),
    "unknown member, plain code": KafkaError(KafkaError.UNKNOWN_MEMBER_ID),
    "illegal generation": KafkaError(KafkaError.ILLEGAL_GENERATION),
    "rebalance in progress": KafkaError(KafkaError.REBALANCE_IN_PROGRESS),
    "fenced instance id": KafkaError(KafkaError.FENCED_INSTANCE_ID),
    "session timed out": KafkaError(KafkaError._TIMED_OUT, retriable=True),
    "state": KafkaError(KafkaError._STATE),
    "retriable": KafkaError(KafkaError.NOT_COORDINATOR, retriable=True),
}


@pytest.mark.parametrize("error", list(ABORTABLE.values()), ids=list(ABORTABLE))
def test_an_abortable_error_at_send_offsets_aborts_rewinds_and_goes_on(error: KafkaError) -> None:
    txn, producer, consumer = _open()
    producer.fail["send_offsets"] = [error]

    assert txn.commit() is False  # no exception: the stage goes on

    assert producer.calls[-2:] == ["send_offsets", "abort"]
    assert "commit" not in producer.calls
    assert not txn.open and not txn.done
    assert (txn.committed, txn.aborted) == (0, 1)
    # Back to what the group committed; nothing committed yet: the partition's start.
    assert consumer.sought == [(0, 5), (1, OFFSET_BEGINNING)]

    txn.add(_Msg(0, 5), OUTPUT)  # the input read again goes into a new transaction
    assert txn.open and producer.calls[-2:] == ["begin", "produce"]
    assert txn.commit() is True
    assert producer.sent == [(0, 6)]
    assert (txn.committed, txn.aborted) == (1, 1)


def test_an_error_that_requires_an_abort_at_commit_aborts() -> None:
    txn, producer, consumer = _open()
    producer.fail["commit"] = [
        KafkaError(KafkaError._TIMED_OUT, "commit timed out", txn_requires_abort=True)
    ]
    assert txn.commit() is False
    assert producer.calls[-3:] == ["send_offsets", "commit", "abort"]
    assert consumer.sought == [(0, 5), (1, OFFSET_BEGINNING)]


def test_a_retriable_commit_is_called_again_not_aborted() -> None:
    # librdkafka refuses an abort once a commit has begun: the commit is retried.
    txn, producer, _consumer = _open()
    producer.fail["commit"] = [KafkaError(KafkaError._TIMED_OUT, retriable=True)]
    assert txn.commit() is True
    assert producer.calls[-3:] == ["send_offsets", "commit", "commit"]
    assert (txn.committed, txn.aborted) == (1, 0)


def test_a_retriable_abort_is_called_again() -> None:
    txn, producer, _consumer = _open()
    producer.fail["send_offsets"] = [KafkaError(KafkaError.UNKNOWN_MEMBER_ID)]
    producer.fail["abort"] = [KafkaError(KafkaError._TIMED_OUT, retriable=True)]
    assert txn.commit() is False
    assert producer.calls[-3:] == ["send_offsets", "abort", "abort"]
    assert txn.aborted == 1


FATAL = {
    "fenced": KafkaError(KafkaError._FENCED, "fenced", fatal=True),
    "producer fenced, code only": KafkaError(KafkaError.PRODUCER_FENCED),
    "fatal, even if it says abort": KafkaError(
        KafkaError.UNKNOWN_MEMBER_ID, fatal=True, txn_requires_abort=True
    ),
    "not abortable": KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED),
}


@pytest.mark.parametrize("error", list(FATAL.values()), ids=list(FATAL))
def test_a_fatal_error_ends_the_stage(error: KafkaError) -> None:
    txn, producer, consumer = _open()
    producer.fail["send_offsets"] = [error]
    with pytest.raises(KafkaException) as raised:
        txn.commit()
    assert raised.value.args[0] is error
    assert "abort" not in producer.calls and not consumer.sought


def test_on_revoke_aborts_instead_of_raising_and_leaves_the_revoked_partitions() -> None:
    txn, producer, consumer = _open()
    producer.fail["send_offsets"] = [
        KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "Commit failed", txn_requires_abort=True)
    ]
    txn.revoked(consumer, [TopicPartition(TOPIC, 1)])  # raises nothing into librdkafka
    assert producer.calls[-1] == "abort" and txn.aborted == 1
    assert consumer.sought == [(0, 5)]  # the kept partition is read again

    txn.add(_Msg(0, 5), OUTPUT)
    txn.revoked(consumer, consumer.assignment())  # all of them: nothing is rewound
    assert producer.calls[-1] == "commit" and txn.committed == 1
    assert consumer.sought == [(0, 5)]


def test_on_lost_aborts_without_trying_to_commit() -> None:
    txn, producer, consumer = _open()
    txn.lost(consumer, consumer.assignment())
    assert producer.calls[-1] == "abort" and "send_offsets" not in producer.calls
    assert consumer.sought == [] and txn.aborted == 1


def test_a_failed_stage_leaves_its_transaction_to_the_next_incarnation() -> None:
    txn, producer, consumer = _open()
    txn.failed = True
    calls = list(producer.calls)
    txn.revoked(consumer, consumer.assignment())
    txn.lost(consumer, consumer.assignment())
    assert producer.calls == calls and txn.open


def test_a_partition_not_fetched_yet_is_not_sought() -> None:
    # A partition whose fetch has not started refuses a seek (_STATE); it starts at
    # the committed offset anyway.
    txn, producer, consumer = _open()
    consumer.seek_error = KafkaError(KafkaError._STATE, "Erroneous state")
    producer.fail["send_offsets"] = [KafkaError(KafkaError.UNKNOWN_MEMBER_ID)]
    assert txn.commit() is False and txn.aborted == 1


def test_committed_offsets_are_asked_again_after_a_timeout() -> None:
    txn, producer, consumer = _open()
    consumer.committed_fail = [KafkaError(KafkaError._TIMED_OUT)]  # a plain code, as returned
    producer.fail["send_offsets"] = [KafkaError(KafkaError.UNKNOWN_MEMBER_ID)]
    assert txn.commit() is False
    assert consumer.sought == [(0, 5), (1, OFFSET_BEGINNING)]
