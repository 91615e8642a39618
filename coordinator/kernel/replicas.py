"""Each partition's leader, replicas and in-sync replicas, as ``kafka-topics --describe``
shows them (read from a DescribeTopics answer; no I/O here)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PartitionReplicas", "replicas_of"]


@dataclass(frozen=True, slots=True)
class PartitionReplicas:
    """One partition's replica placement, as Kafka's metadata reports it.

    Attributes:
        partition: The partition.
        leader: The leader's broker id, ``None`` when the partition has no leader.
        replicas: The assigned replicas' broker ids, in Kafka's order (the first is the
            preferred leader).
        isr: The in-sync replicas' broker ids.
    """

    partition: int
    leader: int | None
    replicas: tuple[int, ...]
    isr: tuple[int, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "partition": self.partition,
            "leader": self.leader,
            "replicas": list(self.replicas),
            "isr": list(self.isr),
        }


def replicas_of(description: Any) -> tuple[PartitionReplicas, ...]:
    """The placement of every partition of a ``TopicDescription``, ascending.

    Args:
        description: confluent-kafka's ``TopicDescription`` (``describe_topics``).
    """
    found = [
        PartitionReplicas(
            info.id,
            None if info.leader is None else info.leader.id,
            tuple(node.id for node in info.replicas),
            tuple(node.id for node in info.isr),
        )
        for info in description.partitions
    ]
    return tuple(sorted(found, key=lambda r: r.partition))
