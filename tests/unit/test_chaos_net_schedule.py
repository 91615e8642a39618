"""The network fault kinds in the chaos schedule: off by default, seeded, bounded."""

from __future__ import annotations

from ordered.chaos.net_faults import KAFKA_KINDS, NET_KINDS
from ordered.chaos.schedule import ScheduleShape, digest, kinds_for, make_schedule


def test_without_network_faults_existing_seeds_keep_their_schedules() -> None:
    # Digests of the schedules before the network kinds existed (the 1900 s one is the
    # documented long run's).
    pinned = {
        (11, ScheduleShape(duration=100, replays=True)): "cb0c8c94f3361e90",
        (1, ScheduleShape(duration=150, brokers=3, replays=True, eos=True)): "8fc77cdb5ebac661",
        (
            2028,
            ScheduleShape(duration=1900, brokers=3, replays=True, eos=True),
        ): "7795ccb9e1efe457",
    }
    for (seed, shape), expected in pinned.items():
        assert digest(make_schedule(seed, shape)) == expected
        assert not NET_KINDS & set(kinds_for(shape))


def test_network_kinds_come_when_on_with_seeded_durations_and_targets() -> None:
    shape = ScheduleShape(duration=150, brokers=3, network=True)
    schedule = make_schedule(3, shape)
    assert {f.kind for f in schedule} >= NET_KINDS
    assert digest(schedule) == digest(make_schedule(3, shape))
    slots = {f"coordinator-{i}" for i in range(shape.coordinators)}
    slots |= {f"producer-{i}" for i in range(shape.producers)}
    slots |= {f"main-{i}" for i in range(shape.consumers)}
    for fault in make_schedule(7, ScheduleShape(duration=1900, brokers=3, network=True)):
        if fault.kind not in NET_KINDS:
            continue
        assert 2 <= fault.params["down_s"] <= 20
        if fault.kind.value.endswith("latency"):
            assert 50 <= fault.params["latency_ms"] <= 500
        if fault.kind in KAFKA_KINDS:
            assert fault.target in {"broker-1", "broker-2", "broker-3"}
        else:
            assert fault.target in slots
