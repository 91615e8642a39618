"""The Spark source's offset read (``Cluster.offsets``, through the admin helper) asks
again when Kafka's answer holds no offset, and when librdkafka finds no leaders.

A chaos run (seed 61530) failed its Spark query with a ``DataLossError`` ("the
partition's end went back to -1001") while a broker restarted: the ListOffsets answer of
one partition held OFFSET_INVALID (-1001) and no error, and the source took it for an end
offset. On three brokers, an admin client whose metadata cache a lagging broker filled
kept answering "No leaders found" for new partitions: only a new client got past it.
Pure logic: stand-in admin clients answer as librdkafka did.
"""

from __future__ import annotations

from collections.abc import Iterator
from concurrent.futures import Future
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import IsolationLevel, KafkaError, KafkaException

import coordinator.kernel.kafka_admin as kafka_admin
from coordinator.kernel.errors import OrderedKafkaError
from spark_source.cluster import Cluster
from spark_source.options import parse_source_options


class _Admin:
    """Answers every ListOffsets with ``answers[try]`` (the last one repeated)."""

    def __init__(self, answers: list[int]) -> None:
        self.answers = answers
        self.tries = 0
        self.isolation: list[Any] = []

    def list_offsets(self, request: dict[Any, Any], **kwargs: Any) -> dict[Any, Future[Any]]:
        offset = self.answers[min(self.tries, len(self.answers) - 1)]
        self.tries += 1
        self.isolation.append(kwargs.get("isolation_level"))
        out: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            future.set_result(SimpleNamespace(offset=offset))
            out[tp] = future
        return out


class _NoLeaders(_Admin):
    """A client whose metadata cache never learns the partitions: "No leaders found"."""

    def __init__(self) -> None:
        super().__init__([])

    def list_offsets(self, request: dict[Any, Any], **_kwargs: Any) -> dict[Any, Future[Any]]:
        self.tries += 1
        out: dict[Any, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            error = KafkaError(
                KafkaError._NOENT, "Failed to query partition leaders: No leaders found"
            )
            future.set_exception(KafkaException(error))
            out[tp] = future
        return out


def _cluster(
    monkeypatch: pytest.MonkeyPatch, clients: list[_Admin], timeout: float, **options: str
) -> Cluster:
    """A driver whose admin helper gets ``clients`` in turn (the first, then each new one)."""
    given: Iterator[_Admin] = iter(clients)
    monkeypatch.setattr(kafka_admin, "AdminClient", lambda _conf: next(given))
    parsed = parse_source_options(
        {"kafka.bootstrap.servers": "127.0.0.1:1", "subscribe": "t", **options}, streaming=True
    )
    return Cluster(parsed, timeout, open_store=False)


def test_an_answer_without_an_offset_is_asked_again(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = _Admin([-1001, -1001, 42])
    ends, starts = _cluster(monkeypatch, [admin], 10.0).offsets({"t": [0]}, starts=False)
    assert ends == {"t": {0: 42}} and starts == {}
    assert admin.tries == 3


def test_no_offset_until_the_deadline_is_a_kafka_error_not_a_loss(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    admin = _Admin([-1001])
    with pytest.raises(OrderedKafkaError, match=r"no end offset of t\[0\]"):
        _cluster(monkeypatch, [admin], 0.5).offsets({"t": [0]}, starts=False)
    assert admin.tries > 1


def test_an_offset_of_zero_is_an_answer(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = _Admin([0])
    assert _cluster(monkeypatch, [admin], 10.0).offsets({"t": [0]}) == (
        {"t": {0: 0}},
        {"t": {0: 0}},
    )


def test_no_leaders_found_is_asked_again_with_a_fresh_client(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    stale, fresh = _NoLeaders(), _Admin([7])
    cluster = _cluster(monkeypatch, [stale, fresh], 3.0)
    assert cluster.offsets({"t": [0, 1]}) == ({"t": {0: 7, 1: 7}}, {"t": {0: 7, 1: 7}})
    # The stale cache would fail the next call the same way: the new client is kept.
    assert cluster.offsets({"t": [2]}, starts=False) == ({"t": {2: 7}}, {})
    assert stale.tries == 2  # the first round's two requests (end and start) only


def test_the_isolation_level_reaches_list_offsets(monkeypatch: pytest.MonkeyPatch) -> None:
    admin = _Admin([5])
    options = {"kafka.isolation.level": "read_committed"}
    _cluster(monkeypatch, [admin], 10.0, **options).offsets({"t": [0]}, starts=False)
    assert admin.isolation == [IsolationLevel.READ_COMMITTED]
