"""``close()`` when the application's ``on_revoke`` raises in it: as confluent's ``close()``.

librdkafka runs the revocation inside ``close()``. A chaos run's exactly-once stage
committed its transaction there; the commit failed (``UNKNOWN_MEMBER_ID``: its group
session had expired in a Kafka blackhole) and ``OrderedConsumer.close()`` raised that
``KafkaException``. confluent's ``Consumer.close()`` does the same, measured here on the
session cluster: it closes the handle, then raises the very exception the callback
raised (any type; the callback ran once), and a second ``close()`` returns ``None``. The
ordered consumer must raise exactly that, and nothing else, and still close its own
parts: ZooKeeper and the log-start probe's client (which the close left open when
confluent's raised).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, KafkaException, TopicPartition
from confluent_kafka import Producer as PlainProducer
from fixtures import CONSUMER_DEFAULTS
from helpers import wait_until
from kit import Kit

from ordered.consumer import OrderedConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _unknown_member() -> BaseException:
    # What the stage's send_offsets_to_transaction raised (librdkafka marks it abortable).
    error = KafkaError(KafkaError.UNKNOWN_MEMBER_ID, "Commit failed", txn_requires_abort=True)
    return KafkaException(error)


def _value_error() -> BaseException:
    return ValueError("on_revoke failed")


RAISES: dict[str, Callable[[], BaseException] | None] = {
    "kafka-exception": _unknown_member,
    "other-exception": _value_error,
    "nothing": None,
}


@dataclass(frozen=True)
class Outcome:
    """What ``close()`` did, in terms both clients can be compared on."""

    raised: type[BaseException] | None
    code: int | None  # the KafkaError's code, for a KafkaException
    same_object: bool  # the exception the callback raised, not a copy or a wrapper
    revokes: int  # on_revoke calls during close()
    closed_after: bool  # poll() then raises RuntimeError("Consumer closed")
    second_close: Any  # what close() returns when called again


def _close_outcome(consumer: Any, topic: str, make: Callable[[], BaseException] | None) -> Outcome:
    raised_in_callback: list[BaseException] = []
    revokes = [0]
    closing = [False]

    def on_revoke(_consumer: Any, _partitions: list[TopicPartition]) -> None:
        if not closing[0]:
            return  # a rebalance while joining: not the situation under test
        revokes[0] += 1
        if make is not None:
            exc = make()
            raised_in_callback.append(exc)
            raise exc

    consumer.subscribe([topic], on_revoke=on_revoke)
    got: list[Any] = []

    def read_some() -> bool:
        got.extend(m for m in consumer.consume(10, 0.2) if m.error() is None)
        return len(consumer.assignment()) == 2 and len(got) >= 4

    wait_until(read_some, 30, what=lambda: f"an assignment and records ({len(got)})")
    # A replay's start asks the log-start probe (the ordered consumer's second client).
    consumer.seek(TopicPartition(topic, 0, OFFSET_BEGINNING))
    closing[0] = True
    raised: BaseException | None = None
    try:
        consumer.close()
    except Exception as exc:  # what close() raises is the subject
        raised = exc
    try:
        consumer.poll(0)
        closed_after = False
    except RuntimeError as exc:
        closed_after = str(exc) == "Consumer closed"
    return Outcome(
        raised=type(raised) if raised is not None else None,
        code=raised.args[0].code() if isinstance(raised, KafkaException) else None,
        same_object=raised is not None and raised_in_callback[:1] == [raised],
        revokes=revokes[0],
        closed_after=closed_after,
        second_close=consumer.close(),
    )


@pytest.fixture
def topic(kit: Kit) -> str:
    name = kit.topic_factory(2)
    producer = PlainProducer({"bootstrap.servers": kit.bootstrap})
    for i in range(20):
        producer.produce(name, key=f"k{i}", value=f"v{i}", partition=i % 2)
    assert producer.flush(30) == 0
    return name


@pytest.mark.parametrize("make", list(RAISES.values()), ids=list(RAISES))
def test_close_raises_what_confluents_close_raises_when_on_revoke_raises(
    kit: Kit, topic: str, make: Callable[[], BaseException] | None
) -> None:
    librdkafka = {k: v for k, v in CONSUMER_DEFAULTS.items() if not k.startswith("ordered.")}
    plain = Consumer(
        {**librdkafka, "bootstrap.servers": kit.bootstrap, "group.id": kit.group_factory()}
    )
    expected = _close_outcome(plain, topic, make)

    ordered: OrderedConsumer = kit.make_consumer(kit.group_factory())
    got = _close_outcome(ordered, topic, make)

    assert got == expected
    # confluent's own answer, as measured (this pins what "the same" is).
    if make is None:
        assert expected.raised is None
    else:
        assert expected.raised is type(make()) and expected.same_object
    assert expected.revokes == 1 and expected.closed_after and expected.second_close is None
    # The ordered consumer's own parts are closed either way.
    assert ordered._closed and not ordered._closing
    assert ordered._probe._client is None, "the log-start probe's client was left open"
    assert not ordered._zk.connected, "the ZooKeeper session was left open"
