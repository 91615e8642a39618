"""``consume(n, timeout)``'s fill loop (``CallPath.consume``) on fakes of its parts: pure logic.

The real-cluster behaviour (a batch filled until ``n`` or the timeout, as confluent's) is
in ``tests/integration/test_consumer_calls.py``; here, the two reasons a call ends early.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from coordinator.client.clock import SYSTEM_CLOCK
from ordered.consumer.calls import CallPath


class _Ready(list[Any]):
    """The fetcher's checked records (a list is enough for the loop)."""

    def push_front(self, batch: list[Any]) -> None:
        self[:0] = batch


class _Fetcher:
    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches
        self.ready = _Ready()
        self.taken_last = None
        self.waits = True  # nothing fetched ahead: every fetch may wait
        self.moved = 0  # partitions taken away so far (a revocation bumps it)
        self.notes: list[Any] = []  # what checks found (none here)

    def fetch(
        self, num: int, timeout: float, single: bool, ahead: int | None = None, judge: Any = None
    ) -> None:
        if self.batches:
            self.ready.extend(self.batches.pop(0))

    def take(self, num: int) -> list[str]:
        out = self.ready[:num]
        del self.ready[:num]
        return out

    def take_held(self, parts: Any) -> list[str]:
        return []  # no gate holds a partition here


class _Filter:
    single = None  # no served batches: every record goes through filter()

    def filter(self, batch: list[str], from_stash: bool = False, last: Any = None) -> list[str]:
        return list(batch)

    def judge_covered(self, batch: list[str], covered: Any) -> None:
        return None  # never passes: every batch goes through ready

    def store_call(self) -> None:
        pass  # the fake delivers nothing: no offsets to store


class _Upkeep:
    def __init__(self, fetcher: _Fetcher, fail_at: int = 0, announce_after: int = 0) -> None:
        self.fetcher = fetcher
        self.filter = _Filter()
        self.services = 0
        self.fail_at = fail_at  # the service step raises at this call (1-based; 0: never)
        self.announce_after = announce_after  # an announcement is due from this call on

    def announcing(self) -> bool:
        return bool(self.announce_after) and self.services >= self.announce_after

    def service(self) -> None:
        self.services += 1
        if self.services == self.fail_at:
            raise RuntimeError("a callback raised")

    def unstash(self) -> bool:
        return False

    def take_stash(self, limit: int) -> list[str]:
        return []

    def slice(self, deadline: float | None) -> float:
        return 0.0


def _path(upkeep: _Upkeep) -> CallPath:
    # Never quiet (the fake service step does not say until when): it runs every time.
    core = SimpleNamespace(
        quiet_until=0.0, unquiet=lambda: None, call_stores=None, parts={}, clock=SYSTEM_CLOCK
    )
    return CallPath(core, upkeep, lambda: None)  # type: ignore[arg-type]


def test_records_fill_the_call_across_fetches() -> None:
    upkeep = _Upkeep(_Fetcher([["a", "b"], ["c"], ["d", "e", "f"]]))
    assert _path(upkeep).consume(5, 1.0) == ["a", "b", "c", "d", "e"]


def test_a_callback_error_after_delivery_returns_the_records_then_raises() -> None:
    """The records delivered before the error are returned; the next call raises it."""
    upkeep = _Upkeep(_Fetcher([["a", "b"], ["c"]]), fail_at=2)
    path = _path(upkeep)
    assert path.consume(5, 1.0) == ["a", "b"]
    with pytest.raises(RuntimeError, match="a callback raised"):
        path.consume(5, 1.0)
    assert path.consume(5, 0.0) == ["c"]


def test_an_error_before_any_delivery_is_raised_at_once() -> None:
    upkeep = _Upkeep(_Fetcher([["a"]]), fail_at=1)
    with pytest.raises(RuntimeError):
        _path(upkeep).consume(5, 1.0)


def test_a_due_announcement_ends_the_call() -> None:
    """Records that reached a source's boundary go out before its announcement runs."""
    upkeep = _Upkeep(_Fetcher([["a", "b"], ["c"]]), announce_after=1)
    path = _path(upkeep)
    assert path.consume(5, 1.0) == ["a", "b"]
    # The second round's service step ran (an announcement of a partition the call holds
    # records of waits for the call's return), then the call returned before it asked
    # librdkafka again (a revocation in there would come before the application has them).
    assert upkeep.services == 2
    assert upkeep.fetcher.batches == [["c"]]


def test_a_served_batch_drops_the_records_of_a_partition_revoked_meanwhile() -> None:
    """What was not handed out goes back to the ready records, but not a revoked partition's.

    A ``consume()`` fill may call librdkafka while a batch is served; a revocation in there
    must not leave the revoked partition's records to be handed out by a later call.
    """
    from test_consumer_fetch import Msg

    upkeep = _Upkeep(_Fetcher([]))
    path = _path(upkeep)
    batch = [Msg(0, 0), Msg(1, 0), Msg(0, 1), Msg(1, 1)]
    path._batch, path._stack, path._done = batch, batch[:1:-1], 2  # two handed out
    path._core.parts = {("t", 1): object()}  # partition 0 was revoked
    upkeep.fetcher.moved = 1
    path._end_served()
    assert [(m.partition(), m.offset()) for m in upkeep.fetcher.ready] == [(1, 1)]
