"""The Spark source's offset read (``Cluster.offsets``) asks again when Kafka's answer
holds no offset.

A chaos run (seed 61530) failed its Spark query with a ``DataLossError`` ("the
partition's end went back to -1001") while a broker restarted: the ListOffsets answer of
one partition held OFFSET_INVALID (-1001) and no error, and the source took it for an end
offset. Pure logic: a stand-in admin client answers as librdkafka did.
"""

from __future__ import annotations

from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.client.errors import OrderedKafkaError
from spark_source.cluster import Cluster


class _Admin:
    def __init__(self, answers: list[int]) -> None:
        self.answers = answers  # the end offset of each try, the last one repeated
        self.tries = 0

    def list_offsets(self, request: dict[Any, Any], **_kwargs: Any) -> dict[Any, Future[Any]]:
        offset = self.answers[min(self.tries, len(self.answers) - 1)]
        self.tries += 1
        out: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            future.set_result(SimpleNamespace(offset=offset))
            out[tp] = future
        return out


def _cluster(admin: _Admin, timeout: float) -> Cluster:
    cluster = Cluster.__new__(Cluster)
    cluster._admin = admin
    cluster._timeout = timeout
    cluster._isolation = None
    cluster._options = SimpleNamespace(bootstrap_servers="127.0.0.1:1")  # type: ignore[assignment]
    return cluster


def test_an_answer_without_an_offset_is_asked_again() -> None:
    admin = _Admin([-1001, -1001, 42])
    ends, starts = _cluster(admin, 10.0).offsets({"t": [0]}, starts=False)
    assert ends == {"t": {0: 42}} and starts == {}
    assert admin.tries == 3


def test_no_offset_until_the_deadline_is_a_kafka_error_not_a_loss() -> None:
    admin = _Admin([-1001])
    with pytest.raises(OrderedKafkaError, match=r"no end offset of t\[0\]"):
        _cluster(admin, 0.5).offsets({"t": [0]}, starts=False)
    assert admin.tries > 1


def test_an_offset_of_zero_is_an_answer() -> None:
    admin = _Admin([0])
    assert _cluster(admin, 10.0).offsets({"t": [0]}) == (
        {"t": {0: 0}},
        {"t": {0: 0}},
    )
