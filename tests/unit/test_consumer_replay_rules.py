"""Rule 2 of the replay rules (``ordered/consumer/replay.py``): the group's progress on
a partition this consumer owns is at most its own position. Pure: a stand-in core."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from ordered.consumer.partition import PartitionGate, PartState
from ordered.consumer.replay import cap_to_positions


def core_with(parts: dict[int, tuple[int | None, int | None]], guard: bool = True) -> Any:
    """A core owning ``parts`` (partition -> (position, start)) of topic ``t``."""
    owned = {}
    for partition, (position, start) in parts.items():
        part = PartState("t", partition, PartitionGate("t", partition))
        part.position, part.start = position, start
        owned[("t", partition)] = part
    return SimpleNamespace(parts=owned, replay_guard=guard)


def test_an_owned_partition_counts_at_most_its_own_position() -> None:
    # 0: sought back to 10 (the group still says 500); 1: nothing delivered yet, the
    # first record fetched at 40; 2: caught up; 3: not ours.
    core = core_with({0: (10, None), 1: (None, 40), 2: (700, 650)})
    committed = {0: 500, 1: 90, 2: 700, 3: 800}
    cap_to_positions(core, "t", committed)
    assert committed == {0: 10, 1: 40, 2: 700, 3: 800}


def test_another_topic_and_no_position_leave_the_committed_offsets() -> None:
    core = core_with({0: (None, None)})
    committed = {0: 500}
    cap_to_positions(core, "t", committed)
    cap_to_positions(core, "other", committed)
    assert committed == {0: 500}


def test_without_the_guard_nothing_is_capped() -> None:
    core = core_with({0: (10, None)}, guard=False)
    committed = {0: 500}
    cap_to_positions(core, "t", committed)
    assert committed == {0: 500}
