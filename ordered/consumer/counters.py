"""The consumer's own counters: the default hook behind ``OrderedConsumer.metrics``.

Every count is written here and only here, by the event that it counts (the consumer
reports its events through :class:`coordinator.kernel.hooks.ConsumerEvents`, and this hook is
always the first one). :meth:`ConsumerCounters.as_dict` is the read-only snapshot the
consumer's ``metrics`` property returns.
"""

from __future__ import annotations

from typing import Final

__all__ = ["METRICS", "ConsumerCounters"]

METRICS: Final = (
    "delivered",
    "held",
    "gate_checks",
    "gates_opened",
    "blocks",
    "announcements",
    "violations",
    "layout_reloads",
    "layout_checks",
    "tombstone_copies_dropped",
)
"""The counters of :attr:`OrderedConsumer.metrics` (plus ``blocked_partitions``)."""


class ConsumerCounters:
    """Counts the consumer's events (implements the consumer's hook protocols).

    Attributes:
        delivered: Records handed to the application.
        held: Records kept back at a closed gate (counted each time they are kept).
        gate_checks: Gate evaluations against the group's committed offsets.
        gates_opened: Closed gates that opened.
        blocks: Times a partition stopped at a closed gate.
        announcements: Boundary commits made.
        violations: Records found to contradict the layout.
        layout_reloads: Topic histories read from ZooKeeper.
        layout_checks: Layout checks of fetched batches.
        tombstone_copies_dropped: Tombstone copies passed over.
    """

    __slots__ = METRICS

    def __init__(self) -> None:
        for name in METRICS:
            setattr(self, name, 0)

    # Typed here for mypy; set in __init__ from METRICS.
    delivered: int
    held: int
    gate_checks: int
    gates_opened: int
    blocks: int
    announcements: int
    violations: int
    layout_reloads: int
    layout_checks: int
    tombstone_copies_dropped: int

    def as_dict(self) -> dict[str, int]:
        """A snapshot: counter name -> value, in :data:`METRICS` order."""
        return {name: getattr(self, name) for name in METRICS}

    def on_records_delivered(self, group: str, count: int) -> None:
        """Count delivered records."""
        self.delivered += count

    def on_records_held(self, group: str, topic: str, partition: int, count: int) -> None:
        """Count records kept back."""
        self.held += count

    def on_gate_check(self, group: str, topic: str, partition: int) -> None:
        """Count a gate evaluation."""
        self.gate_checks += 1

    def on_gate_blocked(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Count a block."""
        self.blocks += 1

    def on_gate_opened(self, group: str, topic: str, partition: int, wait_seconds: float) -> None:
        """Count an opened gate."""
        self.gates_opened += 1

    def on_announcement(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Count a boundary commit."""
        self.announcements += 1

    def on_violation(
        self, group: str, topic: str, partition: int, offset: int, problem: str
    ) -> None:
        """Count a violation."""
        self.violations += 1

    def on_layout_reload(self, group: str, topic: str, epoch: int) -> None:
        """Count a history read."""
        self.layout_reloads += 1

    def on_layout_check(self, group: str) -> None:
        """Count a layout check."""
        self.layout_checks += 1

    def on_tombstone_copy(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Count a tombstone copy passed over."""
        self.tombstone_copies_dropped += 1
