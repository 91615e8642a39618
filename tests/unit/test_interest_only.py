"""``topic_interest(only=...)`` reads the named groups alone.

Each group's offsets cost a Kafka request; ``ordered describe TOPIC --group G`` on a
cluster with a thousand groups took about 20 s a call when it read them all.
"""

from __future__ import annotations

from typing import Any

from coordinator.groups.interest import topic_interest


class _Store:
    def registered_groups(self, topic: str) -> set[str]:
        return {"registered"}

    def group_registered_at(self, group: str, topic: str) -> float | None:
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
