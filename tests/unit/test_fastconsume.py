"""The compiled batch scan (``ordered._fastconsume.scan``) against its reference, ``scan_batch``.

Both run on the same generated batches (hypothesis): records of a few partitions with
growing offsets, keys, headers and error events; limits (gates, paused partitions),
audit spans, the sampling step, the header and key audits on and off. Their results
(how many records pass, each partition's last offset among them) must be equal.
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, Message
from hypothesis import given, settings
from hypothesis import strategies as st

from linear_hash import Layout
from ordered.compiled import compiled_router
from ordered.consumer.judge import BatchFilter
from ordered.consumer.partition import PartitionGate, PartState
from ordered.consumer.scan import SCAN, SPLIT, scan_batch, split_batch

pytestmark = pytest.mark.skipif(SCAN is None, reason="ordered._fastconsume not built")

HEADER = [("ordered.epoch", b"\x00\x00\x00\x03")]
OTHER_HEADER = [("ordered.epoch", b"\x00\x00\x00\x04")]
LAYOUT = Layout(4, 4, 0)
ROUTE = compiled_router(LAYOUT).partition  # type: ignore[attr-defined]


def _keys() -> st.SearchStrategy[Any]:
    return st.one_of(
        st.binary(min_size=0, max_size=6),
        st.text(alphabet="abcxyz", max_size=4),
        st.none(),
    )


@st.composite
def batches(draw: st.DrawFn) -> list[Any]:
    partitions = draw(st.integers(1, 5))
    next_offset = {p: draw(st.integers(0, 50)) for p in range(partitions)}
    out = []
    for _ in range(draw(st.integers(0, 60))):
        kind = draw(st.integers(0, 40))
        if kind == 0:
            out.append(Message(topic="t", error=KafkaError(KafkaError._PARTITION_EOF)))
            continue
        p = draw(st.integers(0, partitions - 1))
        offset = next_offset[p]
        next_offset[p] += draw(st.integers(1, 3))
        key = draw(_keys())
        if draw(st.booleans()) and isinstance(key, bytes):
            p_routed = ROUTE(key)  # mostly keys where they route, as a layer producer puts them
            if p_routed < partitions:
                p = p_routed
                offset = next_offset.setdefault(p, 0)
                next_offset[p] += 1
        headers = draw(st.sampled_from([None, HEADER, HEADER, OTHER_HEADER]))
        if kind == 1:
            offset = -1  # no offset: what the method reads as None
        out.append(Message(topic="t", partition=p, offset=offset, key=key, headers=headers))
    return out


bounds = st.one_of(st.integers(-1, 200), st.just(math.inf), st.floats(0, 200))


@settings(max_examples=200, deadline=None)
@given(
    batch=batches(),
    every=st.integers(1, 5),
    limits=st.dictionaries(st.integers(-1, 6), bounds, max_size=6),
    spans=st.dictionaries(st.integers(0, 6), st.tuples(st.integers(0, 60), bounds), max_size=6),
    header=st.sampled_from([None, HEADER]),
    keyed=st.booleans(),
)
def test_compiled_scan_equals_the_reference(
    batch: list[Any],
    every: int,
    limits: dict[int, Any],
    spans: dict[int, tuple[Any, Any]],
    header: Any,
    keyed: bool,
) -> None:
    route = ROUTE if keyed else None
    assert SCAN is not None
    assert SCAN(batch, every, limits, spans, header, route) == scan_batch(
        batch, every, limits, spans, header, route
    )


@settings(max_examples=200, deadline=None)
@given(batch=batches(), held=st.sets(st.integers(-1, 6), max_size=4))
def test_compiled_split_equals_the_reference(batch: list[Any], held: set[int]) -> None:
    assert SPLIT is not None
    compiled: dict[int, list[Any]] = {p: [] for p in held}
    reference: dict[int, list[Any]] = {p: [] for p in held}
    free = SPLIT(batch, compiled)
    assert free is not None
    assert [id(m) for m in free] == [id(m) for m in split_batch(batch, reference)]
    assert {p: [id(m) for m in v] for p, v in compiled.items()} == {
        p: [id(m) for m in v] for p, v in reference.items()
    }
    # Nothing lost, nothing twice.
    assert sorted(id(m) for m in batch) == sorted(
        [id(m) for m in free] + [id(m) for v in compiled.values() for m in v]
    )


def test_split_leaves_other_objects_to_the_reference() -> None:
    assert SPLIT is not None
    held: dict[int, list[Any]] = {0: []}
    batch = [Message(topic="t", partition=0, offset=1), object()]
    assert SPLIT(batch, held) is None and held == {0: []}  # nothing appended
    assert SPLIT((), held) is None


def test_a_clean_batch_is_served_whole() -> None:
    """No gate, every key where it routes, the header in force: all of it, its last offsets."""
    batch = []
    for i in range(40):
        key = f"k{i}".encode()
        p = ROUTE(key)
        batch.append(Message(topic="t", partition=p, offset=100 + i, key=key, headers=HEADER))
    limits = {p: math.inf for p in range(4)}
    spans = {p: (0, math.inf) for p in range(4)}
    expected = {}
    for m in batch:
        expected[m.partition()] = m.offset()
    assert SCAN is not None
    assert SCAN(batch, 3, limits, spans, HEADER, ROUTE) == (40, expected)
    # A gate at the 11th record's offset: the scan ends there.
    gated = dict(limits)
    gated[batch[10].partition()] = batch[10].offset()
    n, _last = SCAN(batch, 3, gated, spans, HEADER, ROUTE)
    assert n == 10


def test_a_misrouted_sampled_key_ends_the_scan() -> None:
    key = b"k1"
    wrong = (ROUTE(key) + 1) % 4
    batch = [Message(topic="t", partition=wrong, offset=7, key=key, headers=HEADER)]
    assert SCAN is not None
    assert SCAN(batch, 1, {wrong: math.inf}, {wrong: (0, math.inf)}, HEADER, ROUTE) == (0, {})
    # Without the key audit it passes.
    assert SCAN(batch, 1, {wrong: math.inf}, {wrong: (0, math.inf)}, HEADER, None) == (
        1,
        {wrong: 7},
    )


@settings(max_examples=100, deadline=None)
@given(
    partitions=st.lists(st.integers(0, 300), min_size=1, max_size=40),
    gated=st.integers(0, 300),
    keyed=st.booleans(),
)
def test_a_topic_wider_than_the_stack_arrays_scans_as_the_reference(
    partitions: list[int], gated: int, keyed: bool
) -> None:
    """Partitions past 63 take the scan's second pass, with arrays sized to the batch."""
    batch = [
        Message(topic="t", partition=p, offset=10 + i, key=f"k{i}".encode())
        for i, p in enumerate(partitions)
    ]
    limits: dict[int, Any] = {p: math.inf for p in set(partitions)}
    limits[gated] = 20  # a gate: records of it at offset 20 or past end the scan
    spans = {p: (0, math.inf) for p in set(partitions)}
    route = (lambda key: int(key[1:]) % 301) if keyed else None
    assert SCAN is not None
    assert SCAN(batch, 3, limits, spans, None, route) == scan_batch(
        batch, 3, limits, spans, None, route
    )


