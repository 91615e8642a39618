"""The Spark family of ``ordered chaos`` without Spark: its schedule, its driver's command
line, and how a Spark fault that finds nothing to kill is put off."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ordered.chaos.processes import Slot, Slots
from ordered.chaos.schedule import (
    FaultKind,
    ScheduledFault,
    ScheduleShape,
    kinds_for,
    make_schedule,
)
from ordered.chaos.spark_faults import SparkFaults
from ordered.chaos.spark_reader import COMMIT_GROUP, SLOT, driver_argv


def test_the_spark_kinds_come_only_with_spark_and_hit_workers_and_the_driver() -> None:
    assert FaultKind.KILL_SPARK_EXECUTOR not in kinds_for(ScheduleShape(duration=90))
    schedule = make_schedule(1, ScheduleShape(duration=90, spark=True))
    spark = [f for f in schedule if f.kind.value.startswith("kill-spark-")]
    assert {f.kind for f in spark} == {FaultKind.KILL_SPARK_EXECUTOR, FaultKind.KILL_SPARK_DRIVER}
    for fault in spark:
        if fault.kind is FaultKind.KILL_SPARK_EXECUTOR:
            assert fault.target in ("worker-0", "worker-1")
        else:
            assert fault.target == SLOT and 2 <= fault.params["down_s"] <= 10


def test_the_driver_command_line_names_its_incarnation_checkpoint_and_commit_group() -> None:
    spec = {
        "topic": "chaos",
        "bootstrap": "b:1",
        "zookeeper": "z:2",
        "root": "/r",
        "history": "/w/history/spark-0.3.jsonl",
        "stats": "/w/stats/spark-0.3.json",
        "group": "spark",
        "id": "spark-0.3",
        "commit_group": COMMIT_GROUP,
        "master": "spark://127.0.0.1:7077",
        "checkpoint": "/w/spark/checkpoint",
    }
    argv = driver_argv(spec)
    assert argv[1:3] == ["-m", "ordered.verify.spark_query"]
    pairs = dict(zip(argv[3::2], argv[4::2], strict=True))
    assert pairs["--reader"] == "spark-0.3" and pairs["--group"] == "spark"
    assert pairs["--checkpoint"] == "/w/spark/checkpoint"
    assert pairs["--master"] == "spark://127.0.0.1:7077"
    assert pairs["--commit-group"] == COMMIT_GROUP


class _Cluster:
    def __init__(self) -> None:
        self.running: dict[int, list[int]] = {0: [], 1: []}

    def worker_pids(self) -> list[int]:
        return [1, 2]

    def executors(self, worker: int) -> list[int]:
        return self.running[worker]


class _Reader:
    def __init__(self) -> None:
        self.cluster = _Cluster()

    def batches(self, slots: Slots) -> int:
        return 1


class _Runner:
    def __init__(self, tmp: Path) -> None:
        self.slots = Slots(tmp, {}, [])
        self.kills = 0
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self.later: list[tuple[float, Callable[[], None]]] = []
        self.faults: list[str] = []
        self.said: list[str] = []

    def say(self, text: str) -> None:
        self.said.append(text)

    def _fault(self, kind: FaultKind, target: str, detail: str) -> None:
        self.faults.append(f"{kind.value} {target}")

    def _later(self, delay: float, what: str, call: Callable[[], None]) -> None:
        self.later.append((delay, call))

    def _restart_later(self, slot: Slot, delay: float) -> None:
        self.later.append((delay, lambda: None))


def test_an_executor_kill_with_no_executor_up_is_put_off_then_skipped_at_the_end(
    tmp_path: Path,
) -> None:
    runner, reader = _Runner(tmp_path), _Reader()
    faults = SparkFaults(runner, reader, duration=90.0)  # type: ignore[arg-type]
    fault = ScheduledFault(10.0, FaultKind.KILL_SPARK_EXECUTOR, "worker-1")
    faults.inject(fault)
    assert runner.faults == [] and len(runner.later) == 1  # put off, not skipped
    # Past the run's duration it gives up and says so.
    runner.t0 -= 100.0
    runner.later.pop()[1]()
    assert runner.faults == [] and runner.later == []
    assert any("nothing to kill, skipped" in line for line in runner.said)


def test_an_executor_kill_hits_the_other_worker_when_the_target_has_none(
    tmp_path: Path, monkeypatch: Any
) -> None:
    killed: list[int] = []
    monkeypatch.setattr("ordered.chaos.spark_faults.os.kill", lambda pid, sig: killed.append(pid))
    runner, reader = _Runner(tmp_path), _Reader()
    reader.cluster.running[0] = [4242]
    faults = SparkFaults(runner, reader, duration=90.0)  # type: ignore[arg-type]
    faults.inject(ScheduledFault(10.0, FaultKind.KILL_SPARK_EXECUTOR, "worker-1"))
    assert killed == [4242] and runner.kills == 1
    assert runner.faults == ["kill-spark-executor worker-0"]
