"""Known answers of the one trim-target rule and the one "is trimmed" predicate."""

from __future__ import annotations

import pytest

from coordinator.kernel.errors import LayoutError
from coordinator.kernel.store import RetiredRecord
from coordinator.trims.trim_rules import (
    RetiredPartition,
    consumed_targets,
    is_trimmed,
    retired_state,
    trim_target,
    trimmed_record,
)

DRAINING = RetiredPartition(partition=3, epoch=7, final_offset=50)
PENDING = RetiredPartition(partition=3, epoch=7, final_offset=None)


def record(state: str = "trimmed", epoch: int = 7, final: int = 50) -> RetiredRecord:
    return RetiredRecord(
        topic="t",
        partition=3,
        epoch=epoch,
        final_offset=final,
        state=state,  # type: ignore[arg-type]
        updated_at=1.0,
        trimmed_at=1.0 if state == "trimmed" else None,
    )


@pytest.mark.parametrize(
    ("start", "committed", "end", "kwargs", "expected"),
    [
        # consumed: the minimum committed offset, capped by the high watermark and cut-off
        (0, 40, 100, {}, 40),
        (0, 40, 30, {}, 30),
        (0, 40, 100, {"cutoff": 25}, 25),
        (10, 40, 100, {"cutoff": 5}, None),  # a cut-off behind the log start: nothing
        (40, 40, 100, {}, None),  # already there
        (0, None, 100, {}, None),  # unknown minimum: never trimmed
        # drained: exactly to the final offset once every group is past it
        (0, 60, 100, {"consumed": False, "final": 50}, 50),
        (0, 49, 100, {"consumed": False, "final": 50}, None),
        (0, 50, 100, {"consumed": False, "final": 50}, 50),
        # both: the larger answer wins (retention may cut short of the final offset)
        (0, 60, 100, {"final": 50, "cutoff": 20}, 50),
        (0, 45, 100, {"final": 50, "cutoff": 30}, 30),
        (0, 70, 100, {"final": 50, "cutoff": 65}, 65),
        # no rule applies
        (0, 60, 100, {"consumed": False}, None),
    ],
)
def test_trim_target_known_answers(
    start: int, committed: int | None, end: int, kwargs: dict[str, object], expected: int | None
) -> None:
    assert trim_target(start, committed, end, **kwargs) == expected  # type: ignore[arg-type]


class Floor:
    def __init__(self, lows: dict[int, int]) -> None:
        self.lows = lows

    def min_committed(self, partition: int) -> int | None:
        return self.lows.get(partition)


def test_consumed_targets_is_the_rule_per_partition() -> None:
    floor = Floor({0: 40, 1: 10, 2: 5})
    starts, ends = {0: 0, 1: 0, 2: 5, 3: 0}, {0: 100, 1: 100, 2: 100, 3: 100}
    assert consumed_targets(floor, starts, ends) == {0: 40, 1: 10}
    # with cut-offs (the retention sweep), a partition without one stays where it is
    assert consumed_targets(floor, starts, ends, {0: 20, 2: 9}) == {0: 20}


@pytest.mark.parametrize(
    ("retired", "stored", "start", "expected"),
    [
        (DRAINING, None, 50, True),  # log start at the final offset
        (DRAINING, None, 51, True),
        (DRAINING, None, 49, False),
        (DRAINING, None, None, False),  # no log start and no record: not known trimmed
        (DRAINING, record(), 0, True),  # the record of this retirement says so
        (DRAINING, record(), None, True),
        (DRAINING, record("draining"), 0, False),
        (DRAINING, record(epoch=4), 0, False),  # an older retirement of the partition
        (DRAINING, record(final=30), 0, False),
        (PENDING, record(), 100, False),  # a pending epoch is never trimmed
    ],
)
def test_is_trimmed_known_answers(
    retired: RetiredPartition, stored: RetiredRecord | None, start: int | None, expected: bool
) -> None:
    assert is_trimmed(retired, stored, start) is expected


def test_retired_state() -> None:
    assert retired_state(PENDING, None, 0) == "retiring"
    assert retired_state(DRAINING, None, 10) == "draining"
    assert retired_state(DRAINING, None, 50) == "trimmed"
    assert retired_state(DRAINING, record(), 10) == "trimmed"


def test_trimmed_record_keeps_a_matching_record_and_refuses_a_pending_epoch() -> None:
    kept = record()
    assert trimmed_record("t", DRAINING, kept, now=9.0) is kept
    fresh = trimmed_record("t", DRAINING, record("draining"), now=9.0)
    assert (fresh.state, fresh.epoch, fresh.final_offset, fresh.trimmed_at) == (
        "trimmed",
        7,
        50,
        9.0,
    )
    with pytest.raises(LayoutError):
        trimmed_record("t", PENDING, None)
