"""The tests' own wait: ``helpers.wait_until`` and the consume loop built on it."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest
from helpers import consume_until, wait_until


def test_returns_the_first_truthy_value_without_waiting_longer() -> None:
    calls = itertools.count(1)
    started = time.monotonic()
    value = wait_until(lambda: (n := next(calls)) >= 3 and f"call {n}", 5, interval=0.01)
    assert value == "call 3"
    assert next(calls) == 4  # not called again once it held
    assert time.monotonic() - started < 1.0


def test_a_timeout_names_what_was_awaited_how_long_and_the_last_value() -> None:
    values = iter(range(1000))
    started = time.monotonic()
    with pytest.raises(AssertionError) as caught:
        wait_until(lambda: [] if next(values) < 999 else None, 0.3, what="the gate", interval=0.02)
    elapsed = time.monotonic() - started
    assert 0.3 <= elapsed < 2.0
    message = str(caught.value)
    assert "waiting for the gate" in message
    assert "timeout 0.3 s" in message
    assert "last value: []" in message


def test_what_may_describe_the_progress_at_the_failure() -> None:
    seen: list[int] = []

    def more() -> bool:
        seen.append(1)
        return False

    with pytest.raises(AssertionError) as caught:
        wait_until(more, 0.2, what=lambda: f"{len(seen)} of 1000 records", interval=0.01)
    # Described when it failed, not when the wait began.
    assert f"waiting for {len(seen)} of 1000 records; last value: False" in str(caught.value)
    assert len(seen) > 1


def test_an_unnamed_wait_names_the_predicate() -> None:
    def gate_open() -> bool:
        return False

    with pytest.raises(AssertionError, match="waiting for gate_open"):
        wait_until(gate_open, 0.05, interval=0.01)


def test_an_exception_from_the_predicate_propagates_at_once() -> None:
    calls: list[int] = []

    def broken() -> bool:
        calls.append(1)
        raise KeyError("no such partition")

    started = time.monotonic()
    with pytest.raises(KeyError, match="no such partition"):
        wait_until(broken, 10, what="never")
    assert calls == [1]
    assert time.monotonic() - started < 1.0


class _Error:
    def __init__(self, text: str) -> None:
        self.text = text

    def code(self) -> int:
        return -1  # not one of the coordinator's transient codes

    def __repr__(self) -> str:
        return self.text


class _Message:
    def __init__(self, value: int, error: Any = None) -> None:
        self._value = value
        self._error = error

    def value(self) -> int:
        return self._value

    def error(self) -> Any:
        return self._error


class _Consumer:
    """Hands out prepared batches, then empty ones (a consumer at the end of its topic)."""

    def __init__(self, batches: list[list[_Message]]) -> None:
        self.batches = list(batches)

    def consume(self, num_messages: int, timeout: float) -> list[_Message]:
        return self.batches.pop(0) if self.batches else []


def test_consume_until_keeps_order_and_sees_each_batch() -> None:
    consumer = _Consumer([[_Message(1), _Message(2)], [], [_Message(3)], [_Message(4)]])
    batches: list[list[int]] = []
    got = consume_until(
        consumer, 3, 5, after_batch=lambda b: batches.append([m.value() for m in b])
    )
    assert [m.value() for m in got] == [1, 2, 3]
    assert batches == [[1, 2], [3]]
    assert len(consumer.batches) == 1  # the fourth batch was not asked for


def test_consume_until_fails_saying_how_many_arrived() -> None:
    consumer = _Consumer([[_Message(1)]])
    with pytest.raises(AssertionError, match=r"waiting for 3 records \(1 arrived\)"):
        consume_until(consumer, 3, 0.2, wait=0.01)


def test_consume_until_fails_on_an_error_event_unless_told_to_skip_it() -> None:
    with pytest.raises(AssertionError, match="broker down"):
        consume_until(_Consumer([[_Message(1, error=_Error("broker down"))]]), 1, 1)
    consumer = _Consumer([[_Message(1, error=_Error("broker down")), _Message(2)]])
    assert [m.value() for m in consume_until(consumer, 1, 1, skip_errors=True)] == [2]
