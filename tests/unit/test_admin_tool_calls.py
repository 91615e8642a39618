"""The admin helper's calls for the tools: CreateTopics (returning once the metadata shows
every partition), DeleteTopics, AlterConsumerGroupOffsets and the broker count. Pure
logic: a stand-in for confluent's ``AdminClient`` answers as librdkafka does.
"""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException, TopicPartition

import coordinator.kernel.kafka_admin as kafka_admin
from coordinator.kernel.errors import OrderedKafkaError, UnknownTopicError
from coordinator.kernel.kafka_admin import KafkaAdmin


def _done(value: Any = None, error: KafkaError | None = None) -> Future[Any]:
    future: Future[Any] = Future()
    if error is None:
        future.set_result(value)
    else:
        future.set_exception(KafkaException(error))
    return future


class _Client:
    """Topics show in the metadata only after ``lag`` metadata requests."""

    def __init__(self, lag: int = 0) -> None:
        self.lag = lag
        self.created: dict[str, int] = {}
        self.metadata_asks = 0

    def create_topics(self, new: list[Any], **_kwargs: Any) -> dict[str, Future[Any]]:
        out = {}
        for topic in new:
            if topic.topic in self.created:
                out[topic.topic] = _done(error=KafkaError(KafkaError.TOPIC_ALREADY_EXISTS))
            else:
                self.created[topic.topic] = topic.num_partitions
                out[topic.topic] = _done()
        return out

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        self.metadata_asks += 1
        shown = self.created if self.metadata_asks > self.lag else {}
        topics = {
            name: SimpleNamespace(partitions=dict.fromkeys(range(count)), error=None)
            for name, count in shown.items()
            if topic is None or name == topic
        }
        return SimpleNamespace(topics=topics, brokers={1: None, 2: None, 3: None})

    def delete_topics(self, names: list[str], **_kwargs: Any) -> dict[str, Future[Any]]:
        missing = KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART)
        return {n: _done() if self.created.pop(n, None) else _done(error=missing) for n in names}

    def alter_consumer_group_offsets(self, request: list[Any], **_kwargs: Any) -> Any:
        group = request[0].group_id
        answered = [
            TopicPartition(tp.topic, tp.partition, tp.offset) if tp.partition != 9 else _refused(tp)
            for tp in request[0].topic_partitions
        ]
        return {group: _done(ConsumerGroupTopicPartitions(group, answered))}


def _refused(tp: Any) -> Any:
    return SimpleNamespace(
        topic=tp.topic, partition=tp.partition, error=KafkaError(KafkaError.OFFSET_OUT_OF_RANGE)
    )


@pytest.fixture
def client(monkeypatch: pytest.MonkeyPatch) -> _Client:
    made = _Client(lag=3)
    monkeypatch.setattr(kafka_admin, "AdminClient", lambda _conf: made)
    return made


def test_created_topics_are_in_the_metadata_when_the_call_returns(client: _Client) -> None:
    admin = KafkaAdmin("127.0.0.1:1", timeout=5.0)
    admin.create_topics(["a", "b"], 3)
    assert client.metadata_asks > client.lag  # asked again until they showed
    assert admin.topic_partitions(["a", "b"]) == {"a": [0, 1, 2], "b": [0, 1, 2]}


def test_a_topic_that_exists_is_refused(client: _Client) -> None:
    admin = KafkaAdmin("127.0.0.1:1", timeout=5.0)
    admin.create_topics(["a"], 1)
    with pytest.raises(OrderedKafkaError, match="cannot create topic"):
        admin.create_topics(["a"], 1)


def test_topics_the_metadata_never_shows_fail_at_the_timeout(client: _Client) -> None:
    client.lag = 10**9
    with pytest.raises(OrderedKafkaError, match="not in the metadata"):
        KafkaAdmin("127.0.0.1:1", timeout=0.3).create_topics(["a"], 1)


def test_deleting_a_missing_topic_is_a_usage_error(client: _Client) -> None:
    admin = KafkaAdmin("127.0.0.1:1", timeout=5.0)
    admin.create_topics(["a"], 1)
    admin.delete_topics(["a"])
    with pytest.raises(UnknownTopicError):
        admin.delete_topics(["a"])


def test_group_offsets_are_set_and_refused_partitions_returned(client: _Client) -> None:
    admin = KafkaAdmin("127.0.0.1:1", timeout=5.0)
    refused = admin.alter_group_offsets("g", {("t", 0): 5, ("t", 9): 7})
    assert list(refused) == [("t", 9)]
    assert refused["t", 9].code() == KafkaError.OFFSET_OUT_OF_RANGE
    assert admin.broker_count() == 3


def test_a_group_answer_that_does_not_come_is_a_timed_out_kafka_error(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    class _Stuck:
        def result(self, timeout: float | None = None) -> None:
            raise TimeoutError

    stuck = SimpleNamespace(alter_consumer_group_offsets=lambda request, **_k: {"g": _Stuck()})
    monkeypatch.setattr(kafka_admin, "AdminClient", lambda _conf: stuck)
    with pytest.raises(OrderedKafkaError) as raised:
        KafkaAdmin("127.0.0.1:1").alter_group_offsets("g", {("t", 0): 1})
    assert raised.value.kafka_error is not None
    assert raised.value.kafka_error.code() == KafkaError._TIMED_OUT
