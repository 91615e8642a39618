"""The compaction rule of linear_hash.compact: hand-built cases and a property.

The property compares every reader's decision over the full history with its decision
over the compacted one, for random histories made by real key flows, random log starts
and random group progress: the gate decision (and what it waits on) of every offset at
or after log start, the Spark planner's caps and AvailableNow targets, and the audit's
placement check (some epoch in the record's epoch range puts its key where it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linear_hash import Layout, key_flow
from linear_hash.compact import compactable, hold_of
from linear_hash.gating import EpochInfo, GateEvaluator, OffsetMaps, epoch_range
from spark_source.planner import available_now_target, gate_caps

MAX_PARTITIONS = 8


def epoch(
    number: int,
    edges: list[tuple[int, int]],
    bounds: Mapping[int, int],
    sealed: bool = True,
    to_active: int = 0,
) -> EpochInfo:
    return EpochInfo(number, sealed, tuple(edges), dict(bounds), to_active)


def two_expansions() -> list[EpochInfo]:
    """2 -> 3 (0 gives to 2) at 1, 3 -> 4 (1 gives to 3) at 2."""
    return [
        epoch(0, [], {}, to_active=2),
        epoch(1, [(0, 2)], {2: 0, 0: 10}, to_active=3),
        epoch(2, [(1, 3)], {3: 0, 1: 20}, to_active=4),
    ]


# --- hand-built cases ------------------------------------------------------------------


def test_nothing_goes_before_the_log_starts_pass_the_boundaries() -> None:
    got = compactable(two_expansions(), {0: 9, 1: 0, 2: 0, 3: 0})
    assert got.drop == ()
    assert got.base == 0
    assert got.held_by == (1, 0, 10)


def test_the_last_passed_epoch_stays_as_the_base() -> None:
    # Epoch 1 is passed, epoch 2 is not: epoch 1 stays (its layout places the records
    # of partition 1 below B_1(2), written under epoch 1), epoch 0 goes.
    got = compactable(two_expansions(), {0: 10, 1: 19, 2: 0, 3: 0})
    assert got.drop == (0,)
    assert got.base == 1
    assert got.held_by == (2, 1, 20)


def test_a_fully_passed_history_keeps_only_the_newest() -> None:
    got = compactable(two_expansions(), {0: 10, 1: 20})
    assert got.drop == (0, 1)
    assert got.base == 2
    assert got.held_by is None


def test_a_pending_epoch_holds_and_the_newest_always_stays() -> None:
    history = [*two_expansions()[:2], epoch(2, [(1, 3)], {3: 0}, sealed=False)]
    got = compactable(history, {0: 100, 1: 100, 2: 100, 3: 100})
    assert got.drop == (0,)
    assert got.held_by == (2, -1, -1)
    assert compactable(history[:1], {}).drop == ()


def test_a_missing_boundary_holds_the_epoch() -> None:
    history = [epoch(0, [], {}), epoch(1, [(0, 1)], {0: 5}), epoch(2, [], {})]
    assert hold_of(history[1], {0: 5, 1: 5}) is not None
    assert compactable(history, {0: 5, 1: 5}).drop == ()


def test_a_missing_log_start_counts_as_zero() -> None:
    assert compactable(two_expansions(), {1: 20}).drop == ()


def test_a_pin_stops_the_run() -> None:
    starts = {0: 10, 1: 20}
    assert compactable(two_expansions(), starts, pinned={1}).drop == (0,)
    assert compactable(two_expansions(), starts, pinned={0}).drop == ()
    assert compactable(two_expansions(), starts, pinned={2}).drop == (0, 1)


def test_a_passed_epoch_after_one_that_is_not_stays() -> None:
    """Keys went 0 -> 1 at epoch 1 and 1 -> 3 at epoch 3 (initial 1). Epoch 3 is passed
    (partition 1 is trimmed to its boundary), epoch 1 is not (partition 0 is not): the
    gate of 3 at epoch 3 still waits for 0, through the earlier gate of 1 (the "hole"
    rule), so dropping epoch 3 alone would let 3's new records out first."""
    history = [
        epoch(0, [], {}, to_active=1),
        epoch(1, [(0, 1)], {1: 0, 0: 10}, to_active=2),
        epoch(2, [(0, 2)], {2: 0, 0: 20}, to_active=3),
        epoch(3, [(1, 3)], {3: 0, 1: 5}, to_active=4),
        epoch(4, [(0, 4)], {4: 0, 0: 30}, to_active=5),
    ]
    starts = {0: 0, 1: 5, 2: 0, 3: 0, 4: 0}
    assert hold_of(history[3], starts) is None
    assert compactable(history, starts).drop == ()
    view = OffsetMaps({}, starts)
    without = [e for e in history if e.epoch != 3]
    assert not GateEvaluator(history).may_deliver(3, 0, view)
    assert GateEvaluator(without).may_deliver(3, 0, view)


def test_a_duplicate_epoch_is_refused() -> None:
    with pytest.raises(ValueError, match="twice"):
        compactable([epoch(0, [], {}), epoch(0, [], {})], {})


# --- the property ----------------------------------------------------------------------


