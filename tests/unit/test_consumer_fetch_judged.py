"""The fetcher's steady state: a ``consume(n)`` batch judged as it comes (``Fetcher._judged``).

The fetch path's shared fakes (``tests/unit/fakes.py``): librdkafka hands out prepared batches, the
layouts are the real coverage and pacing rules with checks only logged.
"""

from __future__ import annotations

import time
from typing import Any

from fakes import FakeConsumer, FakeLayouts, Msg, RewindLayouts, run

from ordered.consumer.fetch import Fetcher


def covered_judge(calls: list[list[int]]) -> Any:
    """A judgement by coverage only (BatchFilter.judge_covered's rule without gates)."""

    def judge(batch: list[Msg], covered: dict[tuple[str, int], int]) -> Any:
        calls.append([m.offset() for m in batch])
        last: dict[tuple[str, int], int] = {}
        for m in batch:
            key = ("t", m.partition())
            if m.offset() >= covered.get(key, -1):
                return None
            last[key] = m.offset()
        return last

    return judge


def make_judged() -> tuple[Fetcher, FakeConsumer, FakeLayouts, list[str]]:
    log: list[str] = []
    consumer = FakeConsumer([], log)
    layouts = FakeLayouts(log)
    fetcher = Fetcher(consumer, layouts, lambda: None)
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 2)  # its check covers up to 100
    log.clear()
    return fetcher, consumer, layouts, log


def test_a_batch_judged_below_the_marks_is_handed_back_at_once() -> None:
    fetcher, consumer, _layouts, log = make_judged()
    calls: list[list[int]] = []
    consumer.batches = [[Msg(0, 1), Msg(1, 1), Msg(0, 2)]]
    skipped = fetcher.skipped
    judged = fetcher.fetch(3, 1.0, single=False, judge=covered_judge(calls))
    assert judged is not None
    batch, last = judged
    assert [m.offset() for m in batch] == [1, 1, 2]
    assert last == {("t", 0): 2, ("t", 1): 1}
    # No check, no queue: the batch is the caller's.
    assert log == ["fetch [1, 1, 2]"] and not fetcher.ready
    assert fetcher.skipped == skipped + 1


def test_a_batch_the_judgement_refuses_goes_the_usual_way() -> None:
    fetcher, consumer, _layouts, log = make_judged()
    calls: list[list[int]] = []
    consumer.high = {0: 200, 1: 100}
    consumer.batches = [[Msg(0, 99), Msg(0, 100)]]  # 100 is at the covered mark
    assert fetcher.fetch(2, 1.0, single=False, judge=covered_judge(calls)) is None
    assert calls == [[99, 100]]
    # Its own check, then released into the ready queue (judged there, record by record
    # where need be).
    assert log[:2] == ["fetch [99, 100]", "send 2"] and "wait 2" in log
    assert [m.offset() for m in fetcher.ready] == [99, 100]


def test_a_partition_moved_inside_librdkafka_is_not_judged_at_once() -> None:
    fetcher, consumer, _layouts, log = make_judged()
    calls: list[list[int]] = []
    consumer.during = lambda: fetcher.take_partition(("t", 1))  # a revocation in there
    consumer.batches = [[Msg(0, 1)]]
    assert fetcher.fetch(2, 1.0, single=False, judge=covered_judge(calls)) is None
    assert calls == []  # without the guard: judged, and handed back with no check
    assert "send 2" in log and [m.offset() for m in fetcher.ready] == [1]


def test_layouts_not_trusted_are_not_judged_at_once() -> None:
    fetcher, consumer, layouts, _log = make_judged()
    calls: list[list[int]] = []
    layouts.trusted = False
    consumer.batches = [[Msg(0, 1)]]
    assert fetcher.fetch(2, 1.0, single=False, judge=covered_judge(calls)) is None
    # The usual path takes it (its settle tells the consumer the layouts are stale).
    assert calls == [] and [m.offset() for m in fetcher.ready] == [1]


def test_an_answered_rewind_read_is_acted_on_before_the_judgement() -> None:
    log: list[str] = []
    consumer = FakeConsumer([], log)
    layouts = RewindLayouts(log, 1000)
    order: list[str] = []
    fetcher = Fetcher(consumer, layouts, lambda: None)
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 10)
    time.sleep(0.01)  # the slot of the rewind read has come
    judge = covered_judge([])

    def judging(batch: list[Msg], covered: dict[tuple[str, int], int]) -> Any:
        order.append("judged")
        return judge(batch, covered)

    layouts.rewound_by.add(2)
    consumer.batches = [[Msg(0, 1)]]
    assert fetcher.fetch(10, 1.0, single=False, judge=judging) is not None
    assert "send 2" in log  # the rewind read, sent with the batch, not waited for
    layouts.answer(2)
    order.clear()
    consumer.batches = [[Msg(0, 2)]]
    # A rewind relimits the gates: no judgement before the owner has acted on it, so
    # the batch takes the usual way, behind the note of what the read found.
    assert fetcher.fetch(10, 1.0, single=False, judge=judging) is None
    assert order == [] and [note.rewound for note in fetcher.notes] == [{"t"}]
