"""Which partitions feed which when the active partition count changes.

A change of ``active`` from ``old`` to ``new`` (any amount, up or down) moves keys
only along the split tree (see :mod:`linear_hash.routing`):

* **Expansion** (``new > old``): every new partition ``b`` in ``[old, new)`` takes
  keys from exactly one old partition, its nearest ancestor below ``old``
  (``route(b, initial, old)``). No key moves between old partitions.
* **Shrink** (``new < old``): every retired partition ``b`` in ``[new, old)`` gives all
  its keys to its nearest ancestor below ``new`` (``route(b, initial, new)``). No key
  moves between surviving partitions.

:func:`key_flow` lists those edges, :func:`sources` the partitions feeding one
partition, and :func:`blockers` KIP-253's tree-shaped, O(log n) form of the same
dependency that consumers gate on.
"""

from __future__ import annotations

from linear_hash.router import _check_counts, _route
from linear_hash.routing import _check_partition, _children_below

__all__ = [
    "blockers",
    "key_flow",
    "sources",
]


def _check_change(initial: int, old_active: int, new_active: int) -> None:
    _check_counts(initial, old_active, "old_active")
    _check_counts(initial, new_active, "new_active")


def key_flow(initial: int, old_active: int, new_active: int) -> list[tuple[int, int]]:
    """List every ``(source, destination)`` pair along which keys move at a change.

    Exact: a pair is listed if and only if some hash routes to ``source`` under
    ``old_active`` and to ``destination != source`` under ``new_active``.

    Args:
        initial: ``N`` (>= 1).
        old_active: The active count before the change (>= ``initial``).
        new_active: The active count after it (>= ``initial``); smaller for a shrink.

    Returns:
        The pairs, sorted. For an expansion, one ``(ancestor, b)`` per new partition
        ``b``; for a shrink, one ``(b, ancestor)`` per retired partition ``b``; empty if
        the count does not change. ``O(|new_active - old_active|)``.

    Raises:
        TypeError: An argument is not an ``int``.
        ValueError: ``initial < 1`` or a count below ``initial``.
    """
    _check_change(initial, old_active, new_active)
    if new_active > old_active:
        pairs = [(_route(b, initial, old_active), b) for b in range(old_active, new_active)]
        pairs.sort()
        return pairs
    return [(b, _route(b, initial, new_active)) for b in range(new_active, old_active)]


def sources(partition: int, initial: int, old_active: int, new_active: int) -> list[int]:
    """List exactly the partitions whose keys flow into ``partition`` at a change.

    Args:
        partition: The receiving partition (>= 0).
        initial: ``N`` (>= 1).
        old_active: The active count before the change (>= ``initial``).
        new_active: The active count after it (>= ``initial``).

    Returns:
        Ascending. Expansion: the one old partition a new ``partition`` splits from
        (empty for an old partition). Shrink: every retired partition whose keys
        ``partition`` inherits, i.e. its descendants in ``[new_active, old_active)``
        reached through retired partitions only (empty for a retired partition).

    Raises:
        TypeError: An argument is not an ``int``.
        ValueError: ``partition < 0``, ``initial < 1`` or a count below ``initial``.
    """
    _check_partition(partition)
    _check_change(initial, old_active, new_active)
    if new_active > old_active:
        if old_active <= partition < new_active:
            return [_route(partition, initial, old_active)]
        return []
    if partition >= new_active:
        return []
    # Every descendant of a retired partition that is below old_active is retired too
    # (children are larger than their parent), so walk down until old_active.
    stack = [c for c in _children_below(partition, initial, old_active) if c >= new_active]
    out: list[int] = []
    while stack:
        node = stack.pop()
        out.append(node)
        stack.extend(_children_below(node, initial, old_active))
    out.sort()
    return out


def blockers(partition: int, initial: int, old_active: int, new_active: int) -> list[int]:
    """List the partitions ``partition`` waits on at a change, in KIP-253's tree form.

    * Expansion: a new partition is blocked by exactly one partition, the old active
      partition its keys came from (KIP-253 consumer step 4.2); an old one by none.
    * Shrink: a partition ``p`` (surviving or retired) is blocked by its *direct*
      children retired by this change, ``p + initial * 2**k`` in
      ``[new_active, old_active)``: at most ``ceil(log2(old_active / initial))`` of
      them (KIP-253 consumer step 5.1). A retired partition is thus blocked by its own
      retired children, recursively.

    The transitive closure of ``blockers`` (follow each blocker's own ``blockers`` at
    the same change) equals :func:`sources` for every partition active after the change.
    A retired partition has no records past its boundary for a gate to hold back, so a
    consumer gating on this tree form must wait on the whole closure (or on
    :func:`sources` directly), not only on the direct blockers.

    Args:
        partition: The waiting partition (>= 0).
        initial: ``N`` (>= 1).
        old_active: The active count before the change (>= ``initial``).
        new_active: The active count after it (>= ``initial``).

    Returns:
        The blockers, ascending.

    Raises:
        TypeError: An argument is not an ``int``.
        ValueError: ``partition < 0``, ``initial < 1`` or a count below ``initial``.
    """
    _check_partition(partition)
    _check_change(initial, old_active, new_active)
    if new_active > old_active:
        if old_active <= partition < new_active:
            return [_route(partition, initial, old_active)]
        return []
    return [c for c in _children_below(partition, initial, old_active) if c >= new_active]
