"""When a held gate pauses its partition in librdkafka (``Core.fire``), with a fake
consumer: at once when its log reaches beyond the pre-fetch window, else only once the
stash outgrows the window; resumed only if paused, and never over the application's
pause. And the stash's cost per record."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from fakes import Msg, Quiet, bare_core, make

from ordered.consumer.calls import ConsumerUpkeep
from ordered.consumer.judge import BatchFilter
from ordered.consumer.partition import GateEvent, GateState, PartitionGate, PartState
from ordered.consumer.state import Core

WINDOW = 100


class Recording(Quiet):
    """librdkafka's pause calls, and a cached high watermark."""

    def __init__(self, high: int) -> None:
        self.high = high
        self.calls: list[str] = []

    def get_watermark_offsets(self, tp: Any, cached: bool = False) -> tuple[int, int]:
        assert cached, "the gate must not send a request"
        return 0, self.high

    def pause(self, tps: list[Any]) -> None:
        self.calls.append("pause")

    def resume(self, tps: list[Any]) -> None:
        self.calls.append("resume")


def _core(high: int, window: int = WINDOW) -> tuple[Core, PartState, Recording]:
    consumer = Recording(high)
    core = bare_core(consumer, SimpleNamespace(prefetch_records=window))
    part = PartState("t", 0, PartitionGate("t", 0), position=50)
    core.parts[("t", 0)] = part
    return core, part, consumer


def _block(core: Core, part: PartState) -> None:
    core.fire(part, GateEvent.GATE_CLOSED, held=50)


def test_a_gate_held_far_below_the_log_end_pauses_at_once() -> None:
    core, part, consumer = _core(high=50 + WINDOW + 1)
    _block(core, part)
    assert consumer.calls == ["pause"] and part.fetch_paused
    core.fire(part, GateEvent.RECHECK_OPEN)
    assert consumer.calls == ["pause", "resume"] and not part.fetch_paused


def test_a_gate_held_near_the_log_end_is_not_paused_nor_resumed() -> None:
    """librdkafka would pre-fetch the rest anyway; a pause would leave the partition to
    wait for a fetch parked at the broker when resumed."""
    core, part, consumer = _core(high=50 + WINDOW)
    _block(core, part)
    assert consumer.calls == [] and not part.fetch_paused
    assert part.gate.state is GateState.BLOCKED and part.gate.paused  # held all the same
    core.fire(part, GateEvent.RECHECK_OPEN)
    assert consumer.calls == []


def test_a_stash_that_outgrows_the_window_pauses() -> None:
    core, part, consumer = _core(high=60)
    _block(core, part)
    core.fire(part, GateEvent.STASHED, records=[Msg(0, o) for o in range(50, 50 + WINDOW)])
    assert consumer.calls == []
    core.fire(part, GateEvent.STASHED, records=[Msg(0, 50 + WINDOW)])
    assert consumer.calls == ["pause"] and part.fetch_paused
    core.fire(part, GateEvent.RECHECK_OPEN)  # DRAINING: still held until the stash is out
    assert consumer.calls == ["pause"]
    part.gate.take(WINDOW + 1)
    core.fire(part, GateEvent.STASH_DELIVERED)
    assert consumer.calls == ["pause", "resume"]


def test_an_unknown_log_end_pauses() -> None:
    core, part, consumer = _core(high=-1)
    _block(core, part)
    assert consumer.calls == ["pause"]


def test_the_application_pause_is_left_to_the_application() -> None:
    core, part, consumer = _core(high=1000)
    _block(core, part)
    part.gate.user_paused = True
    core.fire(part, GateEvent.RECHECK_OPEN)
    assert consumer.calls == ["pause"] and not part.fetch_paused  # its resume() resumes it


class Counted(Msg):
    """A record that counts how often its offset is read (the stash's work)."""

    reads = 0

    def offset(self) -> int:
        Counted.reads += 1
        return super().offset()


