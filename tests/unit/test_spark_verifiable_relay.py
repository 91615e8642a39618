"""The Spark chaos reader's progress relay (``ordered.verify.spark_query._commit``) waits out
an outage.

A chaos run (seed 84129) lost its Spark driver: the relay of a batch's progress to the
query's Kafka group timed out once (30 s) across a broker restart and a cut, the
``foreachBatch`` raised, and the query ended. Pure logic: a stand-in admin client answers
as that run's did.
"""

from __future__ import annotations

from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ordered.verify import spark_query


class _Admin:
    def __init__(self, failures: list[BaseException]) -> None:
        self.failures = failures
        self.tries = 0

    def alter_consumer_group_offsets(self, request: list[Any]) -> dict[str, Any]:
        self.tries += 1
        group = request[0].group_id
        if self.failures:
            failure = self.failures.pop(0)

            class _Stuck:
                def result(self, _timeout: float) -> None:
                    raise failure

            return {group: _Stuck()}
        done: Future[None] = Future()
        done.set_result(None)
        return {group: done}


def test_a_timed_out_or_transient_relay_is_made_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("time.sleep", lambda _s: None)
    transport = KafkaException(KafkaError(KafkaError._TRANSPORT))
    admin = _Admin([TimeoutError(), transport])
    spark_query._commit(admin, "g", [TopicPartition("t", 0, 5)])  # type: ignore[arg-type]
    assert admin.tries == 3


def test_any_other_error_is_raised() -> None:
    admin = _Admin([KafkaException(KafkaError(KafkaError.GROUP_AUTHORIZATION_FAILED))])
    with pytest.raises(KafkaException):
        spark_query._commit(admin, "g", [TopicPartition("t", 0, 5)])  # type: ignore[arg-type]
    assert admin.tries == 1