@dataclass
class Made:
    """A random history with its end offsets."""

    initial: int
    history: list[EpochInfo]
    ends: dict[int, int]


@st.composite
def histories(draw: st.DrawFn) -> Made:
    """A topic taken through real key flows, boundaries from growing end offsets."""
    initial = draw(st.integers(1, 3))
    active = initial
    ends = dict.fromkeys(range(MAX_PARTITIONS), 0)
    infos = [EpochInfo(0, True, (), {}, initial)]
    changes = draw(st.integers(1, 7))
    for number in range(1, changes + 1):
        target = draw(
            st.sampled_from([t for t in range(initial, MAX_PARTITIONS + 1) if t != active])
        )
        edges = key_flow(initial, active, target)
        last = number == changes
        sealed = not last or draw(st.booleans())
        for p in ends:
            ends[p] += draw(st.integers(0, 3))
        bounds = {b: ends[b] for _a, b in edges}  # receivers: at the publish
        for p in ends:
            ends[p] += draw(st.integers(0, 3))
        if sealed:
            bounds.update({a: ends[a] for a, _b in edges})  # givers: at the seal
        infos.append(EpochInfo(number, sealed, tuple(edges), bounds, target))
        active = target
    for p in ends:
        ends[p] += draw(st.integers(0, 2))
    return Made(initial, infos, ends)


@st.composite
def cases(draw: st.DrawFn) -> tuple[Made, dict[int, int], dict[int, int]]:
    made = draw(histories())
    # Log starts often at a boundary (where trims put them) or at the end.
    starts = {}
    for p, end in made.ends.items():
        marks = sorted({0, end, *(e.boundaries[p] for e in made.history if p in e.boundaries)})
        starts[p] = draw(st.sampled_from(marks) | st.integers(0, end))
    committed = {
        p: draw(st.integers(0, end + 1)) for p, end in made.ends.items() if draw(st.booleans())
    }
    return made, starts, committed


def _compacted(history: list[EpochInfo], starts: dict[int, int]) -> list[EpochInfo]:
    drop = set(compactable(history, starts).drop)
    return [e for e in history if e.epoch not in drop]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_compaction_changes_no_gate_decision(
    case: tuple[Made, dict[int, int], dict[int, int]],
) -> None:
    made, starts, committed = case
    kept = _compacted(made.history, starts)
    assert kept[-1] == made.history[-1]
    view = OffsetMaps(dict(committed), dict(starts))
    full, short = GateEvaluator(made.history), GateEvaluator(kept)
    for p, end in made.ends.items():
        for o in range(starts[p], end + 2):
            assert full.may_deliver(p, o, view) == short.may_deliver(p, o, view), (p, o)
            assert full.waiting_on(p, o, view) == short.waiting_on(p, o, view), (p, o)
    # A reader's evaluator, with gates cached from the long history, moved to the short
    # one (the consumer's reload after a compaction and a later change) decides alike.
    full.update(kept)
    for p, end in made.ends.items():
        for o in range(starts[p], end + 2):
            assert full.may_deliver(p, o, view) == short.may_deliver(p, o, view), (p, o)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.data())
def test_compaction_keeps_the_spark_plans(
    case: tuple[Made, dict[int, int], dict[int, int]], data: st.DataObject
) -> None:
    made, starts, committed = case
    kept = _compacted(made.history, starts)
    # Batches start where a query read to (never below log start: Spark's reader
    # starts there), end at Kafka's end.
    start = {p: max(o, starts[p]) for p, o in committed.items()}
    assert gate_caps(made.history, start, made.ends, starts) == gate_caps(
        kept, start, made.ends, starts
    )
    target = {p: data.draw(st.integers(0, end)) for p, end in made.ends.items()}
    raised = available_now_target(kept, target, made.ends)
    # Every gate that governs a record of the batch (at or after log start, below the
    # target) can open inside the batch: its sources are read up to their boundary,
    # or their log start is past it.
    for info in made.history:
        if not info.sealed:
            continue
        for a, b in info.edges:
            first = max(info.boundaries[b], starts[b])
            if first < raised.get(b, 0):
                need = min(info.boundaries[a], made.ends[a])
                assert raised.get(a, 0) >= need or starts[a] >= info.boundaries[a], (info, a, b)


KEYS = [f"k{i}".encode() for i in range(64)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_compaction_keeps_an_epoch_that_places_each_record(
    case: tuple[Made, dict[int, int], dict[int, int]],
) -> None:
    made, starts, _committed = case
    kept = _compacted(made.history, starts)
    layouts = {e.epoch: Layout(made.initial, e.to_active, e.epoch) for e in made.history}
    present = {e.epoch for e in kept}
    for p, end in made.ends.items():
        for o in range(starts[p], end):
            lo, hi = epoch_range(made.history, p, o)
            clo, chi = epoch_range(kept, p, o)
            assert clo <= lo and chi >= hi
            candidates = [layouts[e] for e in range(clo, chi + 1) if e in present]
            for e in range(lo, hi + 1):
                for key in KEYS:
                    if layouts[e].partition_for(key) != p:
                        continue
                    assert any(c.partition_for(key) == p for c in candidates), (p, o, e, key)
