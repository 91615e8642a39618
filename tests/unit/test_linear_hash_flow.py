"""Key flow, sources, blockers and gate plans across layout changes."""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linear_hash import Layout, blockers, children, gate_plan, key_flow, parent, route, sources


def covering_modulus(initial: int, *actives: int) -> int:
    """initial * 2**(Lmax + 1): every route under any of ``actives`` depends on h mod it."""
    top = max(actives)
    level = 0
    while initial * 2 ** (level + 1) <= top:
        level += 1
    return int(initial * 2 ** (level + 1))


def brute_flow(initial: int, old: int, new: int) -> set[tuple[int, int]]:
    return {
        (a, b)
        for h in range(covering_modulus(initial, old, new))
        if (a := route(h, initial, old)) != (b := route(h, initial, new))
    }


def closure(partition: int, initial: int, old: int, new: int) -> set[int]:
    seen: set[int] = set()
    stack = [partition]
    while stack:
        for b in blockers(stack.pop(), initial, old, new):
            if b not in seen:
                seen.add(b)
                stack.append(b)
    return seen


@st.composite
def changes(draw: st.DrawFn, max_initial: int = 10, max_factor: int = 20) -> tuple[int, int, int]:
    initial = draw(st.integers(1, max_initial))
    old = draw(st.integers(initial, initial * max_factor))
    new = draw(st.integers(initial, initial * max_factor))
    return initial, old, new


# --- Known answers ------------------------------------------------------------------------


def test_key_flow_known_answers() -> None:
    assert key_flow(4, 4, 5) == [(0, 4)]
    assert key_flow(4, 5, 4) == [(4, 0)]
    assert key_flow(4, 6, 6) == []
    assert key_flow(1, 1, 8) == [(0, 1), (0, 2), (0, 3), (0, 4), (0, 5), (0, 6), (0, 7)]
    assert key_flow(1, 2, 8) == [(0, 2), (0, 4), (0, 6), (1, 3), (1, 5), (1, 7)]
    assert key_flow(3, 5, 12) == [(0, 6), (1, 7), (2, 5), (2, 8), (2, 11), (3, 9), (4, 10)]
    assert key_flow(3, 12, 5) == [
        (5, 2), (6, 0), (7, 1), (8, 2), (9, 3), (10, 4), (11, 2)
    ]  # fmt: skip


def test_sources_and_blockers_known_answers() -> None:
    # Expansion 1 -> 8: every new partition waits on 0 only.
    assert [sources(p, 1, 1, 8) for p in range(8)] == [[], [0], [0], [0], [0], [0], [0], [0]]
    assert [blockers(p, 1, 1, 8) for p in range(8)] == [[], [0], [0], [0], [0], [0], [0], [0]]
    # Shrink 8 -> 1: 0 inherits everything, but is directly blocked by 1, 2, 4 only.
    assert sources(0, 1, 8, 1) == [1, 2, 3, 4, 5, 6, 7]
    assert blockers(0, 1, 8, 1) == [1, 2, 4]
    assert blockers(1, 1, 8, 1) == [3, 5]
    assert blockers(3, 1, 8, 1) == [7]
    assert blockers(7, 1, 8, 1) == []
    assert sources(3, 1, 8, 1) == []  # retired: receives nothing
    # Shrink 12 -> 5 with initial 3: 2 inherits 5, 8, 11 (11's parent is 5).
    assert sources(2, 3, 12, 5) == [5, 8, 11]
    assert blockers(2, 3, 12, 5) == [5, 8]
    assert blockers(5, 3, 12, 5) == [11]
    assert sources(4, 3, 12, 5) == [10]
    assert blockers(4, 3, 12, 5) == [10]
    # Partitions beyond both counts are untouched.
    assert sources(40, 3, 12, 5) == blockers(40, 3, 12, 5) == []


def test_gate_plan_known_answer() -> None:
    history = [Layout(1, 1, 0), Layout(1, 4, 1), Layout(1, 2, 2), Layout(1, 8, 5), Layout(1, 8, 6)]
    assert gate_plan(0, history) == [(2, [2])]
    assert gate_plan(1, history) == [(1, [0]), (2, [3])]
    # 3 is new at 1, retired at 2 (no child retired with it), re-activated at 5.
    assert gate_plan(3, history) == [(1, [0]), (5, [1])]
    assert gate_plan(2, history) == [(1, [0]), (5, [0])]
    # Re-activated at 5 (2 -> 8): the old active source, not the tree parent (3 or 2).
    assert gate_plan(7, history) == [(5, [1])]
    assert gate_plan(6, history) == [(5, [0])]
    assert gate_plan(9, history) == []
    assert gate_plan(0, []) == []
    assert gate_plan(0, [Layout(2, 3)]) == []


# --- Properties ---------------------------------------------------------------------------


@settings(max_examples=150, deadline=None)
@given(c=changes())
def test_key_flow_equals_brute_force_scan_of_all_residues(c: tuple[int, int, int]) -> None:
    initial, old, new = c
    flow = key_flow(initial, old, new)
    assert flow == sorted(flow)
    assert len(flow) == len(set(flow))
    assert set(flow) == brute_flow(initial, old, new)
    assert all(a != b for a, b in flow)


