"""The ZooKeeper ensemble's chaos faults in the schedule (``ordered chaos --zookeepers 3``)."""

from __future__ import annotations

from ordered.chaos.schedule import FaultKind, ScheduleShape, digest, kinds_for, make_schedule
from ordered.chaos.zk_faults import ZOOKEEPER_KINDS

MEMBERS = {"zookeeper-1", "zookeeper-2", "zookeeper-3"}


def test_ensemble_kinds_come_only_with_an_ensemble() -> None:
    assert not ZOOKEEPER_KINDS & set(kinds_for(ScheduleShape(duration=100)))
    assert not ZOOKEEPER_KINDS & set(kinds_for(ScheduleShape(duration=100, brokers=3)))
    assert set(kinds_for(ScheduleShape(duration=100, zookeepers=3))) >= ZOOKEEPER_KINDS
    # A CI-sized run with an ensemble has room for every kind, the ensemble's included.
    shape = ScheduleShape(duration=100, zookeepers=3)
    assert {f.kind for f in make_schedule(11, shape)} == set(kinds_for(shape))


def test_schedules_without_an_ensemble_are_the_same_as_before() -> None:
    # Digests of the schedules before the ensemble's kinds existed: a seed that was
    # run still gives the same faults at the same times.
    ci = make_schedule(11, ScheduleShape(duration=100, replays=True))
    assert digest(ci) == "cb0c8c94f3361e90"
    long = make_schedule(2026, ScheduleShape(duration=1900, brokers=3, replays=True))
    assert digest(long) == "755b3bf09075f837"


def test_member_kills_and_quorum_losses_name_members_and_times() -> None:
    for size in (3, 5):
        shape = ScheduleShape(duration=1900, zookeepers=size)
        members = {f"zookeeper-{i}" for i in range(1, size + 1)}
        schedule = make_schedule(3, shape)
        kills = [f for f in schedule if f.kind is FaultKind.KILL_ZOOKEEPER_MEMBER]
        losses = [f for f in schedule if f.kind is FaultKind.ZOOKEEPER_QUORUM_LOSS]
        assert len(kills) >= 5 and len(losses) >= 3
        assert {f.target for f in kills} <= {"leader"} | members
        assert "leader" in {f.target for f in kills}
        assert all(2 <= f.params["down_s"] <= 15 for f in kills)
        for loss in losses:
            lost = loss.target.split(",")
            assert len(set(lost)) == len(lost) == size // 2 + 1  # a majority: no quorum
            assert set(lost) <= members
            assert 5 <= loss.params["down_s"] <= 20
        assert all(f.kind.describe for f in schedule)
