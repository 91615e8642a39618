"""The gate rule of ``docs/consumer.md``, and gate plans: pure logic, no I/O.

One rule serves every reader: ``OrderedConsumer``, ``ordered describe --group`` and the
Spark source all decide with :class:`GateEvaluator`.


A record of partition ``b`` at offset ``o`` may be delivered when, for every epoch ``e``
with an edge ``a -> b`` and ``B_b(e) <= o``, the epoch is sealed and ``reached(a,
B_a(e))`` holds, where ``reached(a, o)`` means

1. the group's committed offset on ``a`` is at least ``o``, or ``o`` is at most the log
   start offset of ``a`` (what is gone can no longer be delivered to anyone); and
2. for every *earlier* epoch ``e'`` with an edge ``x -> a`` and ``B_a(e') <= o``:
   ``e'`` is sealed and ``reached(x, B_x(e'))`` holds.

Condition 2 closes the "hole" of ``docs/consumer.md``: a partition with no records
between two of its boundaries can have its committed offset pass a gate that no record
ever consulted. The recursion only follows strictly earlier epochs: records of ``a``
below ``B_a(e)`` were routed by an epoch before ``e``, so keys that reach ``a`` at
``e`` or later cannot precede them, and following them would make gates wait on each
other in a cycle (``0 -> 1`` at epoch 1 then ``1 -> 0`` at epoch 2 with no record in
between would otherwise deadlock).

A gate found open stays open while the group runs forward (committed offsets only
grow), so :class:`GateEvaluator` caches the satisfied ``(partition, epoch)`` pairs and
pays each recursion once. A rewind (a seek back, an offset reset, a new assignment)
breaks that premise: the reader calls :meth:`GateEvaluator.forget` and the gates are
decided again from the progress as it stands then. A pending epoch blocks every
partition that receives keys in it at its receiving boundary until it is sealed.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from linear_hash.flow import blockers
from linear_hash.layout import Layout
from linear_hash.routing import _check_partition

__all__ = [
    "EpochInfo",
    "GateEvaluator",
    "OffsetMaps",
    "OffsetView",
    "Wait",
    "epoch_range",
    "gate_plan",
]


@dataclass(frozen=True, slots=True)
class EpochInfo:
    """What the gates need of one epoch of a topic's layout history.

    Attributes:
        epoch: The epoch number (0 is the adoption).
        sealed: ``True`` once the producer barrier passed and the giving partitions'
            boundaries are known.
        edges: ``(source, destination)`` key-flow pairs of the change into this epoch.
        boundaries: Partition -> first offset written under this epoch or later
            (receiving partitions from the publish, giving partitions from the seal).
        to_active: The active partition count of the epoch's layout (``0`` if unknown;
            used only by :func:`epoch_range` callers that audit placement).
    """

    epoch: int
    sealed: bool
    edges: tuple[tuple[int, int], ...] = ()
    boundaries: Mapping[int, int] = field(default_factory=dict)
    to_active: int = 0

    @classmethod
    def from_record(cls, record: Any) -> EpochInfo:
        """Build from an ``EpochRecord``-like object (``coordinator.kernel.store`` or a dict).

        Args:
            record: Anything with ``epoch``, ``state`` (``"pending"``/``"sealed"``),
                ``edges`` and ``boundaries`` (partition keys as ``int`` or decimal
                ``str``), as attributes or mapping keys; ``to_active`` is optional.

        Returns:
            The epoch as the gates see it.
        """

        def get(name: str, default: Any = None) -> Any:
            if isinstance(record, Mapping):
                return record.get(name, default)
            return getattr(record, name, default)

        return cls(
            epoch=int(get("epoch")),
            sealed=get("state") == "sealed",
            edges=tuple((int(a), int(b)) for a, b in get("edges", ()) or ()),
            boundaries={int(p): int(o) for p, o in (get("boundaries", {}) or {}).items()},
            to_active=int(get("to_active", 0) or 0),
        )


class OffsetView(Protocol):
    """Where the gates read the group's progress from (Kafka, the position service...)."""

    def committed(self, partition: int) -> int | None:
        """Return the group's committed offset on ``partition``, ``None`` if none."""

    def log_start(self, partition: int) -> int:
        """Return the log start offset (low watermark) of ``partition``."""


@dataclass(frozen=True, slots=True)
class OffsetMaps:
    """An :class:`OffsetView` held in two mappings (a snapshot, the vectors, tests).

    Attributes:
        committed_offsets: Partition -> committed offset; an absent partition has none.
        log_starts: Partition -> log start offset; an absent partition starts at 0.
    """

    committed_offsets: Mapping[int, int] = field(default_factory=dict)
    log_starts: Mapping[int, int] = field(default_factory=dict)

    def committed(self, partition: int) -> int | None:
        """Return the committed offset on ``partition``, ``None`` if none."""
        return self.committed_offsets.get(partition)

    def log_start(self, partition: int) -> int:
        """Return the log start offset of ``partition`` (0 if not given)."""
        return self.log_starts.get(partition, 0)