@settings(max_examples=100, deadline=None)
@given(c=changes(max_initial=300, max_factor=3), hashes=st.lists(st.integers(0, 2**32 - 1)))
def test_key_flow_covers_random_hashes(c: tuple[int, int, int], hashes: list[int]) -> None:
    initial, old, new = c
    flow = set(key_flow(initial, old, new))
    for h in hashes:
        a, b = route(h, initial, old), route(h, initial, new)
        assert a == b or (a, b) in flow


@settings(max_examples=150, deadline=None)
@given(c=changes())
def test_sources_are_exactly_the_flow_into_each_partition(c: tuple[int, int, int]) -> None:
    initial, old, new = c
    flow = brute_flow(initial, old, new)
    for p in range(max(old, new) + 2):
        assert sources(p, initial, old, new) == sorted(a for a, b in flow if b == p)


@settings(max_examples=150, deadline=None)
@given(c=changes())
def test_closure_of_blockers_is_sources(c: tuple[int, int, int]) -> None:
    initial, old, new = c
    for p in range(max(old, new) + 2):
        src = set(sources(p, initial, old, new))
        if p < new:
            assert closure(p, initial, old, new) == src
        else:
            # A retired (or never active) partition receives nothing; its blockers only
            # describe the chain its own ancestor waits along.
            assert src == set()


@settings(max_examples=150, deadline=None)
@given(c=changes())
def test_expansion_blocks_each_new_partition_on_exactly_one_old(c: tuple[int, int, int]) -> None:
    initial, old, new = c
    lo, hi = min(old, new), max(old, new)
    for p in range(hi + 1):
        b = blockers(p, initial, lo, hi)
        if lo <= p < hi:
            assert len(b) == 1
            assert b[0] < lo
            assert b == [route(p, initial, lo)]
        else:
            assert b == []


@settings(max_examples=150, deadline=None)
@given(c=changes(max_factor=64))
def test_shrink_blockers_are_direct_retired_children_and_few(c: tuple[int, int, int]) -> None:
    initial, old, new = c
    lo, hi = min(old, new), max(old, new)
    bound = math.ceil(math.log2(hi / initial)) + 1
    for p in range(hi + 1):
        b = blockers(p, initial, hi, lo)
        assert len(b) <= bound
        assert all(parent(x, initial) == p and lo <= x < hi for x in b)
        assert b == [x for x in children(p, initial, hi) if x >= lo]


@settings(max_examples=100, deadline=None)
@given(
    initial=st.integers(1, 6),
    actives=st.lists(st.integers(0, 60), min_size=1, max_size=8),
    partition=st.integers(0, 400),
)
def test_gate_plan_is_blockers_per_epoch(initial: int, actives: list[int], partition: int) -> None:
    history = [Layout(initial, initial + a, epoch=3 * i) for i, a in enumerate(actives)]
    plan = gate_plan(partition, history)
    expected = [
        (cur.epoch, blockers(partition, initial, prev.active, cur.active))
        for prev, cur in itertools.pairwise(history)
    ]
    assert plan == [(e, b) for e, b in expected if b]


# --- Bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize("fn", [sources, blockers])
def test_sources_blockers_bad_input(fn: Callable[..., list[int]]) -> None:
    call = fn
    with pytest.raises(TypeError, match=r"^partition must be an int, not str"):
        call("1", 1, 2, 4)
    with pytest.raises(ValueError, match=r"^partition must be >= 0"):
        call(-1, 1, 2, 4)
    with pytest.raises(ValueError, match=r"^initial must be >= 1"):
        call(1, 0, 2, 4)
    with pytest.raises(ValueError, match=r"^old_active must be >= initial \(3\), got 2"):
        call(1, 3, 2, 4)
    with pytest.raises(ValueError, match=r"^new_active must be >= initial \(3\), got 1"):
        call(1, 3, 4, 1)


def test_key_flow_bad_input() -> None:
    with pytest.raises(ValueError, match=r"^initial must be >= 1, got 0"):
        key_flow(0, 1, 2)
    with pytest.raises(ValueError, match=r"^old_active must be >= initial"):
        key_flow(4, 3, 8)
    with pytest.raises(ValueError, match=r"^new_active must be >= initial"):
        key_flow(4, 8, 3)
    with pytest.raises(TypeError, match=r"^new_active must be an int, not float"):
        key_flow(4, 8, 5.0)  # type: ignore[arg-type]


def test_gate_plan_bad_input() -> None:
    with pytest.raises(TypeError, match=r"^partition must be an int, not NoneType"):
        gate_plan(None, [Layout(1, 1)])  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^history\[1\] must be a Layout, not tuple"):
        gate_plan(0, [Layout(1, 1), (1, 2, 1)])  # type: ignore[list-item]
    with pytest.raises(ValueError, match=r"^history mixes initial counts"):
        gate_plan(0, [Layout(1, 1, 0), Layout(2, 2, 1)])
    with pytest.raises(ValueError, match=r"^history epochs must strictly increase"):
        gate_plan(0, [Layout(1, 1, 1), Layout(1, 2, 1)])
