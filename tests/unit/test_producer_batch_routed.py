"""``produce_batch``'s steady-state path (``ordered.producer.batch.send_routed``): each
record in the partition ``produce`` would give it, one confluent call per partition in the
batch's order, and every batch confluent would refuse left to the record-by-record path."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest

from ordered.producer.batch import send_routed


def _route(**over: Any) -> Any:
    fields: dict[str, Any] = {
        "place": lambda key: len(key) % 3,
        "round_robin": itertools.cycle([0, 1, 2]),
        "routable": True,
        "compacted": False,
        "headers": None,
    }
    return SimpleNamespace(**{**fields, **over})


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[str, list[dict[str, Any]], int, Any]] = []

    def __call__(self, topic: str, messages: list[dict[str, Any]], partition: int, cb: Any) -> int:
        self.calls.append((topic, messages, partition, cb))
        return len(messages)


def test_records_go_by_partition_in_batch_order_with_the_callback_in_use() -> None:
    sent = Recorder()
    messages = [{"key": b"x" * n, "value": b"v%d" % i} for i, n in enumerate([1, 2, 4, 3, 1])]
    messages.append({"value": b"unkeyed"})
    on_delivery = object()
    assert send_routed(sent, _route(), "t", messages, None, on_delivery) == 6
    by_partition = {p: [m["value"] for m in ms] for _, ms, p, _ in sent.calls}
    assert by_partition == {1: [b"v0", b"v2", b"v4"], 2: [b"v1"], 0: [b"v3", b"unkeyed"]}
    # confluent drops ``on_delivery`` when ``callback`` is passed at all, even as None.
    assert {cb for *_, cb in sent.calls} == {on_delivery}
    assert all(m.keys() <= {"key", "value"} for _, ms, _, _ in sent.calls for m in ms)


@pytest.mark.parametrize(
    "message",
    [
        {"key": b"k", "value": b"v", "partition": 1},
        {"key": b"k", "value": b"v", "headers": {"h": b"1"}},
        {"key": b"k", "value": b"v", "timestamp": 5},
        {"key": 7, "value": b"v"},
        {"key": b"k", "value": 7},
        "not a dict",
    ],
)
def test_a_record_it_cannot_send_as_produce_would_sends_nothing(message: Any) -> None:
    sent = Recorder()
    messages = [{"key": b"first", "value": b"v"}, message]
    assert send_routed(sent, _route(), "t", messages, None, None) is None
    assert sent.calls == []


@pytest.mark.parametrize(
    "over",
    [{"place": None}, {"routable": False}, {"compacted": True}, {"headers": [("e", b"1")]}],
)
def test_a_route_with_per_record_work_is_left_to_produce(over: dict[str, Any]) -> None:
    sent = Recorder()
    assert send_routed(sent, _route(**over), "t", [{"key": b"k"}], None, None) is None
    assert sent.calls == []
