"""The consumer's fetch path with fake librdkafka and layouts: checks come before release."""

from __future__ import annotations

import time
from typing import Any

from fakes import FakeConsumer, Msg, RewindLayouts, make, run

from ordered.consumer.fetch import Fetcher
from ordered.consumer.pacing import CHECK_BURST


def test_a_batch_is_released_only_after_its_check_and_the_next_check_is_already_sent() -> None:
    b1, b2, b3 = [Msg(0, 0), Msg(0, 1)], [Msg(0, 2), Msg(0, 3)], [Msg(0, 4)]
    fetcher, _consumer, log = make([b1, b2, b3, []])
    fetcher.fetch(2, 1.0, single=False)
    assert list(fetcher.ready) == b1
    # b1 was checked before release; b2 was taken ahead and its check sent before
    # the wait for b1's: the round trip overlaps.
    assert log == ["fetch [0, 1]", "send 1", "fetch [2, 3]", "wait 1", "send 2"]
    assert fetcher.take(10) == b1
    log.clear()
    fetcher.fetch(2, 1.0, single=False)
    assert list(fetcher.ready) == b2
    assert log == ["fetch [4]", "wait 2", "send 3"]
    fetcher.take(10)
    log.clear()
    # b3 did not fill the request (caught up): no fetch ahead of the next batch.
    fetcher.fetch(2, 1.0, single=False)
    assert log == ["wait 3"]


def test_without_the_pipeline_each_batch_waits_for_its_own_check() -> None:
    b1, b2 = [Msg(0, 0)], [Msg(0, 1)]
    fetcher, _consumer, log = make([b1, b2])
    fetcher.pipeline = False
    fetcher.fetch(10, 1.0, single=False)
    assert log == ["fetch [0]", "send 1", "wait 1"]
    assert fetcher.take(1) == b1


def test_taking_a_partition_settles_the_batch_fetched_ahead() -> None:
    fetcher, _consumer, log = make([[Msg(0, 0), Msg(1, 0)], [Msg(0, 1), Msg(1, 1)]])
    fetcher.fetch(2, 1.0, single=False)
    assert fetcher.first_offset(("t", 1)) == 0
    mine = fetcher.take_partition(("t", 0))
    assert [(m.partition(), m.offset()) for m in mine] == [(0, 0), (0, 1)]
    assert "wait 2" in log  # the ahead batch's check was waited for first
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == [(1, 0), (1, 1)]
    assert fetcher.first_offset(("t", 0)) is None


def test_a_rebalance_inside_the_fetch_ahead_does_not_deliver_twice() -> None:
    b1, b2 = [Msg(0, 0), Msg(1, 0)], [Msg(1, 1)]
    fetcher, consumer, _log = make([b1, b2])
    fetcher.pipeline = False
    fetcher.fetch(10, 1.0, single=False)  # b1 ready
    fetcher.take(10)
    fetcher.pipeline = True
    consumer.batches = [[Msg(0, 1), Msg(1, 2)], [Msg(1, 3), Msg(1, 4)]]
    fetcher.fetch(2, 1.0, single=False)  # [0@1, 1@2] ready, [1@3, 1@4] ahead
    fetcher.take(10)
    revoked: list[Any] = []
    consumer.during = lambda: revoked.extend(fetcher.take_partition(("t", 1)))
    consumer.batches = [[Msg(0, 2)]]
    fetcher.fetch(2, 1.0, single=False)
    # The revocation (inside librdkafka's consume) took the pending 1@3 away.
    assert [(m.partition(), m.offset()) for m in revoked] == [(1, 3), (1, 4)]
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == []
    fetcher.fetch(2, 1.0, single=False)
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == [(0, 2)]


def test_batches_below_the_covered_watermarks_need_no_check() -> None:
    fetcher, consumer, log = make([])
    consumer.high = {0: 100, 1: 50}  # what librdkafka saw at its last fetch responses
    backlog = [[Msg(0, i), Msg(0, i + 1), Msg(1, i)] for i in range(0, 40, 2)]
    count = len(backlog)
    run(backlog, fetcher, consumer, 3)
    # The first batch's check noted the high watermarks: it covers the whole backlog.
    assert log.count("send 1") == 1 and "send 2" not in log
    assert fetcher.skipped == count - 1
    # A record at the covered watermark was written after that check began: checked.
    log.clear()
    consumer.high = {0: 101, 1: 50}
    run([[Msg(0, 100)]], fetcher, consumer, 3)
    assert log == ["fetch [100]", "send 2", "wait 2"]