def test_stashing_one_record_at_a_time_costs_each_record_once() -> None:
    """``poll()`` stashes a held partition's records one by one: 12,000 of them took
    seconds when each merged the whole stash again (quadratic)."""
    core, part, _consumer = _core(high=60, window=10**9)
    _block(core, part)
    Counted.reads = 0
    records = 5_000
    for offset in range(50, 50 + records):
        core.fire(part, GateEvent.STASHED, records=[Counted(0, offset)])
    assert Counted.reads <= 3 * records  # a merge each time: about records**2 / 2
    assert [m.offset() for m in part.gate.stash] == list(range(50, 50 + records))
    # Out of order or repeated: merged by offset, the later copy kept.
    again = Msg(0, 60)
    core.fire(part, GateEvent.STASHED, records=[Msg(0, 5_060), again, Msg(0, 5_055)])
    offsets = [m.offset() for m in part.gate.stash]
    assert offsets == sorted(set(offsets)) and offsets[-2:] == [5_055, 5_060]
    assert part.gate.stash[10] is again


def test_the_stashes_share_one_window_among_the_assigned_partitions() -> None:
    """A ZooKeeper outage holds every partition of an ordered topic: together their
    stashes stay within one pre-fetch window."""
    core, part, consumer = _core(high=60)
    for p in range(1, 4):
        core.parts[("t", p)] = PartState("t", p, PartitionGate("t", p), position=0)
    assert core.stash_share() == WINDOW // 4
    _block(core, part)
    core.fire(part, GateEvent.STASHED, records=[Msg(0, o) for o in range(50, 50 + WINDOW // 4)])
    assert consumer.calls == []
    core.fire(part, GateEvent.STASHED, records=[Msg(0, 50 + WINDOW // 4)])
    assert consumer.calls == ["pause"]
    other = core.parts[("t", 1)]
    consumer.high = WINDOW // 4 + 1  # its log reaches beyond its share: paused at once
    core.fire(other, GateEvent.GATE_CLOSED, held=0)
    assert consumer.calls == ["pause", "pause"]


def test_poll_takes_a_held_run_at_once_and_stops_at_the_first_free_record() -> None:
    fetcher, _consumer, _log = make([])
    held = SimpleNamespace(gate=SimpleNamespace(paused=True))
    free = SimpleNamespace(gate=SimpleNamespace(paused=False))
    parts: dict[tuple[str, int], Any] = {("t", 2): held, ("t", 0): free}
    records = [Msg(2, o) for o in range(5)] + [Msg(0, 7), Msg(2, 5)]
    fetcher.ready.extend(records)
    assert fetcher.take_held(parts) == records[:5]
    assert fetcher.take_held(parts) == []  # a free partition's record comes first now
    assert fetcher.take(1) == [records[5]]
    assert fetcher.take_held(parts) == [records[6]]
    assert not fetcher.ready


def test_hold_stashes_each_partitions_run_as_the_judgement_would() -> None:
    core, part, _consumer = _core(high=10**6)
    other = core.parts[("t", 1)] = PartState("t", 1, PartitionGate("t", 1), position=0)
    _block(core, part)
    core.fire(other, GateEvent.GATE_CLOSED, held=0)
    flt = BatchFilter.__new__(BatchFilter)
    flt._core = core  # the only part hold() uses
    first = [Msg(0, 50), Msg(0, 51)]
    flt.hold([_Rec(0, first[0]), _Rec(1, Msg(0, 0)), _Rec(0, first[1])])
    assert [m.offset() for m in part.gate.stash] == [50, 51]
    assert [m.offset() for m in other.gate.stash] == [0]


class _Rec:
    """A record with the topic and partition the hold groups by."""

    def __init__(self, partition: int, msg: Msg) -> None:
        self._partition = partition
        self._msg = msg

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._partition

    def offset(self) -> int:
        return self._msg.offset()


def _draining(core: Core, part: PartState, stash: list[Msg], cap: int | None = None) -> None:
    core.fire(part, GateEvent.GATE_CLOSED, held=stash[0].offset())
    core.fire(part, GateEvent.STASHED, records=stash)
    core.fire(part, GateEvent.RECHECK_OPEN, cap=cap)
    assert part.gate.state is GateState.DRAINING


def _upkeep(core: Core) -> tuple[ConsumerUpkeep, Any]:
    fetcher, _consumer, _log = make([])
    upkeep = ConsumerUpkeep.__new__(ConsumerUpkeep)
    upkeep._core = core  # the two parts unstash() uses
    upkeep.fetcher = fetcher
    return upkeep, fetcher


def test_an_open_stash_goes_back_before_the_ready_records_whole() -> None:
    """Judged in batches from there, not one poll() per record (about 10 us each)."""
    core, part, _consumer = _core(high=10**6)
    upkeep, fetcher = _upkeep(core)
    ready = Msg(1, 0)
    fetcher.ready.extend([ready])
    fetcher._ready_last = {("t", 1): 0}
    stash = [Msg(0, o) for o in range(50, 60)]
    _draining(core, part, stash)  # no cap: the crossing at the held record is done
    assert upkeep.unstash()
    assert part.gate.state is GateState.FREE and not part.gate.stash  # no gate ahead
    assert not core.draining
    assert list(fetcher.ready) == [*stash, ready]
    assert fetcher._ready_last is None  # its last offsets do not cover the stash
    assert not upkeep.unstash()  # nothing left


def test_a_stash_whose_crossing_is_still_to_run_stays() -> None:
    core, part, _consumer = _core(high=10**6)
    upkeep, fetcher = _upkeep(core)
    stash = [Msg(0, o) for o in range(50, 60)]
    _draining(core, part, stash, cap=50)  # the held record runs the crossing first
    assert not upkeep.unstash()
    assert part.gate.state is GateState.DRAINING and len(part.gate.stash) == 10
    assert not fetcher.ready


def test_a_stash_the_application_paused_stays() -> None:
    core, part, _consumer = _core(high=10**6)
    upkeep, fetcher = _upkeep(core)
    _draining(core, part, [Msg(0, o) for o in range(50, 60)])
    part.gate.user_paused = True
    assert not upkeep.unstash()
    assert len(part.gate.stash) == 10 and not fetcher.ready


def _held_core() -> tuple[Core, PartState]:
    core, part, _consumer = _core(high=10**6)
    _block(core, part)  # partition 0 held
    core.parts[("t", 1)] = PartState("t", 1, PartitionGate("t", 1), position=0)  # free
    return core, part


def _messages(*records: tuple[int, int]) -> list[Any]:
    from confluent_kafka import Message

    return [Message(topic="t", partition=p, offset=o, key=b"k") for p, o in records]


def test_a_served_batch_sorts_the_held_partitions_records_out_in_one_pass() -> None:
    from ordered.consumer import calls
    from ordered.consumer.scan import SPLIT

    core, _part = _held_core()
    path = calls.CallPath.__new__(calls.CallPath)
    path._core = core
    batch = _messages((0, 50), (0, 51), (1, 3), (0, 52), (1, 4))
    for compiled in (SPLIT, None):  # the compiled pass and its reference agree
        calls_split = calls.SPLIT
        calls.SPLIT = compiled
        try:
            held, free = path._split_held(batch, "t")
        finally:
            calls.SPLIT = calls_split
        assert [(m.partition(), m.offset()) for m in free] == [(1, 3), (1, 4)]
        assert {k: [m.offset() for m in v] for k, v in held.items()} == {("t", 0): [50, 51, 52]}


def test_poll_serves_the_free_records_of_a_batch_a_held_partition_refused() -> None:
    """Without the split, one held record refuses the whole batch: the checked path then
    delivers the rest one call at a time."""
    from ordered.consumer import calls

    core, _part = _held_core()
    judged: list[list[int]] = []

    def judge(batch: list[Any], topic: str, known: Any) -> dict[tuple[str, int], int] | None:
        judged.append([m.partition() for m in batch])
        if any(m.partition() == 0 for m in batch):
            return None  # a held partition's record: not servable
        return {("t", m.partition()): m.offset() for m in batch}

    stashed: list[dict[tuple[str, int], list[Any]]] = []
    flt = SimpleNamespace(
        single="t", judge=judge, hold_grouped=stashed.append, crosses_marks=lambda last: False
    )
    fetcher, _consumer, _log = make([])
    batch = _messages((0, 50), (1, 3), (0, 51), (1, 4))
    fetcher.ready.extend(batch)
    path = calls.CallPath.__new__(calls.CallPath)
    path._core, path._filter, path._fetcher = core, flt, fetcher
    path._rejected, path._halts, path._stack = False, 0, calls._EMPTY
    served = path._serve(0)
    assert served is not None
    assert [(m.partition(), m.offset()) for m in served[::-1]] == [(1, 3), (1, 4)]
    assert [{k: [m.offset() for m in v] for k, v in s.items()} for s in stashed] == [
        {("t", 0): [50, 51]}
    ]
    assert not path._rejected and not fetcher.ready
