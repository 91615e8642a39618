"""The Spark chaos reader's progress relay (``ordered.verify.spark_query._commit``) waits out
an outage.

A chaos run (seed 84129) lost its Spark driver: the relay of a batch's progress to the
query's Kafka group timed out once (30 s) across a broker restart and a cut, the
``foreachBatch`` raised, and the query ended. Pure logic: the relay goes through the
admin helper, whose stand-in client answers as that run's did.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaError, KafkaException

import coordinator.kernel.kafka_admin as kafka_admin
from coordinator.kernel.errors import OrderedKafkaError
from coordinator.kernel.kafka_admin import KafkaAdmin
from ordered.verify import spark_query


class _Client:
    """A stand-in for confluent's AdminClient: each AlterConsumerGroupOffsets fails with
    the next of ``failures``, then succeeds."""

    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.tries = 0

    def alter_consumer_group_offsets(self, request: list[Any], **_kwargs: Any) -> dict[str, Any]:
        self.tries += 1
        group = request[0].group_id
        if self.failures:
            failure = self.failures.pop(0)

            class _Stuck:
                def result(self, timeout: float | None = None) -> None:
                    raise failure

            return {group: _Stuck()}
        done: Future[Any] = Future()
        done.set_result(ConsumerGroupTopicPartitions(group, request[0].topic_partitions))
        return {group: done}


def _admin(monkeypatch: pytest.MonkeyPatch, client: _Client) -> KafkaAdmin:
    monkeypatch.setattr(kafka_admin, "AdminClient", lambda _conf: client)
    return KafkaAdmin("127.0.0.1:1", timeout=30.0)


def test_a_timed_out_or_transient_relay_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    transport = KafkaException(KafkaError(KafkaError._TRANSPORT))
    client = _Client([TimeoutError(), transport])
    spark_query._commit(_admin(monkeypatch, client), "g", "t", {0: 5})
    assert client.tries == 3


def test_any_other_error_is_raised(monkeypatch: pytest.MonkeyPatch) -> None:
    client = _Client([KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))])
    with pytest.raises(OrderedKafkaError) as raised:
        spark_query._commit(_admin(monkeypatch, client), "g", "t", {0: 5})
    assert raised.value.kafka_error is not None
    assert raised.value.kafka_error.code() == KafkaError.GROUP_AUTHORIZATION_FAILED
    assert client.tries == 1