def test_a_partition_that_moves_loses_its_coverage() -> None:
    fetcher, consumer, log = make([])
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 10)
    fetcher.take_partition(("t", 1))  # a seek, revocation or pause
    log.clear()
    run([[Msg(1, 1)]], fetcher, consumer, 10)
    assert log == ["fetch [1]", "send 2", "wait 2"]


def test_a_rebalance_inside_librdkafka_means_a_check() -> None:
    fetcher, consumer, log = make([])
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 10)
    log.clear()
    consumer.during = lambda: fetcher.take_partition(("t", 1))
    run([[Msg(0, 1)]], fetcher, consumer, 10)
    assert log == ["fetch [1]", "send 2", "wait 2"]


def test_checks_are_paced_and_a_deferred_batch_shares_the_next_check() -> None:
    # 10 requests/s, 2 per check (sync + one topic): one check per 0.2 s on average,
    # CHECK_BURST back to back (the first batches of an assignment).
    fetcher, consumer, log = make([], check_rate=10)
    for i in range(CHECK_BURST):
        consumer.high = {0: i + 1}
        run([[Msg(0, i)]], fetcher, consumer, 10)
        assert log == [f"fetch [{i}]", f"send {i + 1}", f"wait {i + 1}"]
        log.clear()
        fetcher.take(10)
    consumer.high = {0: CHECK_BURST + 1}
    first, second, third, n = CHECK_BURST, CHECK_BURST + 1, CHECK_BURST + 2, CHECK_BURST + 1
    consumer.batches = [[Msg(0, first)], [Msg(0, second)]]
    fetcher.fetch(10, 0.01, single=False)  # the slot is later than the caller waits
    # The caller's 0.01 s went by taking what librdkafka had into the deferred batch.
    assert taken(log) == [f"fetch [{first}]", f"fetch [{second}]"] and not fetcher.ready
    started = time.monotonic()
    consumer.high = {0: third + 1}
    consumer.batches = [[Msg(0, third)]]
    fetcher.fetch(10, 1.0, single=False)
    # Waited for the slot, took what came meanwhile, one check for all of it.
    assert time.monotonic() - started >= 0.1
    assert taken(log) == [
        f"fetch [{first}]",
        f"fetch [{second}]",
        f"fetch [{third}]",
        f"send {n}",
        f"wait {n}",
    ]
    assert [m.offset() for m in fetcher.ready] == [first, second, third]
    # The positions noted with the first record no longer end the batch.
    assert fetcher.take(10) and fetcher.taken_last is None
    consumer.batches = [[Msg(0, third + 1)]]
    consumer.high = {0: third + 2}
    fetcher.fetch(10, 1.0, single=False)
    assert [m.offset() for m in fetcher.ready] == [third + 1]
    assert f"send {n + 1}" in log  # above the marks: its own check


def taken(log: list[str]) -> list[str]:
    """The log without the consume calls that returned nothing."""
    return [line for line in log if line != "fetch []"]


def test_a_deferred_batch_stops_gathering_when_a_rebalance_settles_it() -> None:
    # A revocation inside a consume of the wait settles the deferred batch (dropping the
    # revoked partition's records); what that consume returned is the next batch.
    fetcher, consumer, _log = make([], check_rate=10)
    for i in range(CHECK_BURST):  # use up the burst: the next batch is deferred
        consumer.high = {0: i + 1}
        run([[Msg(0, i)]], fetcher, consumer, 10)
        fetcher.take(10)
    base = CHECK_BURST
    consumer.high = {0: base + 2, 1: 2}
    consumer.batches = [[Msg(0, base), Msg(1, 0)], [Msg(0, base + 1), Msg(1, 1)]]
    revoked: list[Any] = []
    fetcher.fetch(10, 0.01, single=False)  # deferred; the wait took the second batch too
    assert not fetcher.ready
    consumer.batches = [[Msg(0, base + 2)]]
    consumer.high = {0: base + 3, 1: 2}
    consumer.during = lambda: revoked.extend(fetcher.take_partition(("t", 1)))
    fetcher.fetch(10, 1.0, single=False)
    assert [(m.partition(), m.offset()) for m in revoked] == [(1, 0), (1, 1)]
    released = [(m.partition(), m.offset()) for m in fetcher.ready]
    assert released == [(0, base), (0, base + 1)]
    fetcher.take(10)
    fetcher.fetch(10, 1.0, single=False)
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == [(0, base + 2)]


