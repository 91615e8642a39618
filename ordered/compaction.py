"""KIP-253 section 9 for compacted topics: tombstone copies in a key's earlier partitions.

After a split, a key that now lives in partition ``p`` still has its older values in
the partition it lived in before (``p``'s parent, and that one's parent, down to a
partition below ``initial``). Log compaction keeps the latest value *per partition*, so
those stale values would never be removed. As the KIP asks, the producer therefore
sends, with a keyed record of a compacted ordered topic that lands in a partition at or
above ``initial``, a tombstone (same key, ``None`` value) to every ancestor of that
partition, once per key and epoch state (pending, then sealed). Linear hashing makes
the ancestors exactly the partitions the key routed to under every smaller layout, at
most ``log2(active / initial) + 1`` of them.

A copy carries the header :data:`TOMBSTONE_HEADER` (value: the partition the key lives
in now) whatever ``ordered.epoch.header`` says, so an :class:`~ordered.OrderedConsumer`
recognises it and never delivers it: it exists for compaction only, and delivering it
would tell the application that the key was deleted after its newer value. A plain
consumer sees it as an ordinary tombstone.

The KIP sends the copy only when the parent may still hold records of the old epoch;
a client cannot know that without a request per record, so copies are sent once per key
and epoch state (bounded memo) instead, which is safe: a tombstone of a key with no records
left in a partition is itself removed by compaction after ``delete.retention.ms``.
"""

from __future__ import annotations

from typing import Any, Final

from linear_hash import parent

__all__ = ["TOMBSTONE_HEADER", "TombstoneMemo", "ancestors", "is_tombstone_copy"]

TOMBSTONE_HEADER: Final = "ordered.tombstone"
"""The header that marks a tombstone copy (value: the key's partition now, decimal)."""

_MEMO_KEYS: Final = 100_000


def ancestors(partition: int, initial: int) -> tuple[int, ...]:
    """The partitions ``partition``'s keys lived in before it split off, nearest first.

    Empty below ``initial``.

    Raises:
        ValueError: A negative partition or an ``initial`` below 1.
    """
    out: list[int] = []
    current = parent(partition, initial)
    while current is not None:
        out.append(current)
        current = parent(current, initial)
    return tuple(out)


def is_tombstone_copy(message: Any) -> bool:
    """Whether ``message`` (a confluent ``Message``) is a tombstone copy of section 9."""
    if message.value() is not None:
        return False
    headers = message.headers()
    return bool(headers) and any(name == TOMBSTONE_HEADER for name, _value in headers)


class TombstoneMemo:
    """The keys whose copies were sent under one layout epoch (bounded; restarts when full).

    Not thread-safe: the producer uses it under its lock.
    """

    __slots__ = ("_keys",)

    def __init__(self) -> None:
        self._keys: set[Any] = set()

    def first(self, key: Any) -> bool:
        """Return ``True`` the first time ``key`` is seen (and remember it)."""
        keys = self._keys
        if key in keys:
            return False
        if len(keys) >= _MEMO_KEYS:
            # Forgetting only costs a repeated tombstone, never a missing one.
            keys.clear()
        keys.add(key)
        return True
