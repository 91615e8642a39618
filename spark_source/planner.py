"""The pure planning of a micro-batch: gate caps, read limits, ranges. No I/O.

The driver (:mod:`spark_source.source`) fetches Kafka's offsets and the layout history,
then asks this module where the batch may end:

1. :func:`gate_caps` caps each partition ``b`` of an adopted topic at the first
   boundary ``B_b(e)`` whose gate is closed when the group's progress is ``start`` (the
   end of the last batch Spark logged) and the log start offsets: the gate rule of
   :mod:`linear_hash.gating`, decided by :class:`~linear_hash.gating.GateEvaluator`.
   A pending epoch closes its receiving partitions at their boundary.
2. :func:`rate_limit` splits ``maxOffsetsPerTrigger`` over the partitions in proportion
   to their backlog *below the caps* (at least one offset each, as Spark does), so a
   closed gate never takes a share that the free partitions could use.
3. :func:`offset_ranges` turns ``start``/``end`` into the ranges of the Spark tasks,
   splitting them for ``minPartitions`` as Spark's ``KafkaOffsetRangeCalculator`` does.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from linear_hash.gating import EpochInfo, GateEvaluator

__all__ = [
    "OffsetRange",
    "StartView",
    "available_now_target",
    "backlog",
    "gate_caps",
    "offset_ranges",
    "rate_limit",
]

Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True)
class StartView:
    """The gates' view of the query's progress: what earlier batches already read.

    ``committed(a)`` is ``start[a]`` (everything below it is in a batch Spark ran and
    logged); ``log_start(a)`` is Kafka's log start offset, so trimmed records count as
    passed (``failOnDataLoss=false`` reading on after a loss, or retired partitions).
    """

    start: Mapping[int, int]
    log_starts: Mapping[int, int]

    def committed(self, partition: int) -> int | None:
        """The query's progress on ``partition`` (``None`` if it never read it)."""
        return self.start.get(partition)

    def log_start(self, partition: int) -> int:
        """Kafka's log start offset of ``partition`` (0 if unknown)."""
        return self.log_starts.get(partition, 0)


def gate_caps(
    epochs: Iterable[EpochInfo],
    start: Mapping[int, int],
    end: Mapping[int, int],
    log_start: Mapping[int, int],
) -> dict[int, int]:
    """Cap each partition's end at its first closed gate.

    Args:
        epochs: The topic's epochs (``TopicHistory.epochs``), read *after* ``end``.
        start: Partition -> where the batch starts (absent: a partition the query has
            not read yet, which starts at 0).
        end: Partition -> Kafka's end offset (or the AvailableNow target).
        log_start: Partition -> Kafka's log start offset.

    Returns:
        Partition -> the batch's end: ``end`` lowered to the first boundary ``B_b(e)``
        below it whose gate is closed, and never below the partition's start.
    """
    evaluator = GateEvaluator(epochs)
    view = StartView(start, log_start)
    caps: dict[int, int] = {}
    for partition, last in end.items():
        first = start.get(partition, 0)
        cap = last
        for boundary, _epoch in evaluator.gates_of(partition):
            if boundary >= last:
                break
            # may_deliver checks every gate at or below the boundary (and caches the
            # open ones), so the first failure is the lowest closed gate.
            if not evaluator.may_deliver(partition, boundary, view):
                cap = boundary
                break
        caps[partition] = max(first, min(cap, last))
    return caps