def test_the_assignment_is_asked_once_and_again_after_it_changed() -> None:
    # librdkafka's assignment() is a round trip to its group thread: asked once, but a
    # partition assigned later must not hide behind the old list (its records would
    # pass as covered by marks that never included it).
    fetcher, consumer, log = make([])
    consumer.assigned = [0]
    consumer.high = {0: 10}
    for offset in range(3):
        run([[Msg(0, offset)]], fetcher, consumer, 10)
        fetcher.take(10)
    assert log.count("send 1") == 1 and "send 2" not in log  # covered up to 10
    assert consumer.assignment_calls == 1
    consumer.assigned = [0, 1]
    consumer.high = {0: 10, 1: 5}
    fetcher.assignment_changed()
    log.clear()
    run([[Msg(1, 0)]], fetcher, consumer, 10)
    assert log == ["fetch [0]", "send 2", "wait 2"]
    assert consumer.assignment_calls == 2  # asked again once, for coverage and marks
    fetcher.take(10)
    log.clear()
    run([[Msg(1, 1)]], fetcher, consumer, 10)
    assert not any(line.startswith("send") for line in log)  # covered by check 2


def _last(batch: list[Msg]) -> dict[tuple[str, int], int]:
    return {("t", m.partition()): m.offset() for m in batch}


def test_each_partitions_last_offset_comes_from_the_positions_around_its_consume() -> None:
    # Interleaved partitions, a partition absent from a batch, offsets with gaps.
    batches = [
        [Msg(0, 0), Msg(1, 0), Msg(0, 1)],
        [Msg(1, 1), Msg(1, 5), Msg(0, 2), Msg(1, 6)],
        [Msg(0, 9)],
        [Msg(1, 7), Msg(1, 8)],
    ]
    fetcher, _consumer, _log = make([list(b) for b in batches] + [[]])
    seen = []
    for _ in batches:
        fetcher.fetch(2, 1.0, single=False)
        taken = fetcher.take(10)
        seen.append((taken, fetcher.taken_last))
    # The first batch of an assignment has no positions before it: unknown.
    assert seen[0] == (batches[0], None)
    for batch, (taken, last) in zip(batches[1:], seen[1:], strict=True):
        assert taken == batch
        assert last == _last(batch)


def test_the_last_offsets_are_unknown_after_anything_moved_a_position() -> None:
    b1, b2, b3, b4 = [Msg(0, 0)], [Msg(0, 1)], [Msg(0, 2)], [Msg(0, 1)]
    fetcher, _consumer, _log = make([b1, b2, b3, b4, []])
    fetcher.pipeline = False
    for batch in (b1, b2):
        fetcher.fetch(1, 1.0, single=False)
        assert fetcher.take(1) == batch
    assert fetcher.taken_last == _last(b2)
    fetcher.assignment_changed()  # a new assignment: positions start again
    fetcher.fetch(1, 1.0, single=False)
    assert fetcher.take(1) == b3 and fetcher.taken_last is None
    # Partition 0 read again from offset 1 (a seek no wrapper call announced): its
    # position went back, so the batch is looked at record by record.
    fetcher.fetch(1, 1.0, single=False)
    assert fetcher.take(1) == b4 and fetcher.taken_last is None


