"""``topic_interest(only=...)`` reads the named groups alone.

Each group's offsets cost a Kafka request; ``ordered describe TOPIC --group G`` on a
cluster with a thousand groups took about 20 s a call when it read them all.
"""

from __future__ import annotations

import threading
import time
from typing import Any

from coordinator.groups.interest import topic_interest
from coordinator.kernel.errors import OrderedKafkaError


class _Store:
    def registered_groups(self, topic: str) -> set[str]:
        return {"registered"}

    def group_registered_at(self, group: str, topic: str) -> float | None:
        return None

    def group_seen(self, group: str, topic: str) -> None:
        return None


class _Admin:
    def __init__(self) -> None:
        self.read: list[str] = []

    def list_groups(self) -> dict[str, str]:
        return {f"g{i}": "EMPTY" for i in range(50)}

    def group_offsets(self, group: str, topic: str, partitions: Any) -> dict[int, int]:
        self.read.append(group)
        return {}


def test_only_the_named_group_is_read() -> None:
    admin = _Admin()
    topic_interest(_Store(), admin, "t", range(2), only=["g7"])  # type: ignore[arg-type]
    assert admin.read == ["g7"]


def test_without_only_every_listed_and_registered_group_is_read() -> None:
    admin = _Admin()
    topic_interest(_Store(), admin, "t", range(2))  # type: ignore[arg-type]
    assert sorted(admin.read) == sorted([f"g{i}" for i in range(50)] + ["registered"])


class _SlowAdmin(_Admin):
    """Each read takes 20 ms; group g3 fails; the others committed offset = their number."""

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self.running = 0
        self.most = 0

    def group_offsets(self, group: str, topic: str, partitions: Any) -> dict[int, int]:
        with self._lock:
            self.running += 1
            self.most = max(self.most, self.running)
        time.sleep(0.02)
        with self._lock:
            self.running -= 1
        if group == "g3":
            raise OrderedKafkaError("group g3: not coordinator")
        return {0: int(group[1:])} if group.startswith("g") else {}


def test_groups_are_read_in_parallel_and_kept_in_order() -> None:
    admin = _SlowAdmin()
    interest = topic_interest(_Store(), admin, "t", range(1))  # type: ignore[arg-type]
    assert admin.most > 1  # 51 reads of 20 ms one after the other would take a second
    assert [g.group for g in interest.groups] == sorted(f"g{i}" for i in range(50) if i != 3)
    assert all(g.committed == {0: int(g.group[1:])} for g in interest.groups)
    assert set(interest.unreadable) == {"g3"} and "not coordinator" in interest.unreadable["g3"]