@dataclass(frozen=True, slots=True, order=True)
class Wait:
    """One thing a closed gate waits for.

    Attributes:
        partition: The partition whose progress is missing, or ``-1`` for a pending
            epoch (nothing to wait on but the seal).
        offset: The committed offset ``partition`` must reach (``-1`` for a pending
            epoch, or when the boundary is missing from the record).
        epoch: The epoch whose gate needs it.
    """

    partition: int
    offset: int
    epoch: int


class GateEvaluator:
    """Decides gates for one topic from its epoch history; keeps the satisfied-gate cache.

    Not thread-safe: one consumer's poll thread owns it.

    Args:
        history: The topic's epochs, any order (sorted by ``epoch`` here).
    """

    def __init__(self, history: Iterable[EpochInfo] = ()) -> None:
        self._satisfied: set[tuple[int, int]] = set()
        self._history: list[EpochInfo] = []
        # partition -> [(boundary, epoch)] where it receives keys, ascending.
        self._incoming: dict[int, list[tuple[int, int]]] = {}
        # (destination, epoch) -> sources.
        self._sources: dict[tuple[int, int], tuple[int, ...]] = {}
        # partition -> sorted boundaries of sealed epochs where it gives keys.
        self._outgoing: dict[int, list[int]] = {}
        self._by_epoch: dict[int, EpochInfo] = {}
        # partition -> limit(partition); a long history makes the scan cost O(epochs).
        self._limits: dict[int, float] = {}
        self.update(history)

    @property
    def history(self) -> Sequence[EpochInfo]:
        """The epochs in force, ascending."""
        return tuple(self._history)

    @property
    def latest_epoch(self) -> int:
        """The highest epoch known, ``-1`` with no history."""
        return self._history[-1].epoch if self._history else -1

    @property
    def satisfied(self) -> frozenset[tuple[int, int]]:
        """The cached open gates, as ``(destination partition, epoch)`` pairs."""
        return frozenset(self._satisfied)

    def update(self, history: Iterable[EpochInfo]) -> None:
        """Replace the history, keeping the cache of satisfied gates.

        A satisfied gate belongs to a sealed epoch, and a sealed epoch never changes, so
        the cache stays valid across a newer history.
        """
        self._history = sorted(history, key=lambda e: e.epoch)
        self._by_epoch = {e.epoch: e for e in self._history}
        incoming: dict[int, list[tuple[int, int]]] = {}
        sources: dict[tuple[int, int], list[int]] = {}
        outgoing: dict[int, list[int]] = {}
        for info in self._history:
            for a, b in info.edges:
                sources.setdefault((b, info.epoch), []).append(a)
                if info.sealed and a in info.boundaries:
                    outgoing.setdefault(a, []).append(info.boundaries[a])
            for b in {b for _a, b in info.edges}:
                # A receiving boundary missing from the record: block from offset 0,
                # the only safe reading of a malformed epoch.
                incoming.setdefault(b, []).append((info.boundaries.get(b, 0), info.epoch))
        for gates in incoming.values():
            gates.sort()
        for marks in outgoing.values():
            marks.sort()
        self._incoming = incoming
        self._sources = {k: tuple(sorted(v)) for k, v in sources.items()}
        self._outgoing = outgoing
        self._satisfied &= {k for k in self._satisfied if k[1] in self._by_epoch}
        self._limits.clear()

    def forget(self) -> None:
        """Drop the cache of satisfied gates (the group's progress may have gone back).

        Every gate is decided again, from the progress the next check reads.
        """
        self._satisfied.clear()
        self._limits.clear()

    def gates_of(self, partition: int) -> list[tuple[int, int]]:
        """List ``(boundary, epoch)`` of every gate of ``partition``, ascending."""
        return list(self._incoming.get(partition, ()))

    def limit(self, partition: int) -> float:
        """Return the lowest boundary of a gate of ``partition`` not known to be open.

        Records below it may be delivered without any check; ``math.inf`` when every
        gate of the partition is known to be open.
        """
        cached = self._limits.get(partition)
        if cached is not None:
            return cached
        limit: float = math.inf
        for boundary, epoch in self._incoming.get(partition, ()):
            if (partition, epoch) not in self._satisfied:
                limit = boundary
                break
        self._limits[partition] = limit
        return limit

    def source_marks(self, partition: int) -> list[int]:
        """Boundaries ``B_a(e)`` of sealed epochs where ``partition`` gives keys away.

        A consumer whose position on ``partition`` reaches one of them calls
        ``on_partition_key_maybe_revoked`` and commits at once.
        """
        return list(self._outgoing.get(partition, ()))

    def has_source_marks(self, partition: int) -> bool:
        """Whether :meth:`source_marks` of ``partition`` is not empty (no list is built)."""
        return bool(self._outgoing.get(partition))

    def is_source(self, partition: int) -> bool:
        """Return ``True`` if ``partition`` gives keys away in some epoch."""
        return any(a == partition for info in self._history for a, _b in info.edges)

    def may_deliver(self, partition: int, offset: int, view: OffsetView) -> bool:
        """Decide whether the record of ``partition`` at ``offset`` may be delivered.

        Args:
            partition: The record's partition ``b``.
            offset: The record's offset ``o``.
            view: The group's committed offsets and the log start offsets.

        Returns:
            ``True`` when every gate of ``b`` at a boundary ``<= o`` is open; the gates
            found open are cached.
        """
        return not self._walk(partition, offset, view, collect=None)

    def waiting_on(self, partition: int, offset: int, view: OffsetView) -> list[Wait]:
        """List what keeps the record of ``partition`` at ``offset`` from delivery.

        Args:
            partition: The blocked partition.
            offset: The offset it is held at.
            view: The group's committed offsets and the log start offsets.

        Returns:
            Every missing piece of progress (partition and committed offset needed) and
            every pending epoch in the way, sorted and without duplicates; empty when
            the record may be delivered.
        """
        found: set[Wait] = set()
        self._walk(partition, offset, view, collect=found)
        return sorted(found)

    def required_partitions(self, partition: int, offset: int) -> set[int]:
        """Partitions whose progress a check of ``(partition, offset)`` may read.

        Lets a caller fetch every committed offset it needs in one request.
        """
        needed: set[int] = set()
        seen: set[tuple[int, int, int]] = set()
        stack: list[tuple[int, int, float]] = [(partition, offset, math.inf)]
        while stack:
            b, o, before = stack.pop()
            for boundary, epoch in self._incoming.get(b, ()):
                if boundary > o or epoch >= before or (b, epoch) in self._satisfied:
                    continue
                info = self._by_epoch[epoch]
                for a in self._sources.get((b, epoch), ()):
                    bound = info.boundaries.get(a)
                    if bound is None or (a, bound, epoch) in seen:
                        continue
                    seen.add((a, bound, epoch))
                    needed.add(a)
                    stack.append((a, bound, epoch))
        return needed

    def _walk(self, b: int, o: int, view: OffsetView, collect: set[Wait] | None) -> bool:
        """Return ``True`` if some gate of ``b`` at or below ``o`` is closed.

        With ``collect``, keep walking to gather every :class:`Wait` instead of
        stopping at the first closed gate.
        """
        memo: dict[tuple[int, int], bool] = {}
        closed = False
        for boundary, epoch in self._incoming.get(b, ()):
            if boundary > o:
                break
            if not self._gate_open(b, epoch, view, memo, collect):
                closed = True
                if collect is None:
                    return True
        return closed

    def _gate_open(
        self,
        b: int,
        epoch: int,
        view: OffsetView,
        memo: dict[tuple[int, int], bool],
        collect: set[Wait] | None,
    ) -> bool:
        key = (b, epoch)
        if key in self._satisfied:
            return True
        if key in memo:
            return memo[key]
        # Guard against a malformed history looping: a gate under evaluation counts as
        # closed for anyone who reaches it again.
        memo[key] = False
        info = self._by_epoch[epoch]
        if not info.sealed:
            if collect is not None:
                collect.add(Wait(-1, -1, epoch))
            return False
        is_open = True
        for a in self._sources.get(key, ()):
            bound = info.boundaries.get(a)
            if bound is None:
                if collect is not None:
                    collect.add(Wait(a, -1, epoch))
                is_open = False
            elif not self._reached(a, bound, epoch, view, memo, collect):
                is_open = False
            if not is_open and collect is None:
                break
        memo[key] = is_open
        if is_open:
            self._satisfied.add(key)
            self._limits.pop(b, None)
        return is_open

    def _reached(
        self,
        a: int,
        o: int,
        before: int,
        view: OffsetView,
        memo: dict[tuple[int, int], bool],
        collect: set[Wait] | None,
    ) -> bool:
        done = True
        committed = view.committed(a)
        if (committed is None or committed < o) and view.log_start(a) < o:
            if collect is None:
                return False
            collect.add(Wait(a, o, before))
            done = False
        for boundary, epoch in self._incoming.get(a, ()):
            if boundary > o:
                break
            if epoch >= before:
                continue
            if not self._gate_open(a, epoch, view, memo, collect):
                done = False
                if collect is None:
                    return False
        return done


def epoch_range(history: Sequence[EpochInfo], partition: int, offset: int) -> tuple[int, int]:
    """The epochs that may have routed the record of ``partition`` at ``offset``.

    A giving partition's boundary is an upper bound of its old-epoch records (at or
    past it, the record is from that epoch or later); a receiving partition's boundary
    is a lower bound of its new-epoch records (below it, the record is older).

    Args:
        history: The topic's epochs, ascending.
        partition: The record's partition.
        offset: The record's offset.

    Returns:
        ``(lowest, highest)`` epoch, inclusive.
    """
    lowest = 0
    highest = history[-1].epoch if history else 0
    for info in history:
        bound = info.boundaries.get(partition)
        if bound is None:
            continue
        gives = any(a == partition for a, _b in info.edges)
        receives = any(b == partition for _a, b in info.edges)
        if gives and offset >= bound:
            lowest = max(lowest, info.epoch)
        if receives and offset < bound:
            highest = min(highest, info.epoch - 1)
    return lowest, highest


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
