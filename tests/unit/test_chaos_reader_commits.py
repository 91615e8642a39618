"""The chaos run's faults start once every reader group has committed (a fake admin).

A group stopped before its first commit is invisible to trims: the records trimmed
meanwhile are lost to it whatever the clients do, so the run waits for the commits of
each reader group, on the topic it reads, by the group a trim sees (a Spark query's
commit group).
"""

from __future__ import annotations

import threading
import types
from collections.abc import Iterable
from typing import Any, ClassVar

import pytest

import coordinator.kernel.kafka_admin as kafka_admin
from ordered.chaos.faults import TOPIC, FaultRunner
from ordered.chaos.processes import Slot


class _Admin:
    """Commits appear for a group after it has been asked about ``after`` times."""

    asked: ClassVar[dict[tuple[str, str], int]] = {}
    after: ClassVar[dict[str, int]] = {}

    def __init__(self, bootstrap: str, **_: Any) -> None:
        pass

    def partition_count(self, topic: str) -> int:
        return 3

    def committed_offsets(
        self, group: str, topic: str, partitions: Iterable[int]
    ) -> dict[int, int]:
        key = (group, topic)
        self.asked[key] = self.asked.get(key, 0) + 1
        return {0: 5} if self.asked[key] > self.after.get(group, 0) else {}

    def close(self) -> None:
        pass


def _runner(slots: list[Slot], said: list[str]) -> FaultRunner:
    runner = FaultRunner.__new__(FaultRunner)
    runner.conn = types.SimpleNamespace(bootstrap="b:9092")  # type: ignore[assignment]
    runner.slots = types.SimpleNamespace(slots={s.name: s for s in slots})  # type: ignore[assignment]
    runner.stop = threading.Event()
    runner._say = said.append
    return runner


@pytest.fixture
def admin(monkeypatch: pytest.MonkeyPatch) -> type[_Admin]:
    _Admin.asked, _Admin.after = {}, {}
    monkeypatch.setattr(kafka_admin, "KafkaAdmin", _Admin)
    return _Admin


def test_faults_wait_for_every_reader_groups_first_commit(admin: type[_Admin]) -> None:
    admin.after = {"main": 1, "lag": 3, "spark-commits": 2, "eosout": 1}
    slots = [
        Slot("producer-0", "producer"),
        Slot("main-0", "reader", "main"),
        Slot("lag-0", "reader", "lag"),
        Slot("spark", "reader", "spark", extra={"commit_group": "spark-commits"}),
        Slot("eosout-0", "reader", "eosout", extra={"topic": "chaos-out"}),
    ]
    said: list[str] = []
    _runner(slots, said).wait_readers_committed(timeout=30.0)
    # Each group asked on its own topic until its commit showed, the lag group last.
    assert admin.asked == {
        ("main", TOPIC): 2,
        ("lag", TOPIC): 4,
        ("spark-commits", TOPIC): 3,
        ("eosout", "chaos-out"): 2,
    }
    assert said and said[-1].startswith(
        "every reader group committed (eosout, lag, main, spark-commits)"
    )


def test_a_group_that_never_commits_is_named_after_the_timeout(admin: type[_Admin]) -> None:
    admin.after = {"lag": 10**6}
    said: list[str] = []
    _runner([Slot("lag-0", "reader", "lag")], said).wait_readers_committed(timeout=0.6)
    assert admin.asked[("lag", TOPIC)] >= 2
    assert said[-1].startswith("no commit of lag after")