def test_a_partition_past_the_bound_anywhere_is_left_to_the_reference() -> None:
    batch = _batch((0, 1), (1, 2))
    batch.append(Message(topic="t", partition=70_000, offset=3, key=b"k"))
    assert SCAN is not None
    # The scan ends at the gate of partition 1, before the record past the bound: the
    # answer does not depend on where it ended.
    assert SCAN(batch, 1, {0: math.inf, 1: 0}, {}, None, None) is None
    assert scan_batch(batch, 1, {0: math.inf, 1: 0}, {}, None, None) is None


def test_other_objects_are_left_to_the_reference() -> None:
    assert SCAN is not None
    assert SCAN([object()], 1, {}, {}, None, None) is None
    assert SCAN((), 1, {}, {}, None, None) is None  # not a list


# --- BatchFilter.judge_covered: the gates and the covered offsets in the one pass --------


def _judging_filter(limits: dict[int, float], compacted: bool = False) -> Any:
    parts = {
        ("t", p): PartState("t", p, PartitionGate("t", p, limit)) for p, limit in limits.items()
    }
    view = SimpleNamespace(ordered=False, compacted=compacted, gates=None)
    settings = SimpleNamespace(header_audit=False, key_audit=False, audit_every=16)
    core = SimpleNamespace(
        parts=parts,
        layouts=SimpleNamespace(topics={"t": view}, covered_version=0),
        config=SimpleNamespace(ordered=settings),
        version=0,
    )
    flt = BatchFilter(core, None)  # type: ignore[arg-type]
    flt.single = "t"
    flt.core = core  # type: ignore[attr-defined]  # for the tests of the cached limits
    return flt, parts


