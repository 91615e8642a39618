"""Gate plans: at which epochs a partition waits on which others."""

from __future__ import annotations

from collections.abc import Sequence

from linear_hash.flow import blockers
from linear_hash.layout import Layout
from linear_hash.routing import _check_partition

__all__ = ["gate_plan"]


def gate_plan(partition: int, history: Sequence[Layout]) -> list[tuple[int, list[int]]]:
    """List the epochs at which ``partition`` must wait, and on which partitions.

    Each pair of consecutive layouts in ``history`` is one change of ``active``; the
    change is identified by the later layout's epoch.

    Args:
        partition: The partition whose gates are wanted (>= 0).
        history: Layouts of one topic in epoch order (strictly increasing ``epoch``,
            one ``initial``).

    Returns:
        ``(epoch, blockers)`` for every change where ``partition`` has a non-empty
        :func:`linear_hash.blockers` list, in epoch order. As with ``blockers``, a
        consumer must also honour the blockers of a retired blocker at the same epoch.

    Raises:
        TypeError: ``partition`` is not an ``int`` or a history entry is not a Layout.
        ValueError: ``partition < 0``, or ``history`` mixes ``initial`` values or its
            epochs do not strictly increase.
    """
    _check_partition(partition)
    for i, layout in enumerate(history):
        if not isinstance(layout, Layout):
            raise TypeError(f"history[{i}] must be a Layout, not {type(layout).__name__}")
    plan: list[tuple[int, list[int]]] = []
    for i in range(1, len(history)):
        prev, cur = history[i - 1], history[i]
        if cur.initial != prev.initial:
            raise ValueError(
                f"history mixes initial counts: history[{i}].initial is {cur.initial}, "
                f"history[{i - 1}].initial is {prev.initial}"
            )
        if cur.epoch <= prev.epoch:
            raise ValueError(
                f"history epochs must strictly increase: history[{i}].epoch is "
                f"{cur.epoch} after {prev.epoch}"
            )
        waits = blockers(partition, cur.initial, prev.active, cur.active)
        if waits:
            plan.append((cur.epoch, waits))
    return plan
