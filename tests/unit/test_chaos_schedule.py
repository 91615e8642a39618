"""The chaos fault schedule: same seed, same schedule; every kind; bounded in time."""

from __future__ import annotations

from ordered.chaos.schedule import FaultKind, ScheduleShape, digest, kinds_for, make_schedule


def test_the_same_seed_gives_the_same_schedule() -> None:
    shape = ScheduleShape(duration=150, brokers=3, replays=True, eos=True)
    first, again = make_schedule(42, shape), make_schedule(42, shape)
    assert [f.to_dict() for f in first] == [f.to_dict() for f in again]
    assert digest(first) == digest(again)
    other = make_schedule(43, shape)
    assert digest(other) != digest(first)


def test_every_kind_comes_at_least_once_and_in_time() -> None:
    shape = ScheduleShape(duration=150, brokers=3, replays=True, eos=True, spark=True, zookeepers=3)
    schedule = make_schedule(1, shape)
    assert {f.kind for f in schedule} == set(kinds_for(shape))
    times = [f.at for f in schedule]
    assert times == sorted(times)
    assert times[0] > 0 and times[-1] < 150 * 0.9 + 1e-9


def test_broker_restarts_need_three_brokers_replays_and_eos_their_flags() -> None:
    kinds = kinds_for(ScheduleShape(duration=150))
    assert FaultKind.BROKER_RESTART not in kinds
    assert FaultKind.SEEK_BACK not in kinds and FaultKind.OFFSET_RESET not in kinds
    assert FaultKind.KILL_PIPELINE not in kinds
    assert FaultKind.KILL_SPARK_EXECUTOR not in kinds and FaultKind.KILL_SPARK_DRIVER not in kinds
    schedule = make_schedule(5, ScheduleShape(duration=150))
    assert {f.kind for f in schedule} == set(kinds)


def test_a_long_run_has_room_for_its_targets() -> None:
    # 1900 s: a fault every 10 s on average, so >= 30 layout faults and >= 30 kills.
    schedule = make_schedule(2026, ScheduleShape(duration=1900, brokers=3, replays=True))
    layout = [f for f in schedule if f.kind.layout]
    kills = [f for f in schedule if f.kind.value.startswith("kill-")]
    assert len(schedule) >= 150
    assert len(layout) >= 30 and len(kills) >= 30


def test_targets_name_existing_slots() -> None:
    shape = ScheduleShape(duration=600, brokers=3, replays=True)
    for fault in make_schedule(9, shape):
        if fault.kind in (FaultKind.KILL_PRODUCER, FaultKind.STOP_PRODUCER):
            assert fault.target in {f"producer-{i}" for i in range(shape.producers)}
        if fault.kind is FaultKind.BROKER_RESTART:
            assert fault.target in {"broker-1", "broker-2", "broker-3"}
        if fault.kind in (FaultKind.EXPAND, FaultKind.SHRINK):
            assert fault.params["steps"] in (1, 2)
        assert fault.kind.describe