def _batch(*records: tuple[int, int]) -> list[Any]:
    return [Message(topic="t", partition=p, offset=o, key=b"k") for p, o in records]


def test_judge_covered_passes_a_batch_below_both_the_gates_and_the_marks() -> None:
    flt, parts = _judging_filter({0: math.inf, 1: 50})
    batch = _batch((0, 10), (1, 20), (0, 11))
    assert flt.judge_covered(batch, {("t", 0): 100, ("t", 1): 100}) == {("t", 0): 11, ("t", 1): 20}
    assert parts[("t", 0)].start == 10 and parts[("t", 1)].start == 20  # where delivery starts


def test_judge_covered_refuses_a_record_at_its_covered_offset() -> None:
    flt, _parts = _judging_filter({0: math.inf, 1: math.inf})
    covered = {("t", 0): 100, ("t", 1): 21}
    # Without the marks in the limits the batch passes (no gate is in the way): 1@21
    # was written after the check that covered partition 1 began.
    assert flt.judge_covered(_batch((0, 10), (1, 21)), covered) is None
    assert flt.judge_covered(_batch((0, 10), (1, 20)), covered) is not None
    flt.core.layouts.covered_version += 1  # as LayoutTracker does at every change
    assert flt.judge_covered(_batch((0, 10)), {("t", 1): 100}) is None  # 0 not covered at all


def test_judge_covered_refuses_a_gate_or_a_paused_partition() -> None:
    flt, parts = _judging_filter({0: math.inf, 1: 20})
    covered = {("t", 0): 100, ("t", 1): 100}
    assert flt.judge_covered(_batch((1, 20)), covered) is None  # at the gate's limit
    parts[("t", 0)].gate.state = parts[("t", 0)].gate.state.BLOCKED
    flt.core.version += 1  # as Core.fire, the one way a gate changes, does
    assert flt.judge_covered(_batch((0, 1)), covered) is None


def test_judge_covered_leaves_a_compacted_topic_to_the_record_by_record_path() -> None:
    flt, _parts = _judging_filter({0: math.inf}, compacted=True)
    assert flt.judge_covered(_batch((0, 1)), {("t", 0): 100}) is None


def test_judge_covered_limits_follow_the_gates_and_the_coverage() -> None:
    flt, parts = _judging_filter({0: math.inf})
    covered = {("t", 0): 100}
    assert flt.judge_covered(_batch((0, 50)), covered) is not None
    # A gate closes at 40: Core.fire bumps the version, and the cached limits go.
    parts[("t", 0)].gate.limit = 40
    flt.core.version += 1
    assert flt.judge_covered(_batch((0, 50)), covered) is None
    parts[("t", 0)].gate.limit = math.inf
    flt.core.version += 1
    assert flt.judge_covered(_batch((0, 50)), covered) is not None
    # The partition moved (a seek): its coverage is forgotten, and the version says so.
    del covered[("t", 0)]
    flt.core.layouts.covered_version += 1
    assert flt.judge_covered(_batch((0, 50)), covered) is None