def available_now_target(
    epochs: Iterable[EpochInfo],
    target: Mapping[int, int],
    end: Mapping[int, int],
) -> dict[int, int]:
    """Raise an AvailableNow target where a sealed gate below it needs more of a source.

    A gate of ``b`` below ``target[b]`` opens only when its source ``a`` is read up to
    ``B_a(e)``. If the epoch was sealed after the target was frozen, ``B_a(e)`` can lie
    past ``target[a]``: the records of ``a`` in between are old-epoch records of the
    keys that moved, and must be read before ``b``'s new ones. The target of ``a`` is
    raised to ``B_a(e)`` (never past Kafka's end), transitively.

    Args:
        epochs: The topic's epochs.
        target: Partition -> the frozen target.
        end: Partition -> Kafka's end offset now.

    Returns:
        The target, raised where needed.
    """
    infos = {e.epoch: e for e in epochs}
    evaluator = GateEvaluator(infos.values())
    out = dict(target)
    changed = True
    while changed:
        changed = False
        for b, last in list(out.items()):
            for boundary, epoch in evaluator.gates_of(b):
                if boundary >= last:
                    break
                info = infos[epoch]
                if not info.sealed:
                    continue
                for a, dest in info.edges:
                    if dest != b or a not in info.boundaries:
                        continue
                    need = min(info.boundaries[a], end.get(a, 0))
                    if need > out.get(a, 0):
                        out[a] = need
                        changed = True
    return out


def backlog(start: Mapping[str, Mapping[int, int]], end: Mapping[str, Mapping[int, int]]) -> int:
    """The number of offsets between ``start`` and ``end`` (new partitions from 0)."""
    total = 0
    for topic, parts in end.items():
        begin = start.get(topic, {})
        for p, last in parts.items():
            total += max(0, last - begin.get(p, 0))
    return total


def rate_limit(
    start: Mapping[str, Mapping[int, int]], end: Mapping[str, Mapping[int, int]], limit: int
) -> Offsets:
    """Spark's ``maxOffsetsPerTrigger`` split: in proportion to backlog, at least 1 each.

    Args:
        start: Topic -> partition -> the batch's start (absent: 0).
        end: Topic -> partition -> the capped end.
        limit: The most offsets the batch may span (> 0).

    Returns:
        The ends, each lowered to ``start + share`` where the share is
        ``limit * backlog / total`` rounded down, or up to 1 when below 1 (so no partition
        with a backlog starves), and never past ``end``.
    """
    sizes: dict[tuple[str, int], int] = {}
    for topic, parts in end.items():
        begin = start.get(topic, {})
        for p, last in parts.items():
            size = last - begin.get(p, 0)
            if size > 0:
                sizes[(topic, p)] = size
    total = float(sum(sizes.values()))
    out: Offsets = {topic: dict(parts) for topic, parts in end.items()}
    if total < 1:
        return out
    for (topic, p), size in sizes.items():
        first = start.get(topic, {}).get(p, 0)
        prorate = limit * (size / total)
        share = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        out[topic][p] = min(end[topic][p], first + share)
    return out


@dataclass(frozen=True)
class OffsetRange:
    """One Spark task's read: ``[start, end)`` of one partition."""

    topic: str
    partition: int
    start: int
    end: int

    @property
    def size(self) -> int:
        """The number of offsets in the range."""
        return self.end - self.start


def offset_ranges(
    start: Mapping[str, Mapping[int, int]],
    end: Mapping[str, Mapping[int, int]],
    min_partitions: int | None = None,
) -> list[OffsetRange]:
    """The tasks of a batch, as Spark's ``KafkaOffsetRangeCalculator`` plans them.

    One range per partition with data; with ``minPartitions`` above that count, each
    range is split into ``max(round(size / total * minPartitions), 1)`` parts.
    Ranges are sorted by topic, partition and offset, so a replay plans the same tasks.
    """
    ranges: list[OffsetRange] = []
    for topic in sorted(end):
        begin = start.get(topic, {})
        for p in sorted(end[topic]):
            first = begin.get(p, 0)
            last = end[topic][p]
            if last > first:
                ranges.append(OffsetRange(topic, p, first, last))
    if min_partitions is None or len(ranges) >= min_partitions:
        return ranges
    total = sum(r.size for r in ranges)
    out: list[OffsetRange] = []
    for r in ranges:
        parts = max(round(r.size / total * min_partitions), 1)
        for i in range(parts):
            a = r.start + int(r.size * (i / parts))
            b = r.start + int(r.size * ((i + 1) / parts))
            if b > a:
                out.append(OffsetRange(r.topic, r.partition, a, b))
    return out
