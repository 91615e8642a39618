"""KIP-253 linear hashing: from a hash to a partition, and the split tree.

With ``N = initial`` and ``U = active``, ``L`` is the largest integer with
``N * 2**L <= U`` and ``S = U - N * 2**L``. A hash ``h`` goes to ``h % (N * 2**L)``,
or to ``h % (N * 2**(L + 1))`` when the former is below ``S``. Growing ``U`` by one
splits partition ``S`` into ``S`` and ``U``; nothing else moves. Shrinking by one merges
partition ``U - 1`` back into its parent.

The partitions form a tree: ``p >= N`` was split from ``parent(p) = p - N * 2**L``
(``L`` largest with ``N * 2**L <= p``), which is ``p mod N * 2**L``. So the values
``h mod N * 2**j`` for ``j = 0, 1, ...`` walk down one root-to-leaf path of the tree,
and ``route(h, N, U)`` is the deepest node on that path that is below ``U``. In
particular ``route(p, N, U)`` for a partition index ``p`` is the nearest ancestor of
``p`` (or ``p`` itself) that is active under ``U``: where ``p``'s keys live under ``U``.
"""

from __future__ import annotations

from collections.abc import Callable

from linear_hash.hashing import DEFAULT_ALGORITHM, Key
from linear_hash.router import Router, _check_counts, _check_int, _route

__all__ = [
    "children",
    "parent",
    "partition_for",
    "route",
]


def _check_partition(partition: object, name: str = "partition") -> int:
    _check_int(partition, name)
    if partition < 0:  # type: ignore[operator]
        raise ValueError(f"{name} must be >= 0, got {partition}")
    return partition  # type: ignore[return-value]


def route(h: int, initial: int, active: int) -> int:
    """Map a hash to its partition under KIP-253 linear hashing.

    Args:
        h: A non-negative hash (normally from :func:`linear_hash.hash_key`). A partition
            index works too: the result is where that partition's keys live under
            ``active`` (its nearest active ancestor, or itself).
        initial: ``N``, the partition count the topic was adopted with (>= 1).
        active: ``U``, the active partition count (>= ``initial``).

    Returns:
        The partition, in ``[0, active)``.

    Raises:
        TypeError: An argument is not an ``int`` (``bool`` is rejected).
        ValueError: ``h < 0``, ``initial < 1`` or ``active < initial``.
    """
    _check_int(h, "h")
    _check_counts(initial, active)
    if h < 0:
        raise ValueError(f"h must be >= 0, got {h}")
    return _route(h, initial, active)


# The router of the last validated (initial, active, algorithm) of partition_for, with
# its bound partition method. Checked by identity: a hit means these very objects were
# validated, so a float or bool equal to a cached int can never slip through, and no
# tuple is built or hashed per call. One tuple is swapped atomically, so concurrent
# threads at worst recompute.
_memo: tuple[object, object, object, Callable[[Key], int]] = (
    1,
    1,
    DEFAULT_ALGORITHM,
    Router(1, 1).partition,
)


def _remember(
    initial: int, active: int, algorithm: str
) -> tuple[object, object, object, Callable[[Key], int]]:
    global _memo
    memo = (initial, active, algorithm, Router(initial, active, algorithm).partition)
    _memo = memo
    return memo


def partition_for(key: Key, initial: int, active: int, algorithm: str = DEFAULT_ALGORITHM) -> int:
    """Return the partition of a record key: :func:`route` of :func:`hash_key`.

    The last ``(initial, active, algorithm)`` is remembered with its
    :class:`~linear_hash.Router`, so switching between layouts costs one validation per
    switch. For many calls with one layout, a router's
    :meth:`~linear_hash.Router.partition` (or :meth:`linear_hash.Layout.partition_for`)
    is faster still: it saves this function's call.

    Args:
        key: The record key, ``str`` (hashed as UTF-8) or bytes-like.
        initial: ``N``, the partition count the topic was adopted with (>= 1).
        active: ``U``, the active partition count (>= ``initial``).
        algorithm: One of :data:`linear_hash.ALGORITHMS`.

    Returns:
        The partition, in ``[0, active)``.

    Raises:
        TypeError: ``key`` is not ``str`` or bytes-like, or a count is not an ``int``.
        ValueError: Bad counts, an unknown ``algorithm``, or a ``str`` key that is not
            encodable as UTF-8.
    """
    memo = _memo
    if memo[0] is not initial or memo[1] is not active or memo[2] is not algorithm:
        memo = _remember(initial, active, algorithm)
    return memo[3](key)


def parent(partition: int, initial: int) -> int | None:
    """Return the partition ``partition`` was split from.

    Args:
        partition: A partition index (>= 0).
        initial: ``N`` (>= 1).

    Returns:
        ``partition - N * 2**L`` with ``L`` largest such that ``N * 2**L <= partition``,
        or ``None`` for an initial partition (``partition < initial``).

    Raises:
        TypeError: An argument is not an ``int``.
        ValueError: ``partition < 0`` or ``initial < 1``.
    """
    _check_partition(partition)
    _check_counts(initial, initial)
    if partition < initial:
        return None
    return partition - (initial << ((partition // initial).bit_length() - 1))


def _children_below(partition: int, initial: int, bound: int) -> list[int]:
    """Direct children of ``partition`` that are ``< bound``, ascending (no checks)."""
    # A child is partition + N * 2**k with N * 2**k > partition (else its L, and so its
    # parent, would differ).
    step = initial
    while step <= partition:
        step <<= 1
    out: list[int] = []
    child = partition + step
    while child < bound:
        out.append(child)
        step <<= 1
        child = partition + step
    return out


def children(partition: int, initial: int, active: int) -> list[int]:
    """Return the direct children of ``partition`` among the active partitions.

    Args:
        partition: A partition index (>= 0).
        initial: ``N`` (>= 1).
        active: ``U`` (>= ``initial``); only children in ``[0, active)`` are listed.

    Returns:
        ``partition + N * 2**k`` for every ``k`` where that is ``< active`` and its
        :func:`parent` is ``partition``, ascending. At most about
        ``log2(active / initial) + 1`` of them.

    Raises:
        TypeError: An argument is not an ``int``.
        ValueError: ``partition < 0``, ``initial < 1`` or ``active < initial``.
    """
    _check_partition(partition)
    _check_counts(initial, active)
    return _children_below(partition, initial, active)
