"""Topic identity (pure): the check rule and how often Kafka is asked."""

from __future__ import annotations

import pickle
from typing import Any

import pytest
from fakes import FakeClock

from coordinator.kernel.errors import ConfigError, TopicIdMismatchError, UsageError
from coordinator.kernel.kafka_admin import UnknownTopicError
from coordinator.kernel.store import TopicRecord
from coordinator.kernel.topic_ids import RECHECK_S, TopicIds, check_topic_id


def record(topic_id: str | None, topic: str = "t") -> TopicRecord:
    return TopicRecord(
        topic=topic,
        topic_id=topic_id,
        initial=2,
        active=2,
        epoch=0,
        pending=None,
        physical=2,
        algorithm="murmur3",
        ordered=True,
        compacted=False,
        adopted_at=1.0,
    )


class FakeKafka:
    """Answers topic ids from a dict and counts the questions."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids
        self.asked: list[str] = []

    def __call__(self, topic: str) -> str:
        self.asked.append(topic)
        if topic not in self.ids:
            raise UnknownTopicError(f"topic {topic} does not exist in Kafka")
        return self.ids[topic]


def test_check_topic_id_names_both_ids() -> None:
    check_topic_id(record("A"), "A")
    check_topic_id(record(None), "B")  # unbound (an older version's record): no check
    check_topic_id(None, "B")  # not adopted
    check_topic_id(record("A"), None)  # Kafka's id unknown
    with pytest.raises(TopicIdMismatchError) as info:
        check_topic_id(record("A"), "B")
    error = info.value
    assert isinstance(error, UsageError)
    assert (error.topic, error.recorded_id, error.kafka_id) == ("t", "A", "B")
    assert "topic id A" in str(error) and "topic id B" in str(error)
    assert "ordered adopt t --replace" in str(error) and "ordered unadopt t" in str(error)
    again = pickle.loads(pickle.dumps(error))
    assert str(again) == str(error) and again.kafka_id == "B"


def test_kafka_is_asked_once_per_topic() -> None:
    kafka = FakeKafka({"t": "A", "u": "C"})
    ids = TopicIds(kafka)
    for _ in range(5):
        assert ids.verify(record("A")) == record("A")
    assert ids.verify(record("C", topic="u")) is not None
    assert kafka.asked == ["t", "u"]
    # Unbound records and topics not adopted never cost a request.
    ids.verify(record(None, topic="v"))
    ids.verify(None)
    assert kafka.asked == ["t", "u"] and ids.requests == 2


def test_a_new_recorded_id_is_checked_again_and_a_mismatch_at_most_once_a_second() -> None:
    clock = FakeClock(100.0)
    kafka = FakeKafka({"t": "A"})
    ids = TopicIds(kafka, clock=clock)
    ids.verify(record("A"))
    # The topic was created again (id B) and re-adopted: the record's new id is asked.
    kafka.ids["t"] = "B"
    clock.now += 5
    ids.verify(record("B"))
    assert kafka.asked == ["t", "t"]
    # A stale record (still A) is refused; retries within RECHECK_S ask nobody.
    for _ in range(3):
        with pytest.raises(TopicIdMismatchError, match=r"topic id A.*topic id B"):
            ids.verify(record("A"))
    assert kafka.asked == ["t", "t"]
    clock.now += RECHECK_S
    with pytest.raises(TopicIdMismatchError):
        ids.verify(record("A"))
    assert kafka.asked == ["t", "t", "t"]


def test_a_deleted_topic_is_named_as_such() -> None:
    ids = TopicIds(FakeKafka({}))
    with pytest.raises(UnknownTopicError, match=r"adopted as topic id A.*was deleted"):
        ids.verify(record("A"))


def test_for_client_keeps_only_connection_settings() -> None:
    made: list[dict[str, Any]] = []

    def describe(bootstrap: str, extra: dict[str, Any], topic: str, timeout_s: float) -> str:
        made.append({"bootstrap": bootstrap, "timeout": timeout_s, **extra})
        return "A"

    import coordinator.kernel.topic_ids as module

    original = module._describe_topic_id
    module._describe_topic_id = describe  # type: ignore[assignment]
    try:
        ids = TopicIds.for_client(
            {
                "bootstrap.servers": "127.0.0.1:1",
                "security.protocol": "SASL_SSL",
                "sasl.mechanism": "PLAIN",
                "client.id": "c",
                "on_delivery": print,
                "group.id": "g",
                "linger.ms": 5,
            }
        )
        assert made == []  # nothing connects before the first check
        ids.verify(record("A"))
    finally:
        module._describe_topic_id = original
    assert made == [
        {
            "timeout": 5.0,
            "bootstrap": "127.0.0.1:1",
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": "PLAIN",
            "client.id": "c",
        }
    ]
    with pytest.raises(ConfigError, match=r"bootstrap\.servers"):
        TopicIds.for_client({}).verify(record("A"))


def test_answers_now_says_whether_verify_would_ask_kafka() -> None:
    # The producer holds a topic's first records exactly when this is False.
    clock = FakeClock(100.0)
    kafka = FakeKafka({"t": "A"})
    ids = TopicIds(kafka, clock=clock)
    assert ids.answers_now(None) and ids.answers_now(record(None))  # nothing to ask
    assert not ids.answers_now(record("A"))  # never asked
    ids.verify(record("A"))
    assert ids.answers_now(record("A"))  # known and the same
    assert ids.answers_now(record("B"))  # another id within RECHECK_S: refused from memory
    clock.now += RECHECK_S
    assert not ids.answers_now(record("B"))  # a re-adopted id: asked again...
    kafka.ids["t"] = "B"
    ids.verify(record("B"))
    assert ids.answers_now(record("A"))  # ...a mismatch found just now is answered...
    with pytest.raises(TopicIdMismatchError):
        ids.verify(record("A"))
    clock.now += RECHECK_S
    assert not ids.answers_now(record("A"))  # ...until RECHECK_S has passed
    assert kafka.asked == ["t", "t"]  # answers_now itself never asks