def test_a_partial_take_has_no_last_offsets() -> None:
    b1, b2 = [Msg(0, 0)], [Msg(0, 1), Msg(0, 2), Msg(1, 0)]
    fetcher, _consumer, _log = make([b1, b2, []])
    fetcher.pipeline = False
    fetcher.fetch(5, 1.0, single=False)
    fetcher.take(5)
    fetcher.fetch(5, 1.0, single=False)
    assert fetcher.take(1) == [b2[0]] and fetcher.taken_last is None
    assert fetcher.take(5) == b2[1:] and fetcher.taken_last is None


def test_a_batch_below_the_marks_does_not_wait_for_the_rewind_read() -> None:
    # 1,000 requests/s, 3 per check (sync, the topic, the rewind marker): a 3 ms slot.
    log: list[str] = []
    consumer = FakeConsumer([], log)
    layouts = RewindLayouts(log, 1000)
    fetcher = Fetcher(consumer, layouts, lambda: None)
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 10)
    assert log == ["fetch [0, 0]", "send 1", "wait 1"]  # the first batch waits for its check
    time.sleep(0.01)  # the slot of the rewind read has come
    log.clear()
    layouts.rewound_by.add(2)
    run([[Msg(0, 1)]], fetcher, consumer, 10)
    # Below the marks: the rewind read is sent, and the batch is released without it.
    assert log == ["fetch [1]", "send 2"]
    log.clear()
    run([[Msg(0, 2)]], fetcher, consumer, 10)
    assert log == ["fetch [2]"] and fetcher.notes == []  # not answered yet: nothing waits
    layouts.answer(2)
    log.clear()
    run([[Msg(0, 3)]], fetcher, consumer, 10)
    # Answered: the next batch's settle notes the rewind it found, for the owner.
    assert log == ["fetch [3]", "wait 2"]
    assert [note.rewound for note in fetcher.notes] == [{"t"}]


def test_a_batch_with_a_check_of_its_own_waits_for_the_rewind_read_first() -> None:
    log: list[str] = []
    consumer = FakeConsumer([], log)
    layouts = RewindLayouts(log, 1000)
    fetcher = Fetcher(consumer, layouts, lambda: None)
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 10)
    time.sleep(0.01)
    run([[Msg(0, 1)]], fetcher, consumer, 10)  # sends the rewind read (2), not answered
    log.clear()
    consumer.high = {0: 200, 1: 100}
    time.sleep(0.01)
    run([[Msg(0, 100)]], fetcher, consumer, 10)  # at the mark: a check of its own (3)
    assert log == ["fetch [100]", "send 3", "wait 2", "wait 3"]


def test_below_the_marks_no_batch_is_taken_ahead() -> None:
    fetcher, consumer, log = make([])
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 2)  # its check covers up to 100
    log.clear()
    consumer.batches = [[Msg(0, 1), Msg(1, 1)], [Msg(0, 2), Msg(1, 2)]]
    fetcher.fetch(2, 1.0, single=False)
    # A full batch (a backlog) below the marks: released, the next left in librdkafka
    # (it needs no check whose round trip a fetch ahead would hide).
    assert log == ["fetch [1, 1]", "wait None"]
    assert len(fetcher.ready) == 2 and len(consumer.batches) == 1
    # Past the marks the batch has a check of its own: the next one is taken ahead.
    log.clear()
    consumer.batches = [[Msg(0, 100), Msg(1, 100)], [Msg(0, 101), Msg(1, 101)]]
    fetcher.take(2)
    fetcher.fetch(2, 1.0, single=False)
    assert log == ["fetch [100, 100]", "send 2", "fetch [101, 101]", "wait 2", "send 3"]


def test_a_small_call_below_the_marks_still_takes_the_batch_it_is_served_from() -> None:
    fetcher, consumer, log = make([])
    consumer.high = {0: 100, 1: 100}
    run([[Msg(0, 0), Msg(1, 0)]], fetcher, consumer, 2)  # its check covers up to 100
    log.clear()
    # consume(1) asks librdkafka for one record and takes up to `ahead` more after it:
    # the judged batch the next calls are served from.
    consumer.batches = [[Msg(0, 1)], [Msg(0, 2), Msg(1, 1), Msg(1, 2)]]
    fetcher.fetch(1, 1.0, single=False, ahead=3)
    assert log == ["fetch [1]", "fetch [2, 1, 2]", "wait None"]
    assert consumer.batches == []
