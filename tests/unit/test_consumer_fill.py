"""``consume(n, timeout)``'s fill loop (``CallPath.consume``) on fakes of its parts: pure logic.

The real-cluster behaviour (a batch filled until ``n`` or the timeout, as confluent's) is
in ``tests/integration/test_consumer_calls.py``; here, the two reasons a call ends early.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from fakes import FakeFetcher, FakeUpkeep, Msg

from coordinator.kernel.clock import SYSTEM_CLOCK
from ordered.consumer.calls import CallPath


def _path(upkeep: FakeUpkeep) -> CallPath:
    # Never quiet (the fake service step does not say until when): it runs every time.
    core = SimpleNamespace(
        quiet_until=0.0, unquiet=lambda: None, call_stores=None, parts={}, clock=SYSTEM_CLOCK
    )
    return CallPath(core, upkeep, lambda: None)  # type: ignore[arg-type]


def test_records_fill_the_call_across_fetches() -> None:
    upkeep = FakeUpkeep(FakeFetcher([["a", "b"], ["c"], ["d", "e", "f"]]))
    assert _path(upkeep).consume(5, 1.0) == ["a", "b", "c", "d", "e"]


def test_a_callback_error_after_delivery_returns_the_records_then_raises() -> None:
    """The records delivered before the error are returned; the next call raises it."""
    upkeep = FakeUpkeep(FakeFetcher([["a", "b"], ["c"]]), fail_at=2)
    path = _path(upkeep)
    assert path.consume(5, 1.0) == ["a", "b"]
    with pytest.raises(RuntimeError, match="a callback raised"):
        path.consume(5, 1.0)
    assert path.consume(5, 0.0) == ["c"]


def test_an_error_before_any_delivery_is_raised_at_once() -> None:
    upkeep = FakeUpkeep(FakeFetcher([["a"]]), fail_at=1)
    with pytest.raises(RuntimeError):
        _path(upkeep).consume(5, 1.0)


def test_a_due_announcement_ends_the_call() -> None:
    """Records that reached a source's boundary go out before its announcement runs."""
    upkeep = FakeUpkeep(FakeFetcher([["a", "b"], ["c"]]), announce_after=1)
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
    upkeep = FakeUpkeep(FakeFetcher([]))
    path = _path(upkeep)
    batch = [Msg(0, 0), Msg(1, 0), Msg(0, 1), Msg(1, 1)]
    path._batch, path._stack, path._done = batch, batch[:1:-1], 2  # two handed out
    path._core.parts = {("t", 1): object()}  # partition 0 was revoked
    upkeep.fetcher.moved = 1
    path._end_served()
    assert [(m.partition(), m.offset()) for m in upkeep.fetcher.ready] == [(1, 1)]
