"""The source's per-batch progress figures (pure)."""

from __future__ import annotations

from spark_source.progress import GateClock, batch_progress


def test_lag_is_measured_per_partition_from_the_batch_end_to_kafkas_end() -> None:
    latest = {"t": {0: 100, 1: 50, 2: 10}}
    capped = {"t": {0: 100, 1: 50, 2: 4}}  # partition 2 held at its gate
    end = {"t": {0: 80, 1: 50, 2: 4}}  # partition 0 limited by maxOffsetsPerTrigger
    got = batch_progress(latest, capped, end, 12.34)
    assert got == {
        "minOffsetsBehindLatest": 0,
        "maxOffsetsBehindLatest": 20,
        "avgOffsetsBehindLatest": round((20 + 0 + 6) / 3, 1),
        "recordsHeldAtGates": 6,
        "partitionsHeldAtGates": 1,
        "oldestGateWaitMs": 12.3,
    }


def test_no_partitions_gives_zeros() -> None:
    got = batch_progress({}, {}, {}, 0.0)
    assert got["maxOffsetsBehindLatest"] == 0 and got["recordsHeldAtGates"] == 0


def test_the_gate_clock_keeps_the_first_time_a_partition_was_held() -> None:
    clock = GateClock()
    latest = {"t": {0: 10, 1: 10}}
    assert clock.update(latest, {"t": {0: 10, 1: 10}}, now=1.0) == 0.0
    assert clock.update(latest, {"t": {0: 10, 1: 3}}, now=2.0) == 0.0
    assert clock.update(latest, {"t": {0: 5, 1: 3}}, now=2.5) == 500.0
    # Partition 1 released, partition 0 still held since 2.5.
    assert clock.update(latest, {"t": {0: 5, 1: 10}}, now=3.0) == 500.0
    assert clock.update(latest, {"t": {0: 10, 1: 10}}, now=4.0) == 0.0
