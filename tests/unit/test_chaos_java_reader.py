"""The Java reader kind of ``ordered chaos`` without a cluster: which slots are Java, the
Java member's command line, and the one fault aimed past it."""

from __future__ import annotations

import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from ordered.chaos.faults import FaultRunner
from ordered.chaos.java_reader import MAIN_CLASS, java_argv
from ordered.chaos.processes import Slots
from ordered.chaos.run import ChaosOptions, _Connection, _slots
from ordered.chaos.schedule import FaultKind, ScheduledFault, ScheduleShape
from ordered.verify import HistoryWriter


@pytest.mark.parametrize(
    ("count", "java"),
    [(0, []), (1, ["main-1"]), (2, ["main-1", "main-2"]), (3, ["main-0", "main-1", "main-2"])],
)
def test_the_java_members_are_main_1_then_main_2_then_main_0(
    tmp_path: Path, count: int, java: list[str]
) -> None:
    options = ChaosOptions(duration=30, seed=1, java_readers=count)
    conn = _Connection("b:9092", "z:2181", "/r")
    slots = _slots(tmp_path, conn, options, ScheduleShape(duration=30), None, ["java"])
    assert sorted(n for n, s in slots.slots.items() if s.java) == java
    assert all(s.kind == "reader" and s.group == "main" for s in slots.slots.values() if s.java)


def test_the_java_member_gets_the_python_members_settings_in_kafkas_names() -> None:
    spec = {
        "topic": "chaos",
        "group": "main",
        "id": "main-1.2",
        "history": "/w/history/main-1.2.jsonl",
        "stats": "/w/stats/main-1.2.json",
        "bootstrap": "b:9092",
        "zookeeper": "z:2181",
        "root": "/r",
    }
    argv = java_argv(["java", "-cp", "cp", MAIN_CLASS], spec)
    assert argv[:4] == ["java", "-cp", "cp", MAIN_CLASS]
    pairs = list(zip(argv[4::2], argv[5::2], strict=True))
    flags = {k: v for k, v in pairs if k != "--property"}
    props = dict(v.split("=", 1) for k, v in pairs if k == "--property")
    assert flags["--reader-id"] == "main-1.2" and flags["--group"] == "main"
    assert flags["--history"] == spec["history"] and flags["--stats"] == spec["stats"]
    assert flags["--commit"] == "sync"
    assert props["bootstrap.servers"] == "b:9092"
    assert props["ordered.zookeeper.connect"] == "z:2181"
    assert props["ordered.zookeeper.root"] == "/r"
    assert props["session.timeout.ms"] == "6000"
    # librdkafka's members ask for "roundrobin": the group needs a protocol both speak.
    assert props["partition.assignment.strategy"].endswith(".RoundRobinAssignor")


@pytest.fixture
def runner(tmp_path: Path) -> Iterator[FaultRunner]:
    slots = Slots(tmp_path, {}, [])
    for i in range(3):
        slot = slots.add(f"main-{i}", "reader", "main", **({"java": True} if i == 1 else {}))
        slot.proc = subprocess.Popen(["sleep", "60"])
    shape = ScheduleShape(duration=30)
    log = HistoryWriter(tmp_path / "run.jsonl")
    runner = FaultRunner(None, slots, tmp_path, shape, log, lambda _: None, threading.Event())  # type: ignore[arg-type]
    yield runner
    slots.kill_all()
    log.close()


def test_a_session_expiry_aimed_at_a_java_member_goes_to_a_python_one(
    runner: FaultRunner, monkeypatch: pytest.MonkeyPatch
) -> None:
    sent: list[tuple[str, int]] = []
    monkeypatch.setattr(runner.slots, "signal", lambda slot, sig: sent.append((slot.name, sig)))
    runner._process_fault(ScheduledFault(1.0, FaultKind.EXPIRE_CONSUMER_SESSION, "main-1"))
    assert [name for name, _ in sent] == ["main-0"]


def test_a_kill_aimed_at_a_java_member_kills_it_and_counts_it(runner: FaultRunner) -> None:
    fault = ScheduledFault(1.0, FaultKind.KILL_CONSUMER, "main-1", {"down_s": 2.0})
    runner._process_fault(fault)
    slot = runner.slots.slots["main-1"]
    assert slot.proc is not None and slot.proc.wait(10) == -9
    assert runner.killed == {"main-1": 1} and runner.kills == 1
