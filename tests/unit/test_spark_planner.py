"""The Spark source's pure planning: gate caps, Spark's read-limit split, ranges, offsets JSON.

No Spark, no servers: known answers for the rules the integration tests exercise.
"""

from __future__ import annotations

import json

import pytest

from coordinator.kernel.errors import ConfigError
from linear_hash.gating import EpochInfo
from spark_source.offsets import from_spark, to_json, to_spark
from spark_source.planner import (
    OffsetRange,
    available_now_target,
    backlog,
    gate_caps,
    offset_ranges,
    rate_limit,
)

# 2 -> 3 partitions at epoch 1 (0 gives keys to 2), 3 -> 4 at epoch 2 (1 gives to 3).
EXPAND = (
    EpochInfo(0, True),
    EpochInfo(1, True, ((0, 2),), {0: 100, 2: 0}),
    EpochInfo(2, True, ((1, 3),), {1: 80, 3: 0}),
)


def test_caps_hold_receivers_until_their_sources_reach_the_boundary() -> None:
    end = {0: 150, 1: 120, 2: 40, 3: 30}
    caps = gate_caps(EXPAND, {0: 0, 1: 0}, end, {})
    # Sources move freely (past their own boundaries); receivers wait at B_b(e) = 0.
    assert caps == {0: 150, 1: 120, 2: 0, 3: 0}
    # Once the batch's start has 0 at B_0(1), partition 2 opens; 3 still waits on 1.
    caps = gate_caps(EXPAND, {0: 100, 1: 79, 2: 0, 3: 0}, end, {})
    assert caps == {0: 150, 1: 120, 2: 40, 3: 0}
    caps = gate_caps(EXPAND, {0: 150, 1: 80, 2: 0, 3: 0}, end, {})
    assert caps == {0: 150, 1: 120, 2: 40, 3: 30}


def test_a_pending_epoch_blocks_its_receivers_at_their_boundary() -> None:
    pending = (EpochInfo(0, True), EpochInfo(1, False, ((0, 2),), {2: 5}))
    caps = gate_caps(pending, {0: 500, 1: 0, 2: 0}, {0: 600, 1: 10, 2: 20}, {})
    assert caps == {0: 600, 1: 10, 2: 5}


def test_trimmed_records_count_as_passed() -> None:
    # 0 never read to B_0(1) = 100, but its log now starts at 100: the gate is open.
    caps = gate_caps(EXPAND, {0: 10, 1: 0}, {0: 150, 1: 0, 2: 40}, {0: 100})
    assert caps[2] == 40


def test_a_cap_never_goes_below_the_start() -> None:
    # startingOffsets put 2 past its closed gate: it stays where it is.
    caps = gate_caps(EXPAND, {0: 0, 1: 0, 2: 30}, {0: 150, 1: 0, 2: 40}, {})
    assert caps[2] == 30


def test_shrink_gates_the_partition_that_takes_keys_back() -> None:
    # 4 -> 3 at epoch 3: 3 gives its keys back to 1.
    history = (*EXPAND, EpochInfo(3, True, ((3, 1),), {3: 50, 1: 200}))
    end = {0: 300, 1: 260, 2: 90, 3: 50}
    caps = gate_caps(history, {0: 300, 1: 80, 2: 90, 3: 10}, end, {})
    assert caps[1] == 200 and caps[3] == 50
    caps = gate_caps(history, {0: 300, 1: 200, 2: 90, 3: 50}, end, {})
    assert caps[1] == 260


def test_available_now_target_reaches_a_source_boundary_past_it() -> None:
    # Sealed after the freeze: B_0(1) = 130 lies past the frozen 120 of partition 0.
    history = (EpochInfo(0, True), EpochInfo(1, True, ((0, 2),), {0: 130, 2: 10}))
    target = available_now_target(history, {0: 120, 1: 5, 2: 30}, {0: 140, 1: 5, 2: 30})
    assert target == {0: 130, 1: 5, 2: 30}
    # No raise when the receiving gate lies at or past the receiver's target.
    assert available_now_target(history, {0: 120, 2: 10}, {0: 140, 2: 30}) == {0: 120, 2: 10}


def test_rate_limit_splits_by_backlog_at_least_one_each() -> None:
    start = {"t": {0: 0, 1: 0, 2: 0}}
    end = {"t": {0: 900, 1: 99, 2: 1}}
    out = rate_limit(start, end, 100)
    # 100 * 900/1000 = 90; 100 * 99/1000 = 9.9 -> 9; 100 * 1/1000 = 0.1 -> 1.
    assert out == {"t": {0: 90, 1: 9, 2: 1}}


def test_rate_limit_ignores_partitions_held_at_their_gate() -> None:
    # Partition 2 is capped at its start (closed gate): the whole limit goes to 0 and 1.
    start = {"t": {0: 10, 1: 10, 2: 5}}
    capped = {"t": {0: 1010, 1: 1010, 2: 5}}
    out = rate_limit(start, capped, 100)
    assert out == {"t": {0: 60, 1: 60, 2: 5}}
    assert backlog(start, out) == 100


def test_rate_limit_counts_new_partitions_from_zero() -> None:
    out = rate_limit({"t": {0: 0}}, {"t": {0: 50, 1: 50}}, 10)
    assert out == {"t": {0: 5, 1: 5}}


def test_offset_ranges_one_per_partition_with_data_sorted() -> None:
    ranges = offset_ranges({"b": {0: 5}, "a": {1: 0}}, {"b": {0: 9, 1: 0}, "a": {1: 3, 0: 2}})
    assert ranges == [
        OffsetRange("a", 0, 0, 2),
        OffsetRange("a", 1, 0, 3),
        OffsetRange("b", 0, 5, 9),
    ]
    assert offset_ranges({"t": {0: 5}}, {"t": {0: 5}}) == []


def test_offset_ranges_split_for_min_partitions() -> None:
    ranges = offset_ranges({"t": {0: 0, 1: 0}}, {"t": {0: 300, 1: 100}}, min_partitions=4)
    assert [(r.partition, r.start, r.end) for r in ranges] == [
        (0, 0, 100),
        (0, 100, 200),
        (0, 200, 300),
        (1, 0, 100),
    ]


def test_offsets_json_is_canonical_and_round_trips() -> None:
    offsets = {"zeta": {10: 1, 2: 7}, "alpha": {0: 23}}
    spark = to_spark(offsets)
    assert to_json(offsets) == '{"alpha":{"0":23},"zeta":{"2":7,"10":1}}'
    # Spark hands the dict back through JSON: string keys, same order.
    back = json.loads(json.dumps(spark))
    assert from_spark(back) == {"alpha": {0: 23}, "zeta": {2: 7, 10: 1}}
    assert json.dumps(to_spark(from_spark(back))) == json.dumps(spark)
    assert from_spark(None) == {}


def test_offsets_of_another_source_are_refused() -> None:
    with pytest.raises(ConfigError, match="not an ordered-kafka offset"):
        from_spark({"index": 3})
