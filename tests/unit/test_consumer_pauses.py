"""The pause arbiter's rules (:class:`ordered.consumer.state.PauseArbiter`), with a fake librdkafka:
the union of the owners' wishes, each owner's own, a partition that leaves and comes
back, the application's pauses of partitions not tracked, and the gate taking over a
pause it would have made itself."""

from __future__ import annotations

import pytest
from confluent_kafka import TopicPartition

from ordered.consumer.partition import GateEvent, PartitionGate, PartState, PauseOwner
from ordered.consumer.state import PauseArbiter

GATE, APP = PauseOwner.GATE, PauseOwner.APPLICATION


class Librdkafka:
    """librdkafka's pause flags, and the calls made to them."""

    def __init__(self) -> None:
        self.paused: set[tuple[str, int]] = set()
        self.calls: list[tuple[str, list[tuple[str, int]]]] = []

    def pause(self, tps: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in tps]
        self.calls.append(("pause", keys))
        self.paused.update(keys)

    def resume(self, tps: list[TopicPartition]) -> None:
        keys = [(tp.topic, tp.partition) for tp in tps]
        self.calls.append(("resume", keys))
        self.paused.difference_update(keys)


def _part(partition: int = 0) -> PartState:
    return PartState("t", partition, PartitionGate("t", partition), position=0)


def _arbiter(keep: bool = True) -> tuple[PauseArbiter[PartState], Librdkafka]:
    kafka = Librdkafka()
    return PauseArbiter(kafka, lambda part: keep), kafka


def test_paused_while_any_owner_wishes_it() -> None:
    arbiter, kafka = _arbiter()
    part = _part()
    arbiter.wish(GATE, [part])
    arbiter.wish(APP, [part])  # already paused: librdkafka is not told again
    assert kafka.calls == [("pause", [("t", 0)])]
    arbiter.unwish(GATE, [part])  # a gate that opens: the application's pause holds
    assert kafka.paused == {("t", 0)} and part.gate.user_paused
    arbiter.unwish(APP, [part])
    assert kafka.calls[-1] == ("resume", [("t", 0)]) and not kafka.paused
    assert not part.gate.pauses.wishes and not part.gate.pauses.applied


def test_the_applications_resume_leaves_a_gates_pause() -> None:
    arbiter, kafka = _arbiter()
    part = _part()
    arbiter.application([TopicPartition("t", 0)], {("t", 0): part}, pause=True)
    arbiter.wish(GATE, [part])
    arbiter.application([TopicPartition("t", 0)], {("t", 0): part}, pause=False)
    assert kafka.paused == {("t", 0)} and part.fetch_paused and not part.gate.user_paused
    arbiter.unwish(GATE, [part])
    assert not kafka.paused


def test_each_owner_lets_go_of_its_own_wish_only() -> None:
    arbiter, kafka = _arbiter()
    part = _part()
    arbiter.unwish(APP, [part])  # never wished: nothing to do
    assert kafka.calls == []
    arbiter.wish(APP, [part])
    arbiter.unwish(GATE, [part])  # not the gate's pause
    assert kafka.paused == {("t", 0)} and part.gate.pauses.wishes == {APP}


def test_one_call_for_many_partitions_and_none_for_no_change() -> None:
    arbiter, kafka = _arbiter()
    parts = [_part(p) for p in range(3)]
    arbiter.wish(APP, parts)
    arbiter.wish(APP, parts)
    arbiter.wish(GATE, parts[:1])
    arbiter.unwish(APP, parts)
    assert kafka.calls == [
        ("pause", [("t", 0), ("t", 1), ("t", 2)]),
        ("resume", [("t", 1), ("t", 2)]),
    ]


@pytest.mark.parametrize("keep", [True, False])
def test_a_held_gate_takes_over_a_pause_only_if_it_would_have_paused(keep: bool) -> None:
    """The last owner lets go of a partition its gate holds: kept paused (the gate
    resumes it when it opens) only if the gate's own rule would pause it; else resumed
    now, so that its records are fetched into the stash meanwhile."""
    arbiter, kafka = _arbiter(keep)
    part = _part()
    arbiter.wish(APP, [part])
    part.gate.fire(GateEvent.GATE_CLOSED, float("inf"), held=5)
    arbiter.unwish(APP, [part])
    assert (kafka.paused == {("t", 0)}) is keep
    assert part.fetch_paused is keep


def test_a_partition_that_leaves_keeps_only_the_applications_pause() -> None:
    """librdkafka keeps a pause across a revocation and a new assignment (2.16, measured):
    the gate's is lifted, the application's stays and holds again
    when the partition comes back."""
    arbiter, kafka = _arbiter()
    held, mine = _part(0), _part(1)
    arbiter.wish(GATE, [held])
    arbiter.application([TopicPartition("t", 1)], {("t", 1): mine}, pause=True)
    arbiter.wish(GATE, [mine])
    arbiter.left(held)
    arbiter.left(mine)
    assert kafka.paused == {("t", 1)}
    back, fresh = _part(1), _part(0)
    arbiter.arrived(back)
    arbiter.arrived(fresh)
    assert back.gate.user_paused and back.gate.pauses.applied and not back.fetch_paused
    assert not fresh.gate.pauses.wishes and not fresh.gate.pauses.applied
    arbiter.wish(GATE, [back])
    arbiter.unwish(GATE, [back])  # a gate of the new assignment opens: still paused
    assert kafka.paused == {("t", 1)}
    arbiter.application([TopicPartition("t", 1)], {("t", 1): back}, pause=False)
    assert not kafka.paused


def test_the_applications_pauses_of_partitions_not_tracked_go_straight_through() -> None:
    arbiter, kafka = _arbiter()
    tp = TopicPartition("t", 3)
    arbiter.application([tp], {}, pause=True)
    assert kafka.paused == {("t", 3)}
    later = _part(3)
    arbiter.arrived(later)  # assigned after the pause: still the application's
    assert later.gate.user_paused and kafka.paused == {("t", 3)}
    arbiter.left(later)
    arbiter.application([tp], {}, pause=False)
    assert not kafka.paused
    again = _part(3)
    arbiter.arrived(again)
    assert not again.gate.pauses.wishes
