"""The trim rules, pure: which partitions are retired, which count as trimmed, and how far
a trim may go.

Every caller decides with these functions and nowhere else: the daemon's drain monitor
and consumed-retention sweep (:mod:`coordinator.trims.retention`), ``ordered trim
--consumed`` and ``describe`` (through the same module), and history compaction
(:mod:`coordinator.trims.history_compaction`), which records a retired partition's trim
before it drops the shrink epoch that retired it.

* :func:`retired_partitions`: the retired partitions and their final offsets, from the
  epoch history (and the records compaction left behind);
* :func:`is_trimmed`: whether a retired partition counts as trimmed (its log start is at
  or past its final offset, or its record says it was trimmed at this retirement);
* :func:`trim_target`: the one offset a trim of one partition may move its log start
  to, from the interested groups' minimum committed offset, the high watermark, the
  retention cut-off and (for a draining partition) its final offset.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal, Protocol

from coordinator.kernel.errors import LayoutError
from coordinator.kernel.store import EpochRecord, RetiredRecord, TopicRecord

__all__ = [
    "CommittedFloor",
    "RetiredPartition",
    "RetiredState",
    "consumed_targets",
    "is_trimmed",
    "records_retirement",
    "retired_partitions",
    "retired_state",
    "trim_target",
    "trimmed_record",
]

RetiredState = Literal["retiring", "draining", "trimmed"]
"""What a retired partition is now (see :func:`retired_state`)."""


@dataclass(frozen=True, slots=True)
class RetiredPartition:
    """A retired partition as the epoch history defines it.

    Attributes:
        partition: The partition.
        epoch: The shrink epoch that retired it last.
        final_offset: Its boundary in that epoch, ``None`` while the epoch is pending.
    """

    partition: int
    epoch: int
    final_offset: int | None


class CommittedFloor(Protocol):
    """What the trim rules read of the interested groups (a :class:`TopicInterest`)."""

    def min_committed(self, partition: int) -> int | None:
        """The minimum committed offset over the interested groups, ``None`` if unknown."""
        ...


def retired_partitions(
    record: TopicRecord,
    epochs: Iterable[EpochRecord],
    kafka_partitions: int,
    stored: Mapping[int, RetiredRecord] | None = None,
) -> dict[int, RetiredPartition]:
    """The partitions of a topic that are retired now.

    A partition at or above the active count is retired if an epoch took it out of
    the active range; one that was never active (added to Kafka by hand) is not ours.
    When history compaction dropped that epoch, it wrote the partition's
    :class:`RetiredRecord` first: ``stored`` (the topic's records) supplies it then, if
    its epoch is older than every epoch left.
    """
    history = sorted(epochs, key=lambda e: e.epoch)
    first = history[0].epoch if history else None
    out: dict[int, RetiredPartition] = {}
    for p in range(record.active, kafka_partitions):
        retiring = [e for e in history if e.to_active <= p < e.from_active]
        if not retiring:
            kept = (stored or {}).get(p)
            if kept is not None and (first is None or kept.epoch < first):
                out[p] = RetiredPartition(p, kept.epoch, kept.final_offset)
            continue
        last = retiring[-1]
        final = last.boundaries.get(p) if last.sealed else None
        out[p] = RetiredPartition(p, last.epoch, final)
    return out


def records_retirement(stored: RetiredRecord | None, retired: RetiredPartition, state: str) -> bool:
    """Whether ``stored`` already records this retirement (epoch, final offset) in ``state``."""
    return (
        stored is not None
        and stored.state == state
        and stored.epoch == retired.epoch
        and stored.final_offset == retired.final_offset
    )


def is_trimmed(
    retired: RetiredPartition, stored: RetiredRecord | None, log_start: int | None = None
) -> bool:
    """Whether a retired partition counts as trimmed: the one "is trimmed" predicate.

    It does when its final offset is known and either its log start (if given) is at or
    past it, or its record says it was trimmed at this same retirement (a later shrink
    of the same partition is a new retirement: the old record does not count).
    """
    if retired.final_offset is None:
        return False
    if log_start is not None and log_start >= retired.final_offset:
        return True
    return records_retirement(stored, retired, "trimmed")


def retired_state(
    retired: RetiredPartition, stored: RetiredRecord | None, log_start: int
) -> RetiredState:
    """``retiring`` (final offset not yet known), ``trimmed`` (:func:`is_trimmed`) or
    ``draining``."""
    if retired.final_offset is None:
        return "retiring"
    return "trimmed" if is_trimmed(retired, stored, log_start) else "draining"


def trimmed_record(
    topic: str,
    retired: RetiredPartition,
    stored: RetiredRecord | None,
    now: float | None = None,
) -> RetiredRecord:
    """The record that says ``retired`` is trimmed: ``stored`` if it says so already.

    Raises:
        LayoutError: The retirement's epoch is pending (no final offset to be trimmed to).
    """
    final = retired.final_offset
    if final is None:
        raise LayoutError(f"{topic}[{retired.partition}]: retiring epoch not sealed")
    if stored is not None and records_retirement(stored, retired, "trimmed"):
        return stored
    at = time.time() if now is None else now
    return RetiredRecord(
        topic=topic,
        partition=retired.partition,
        epoch=retired.epoch,
        final_offset=final,
        state="trimmed",
        updated_at=at,
        trimmed_at=at,
    )


def trim_target(
    log_start: int,
    committed: int | None,
    end: int,
    *,
    consumed: bool = True,
    cutoff: int | None = None,
    final: int | None = None,
) -> int | None:
    """The offset a trim may move one partition's log start to: the one trim-target rule.

    Two rules, the larger answer wins:

    * *drained* (``final``, the final offset of a retired partition still draining):
      once every interested group has committed up to it, to exactly the final offset;
    * *consumed* (``consumed``): to the minimum committed offset over the interested
      groups, never past the high watermark ``end`` nor, with a retention ``cutoff``
      (the offset of the first record newer than the retention), past that.

    Args:
        log_start: The partition's log start offset now.
        committed: The minimum committed offset over the interested groups (``None``:
            unknown, nothing is trimmed).
        end: The high watermark.
        consumed: Whether the consumed rule applies (``ordered trim --consumed``, or a
            topic with a consumed retention).
        cutoff: The retention's cut-off (``None``: none).
        final: The final offset of a draining retired partition (``None``: not draining).

    Returns:
        The target, or ``None`` when there is nothing to trim (not past ``log_start``).
    """
    if committed is None:
        return None
    target = log_start
    if final is not None and committed >= final:
        target = max(target, final)
    if consumed:
        reach = min(committed, end)
        if cutoff is not None:
            reach = min(reach, cutoff)
        target = max(target, reach)
    return target if target > log_start else None


def consumed_targets(
    interest: CommittedFloor,
    starts: Mapping[int, int],
    ends: Mapping[int, int],
    cutoffs: Mapping[int, int] | None = None,
) -> dict[int, int]:
    """Per partition, the offset a consumed trim may move the log start to.

    :func:`trim_target` with the consumed rule for every partition of ``starts``
    (with ``cutoffs``, the retention sweep, a partition without a cut-off is not
    trimmed). Partitions with an unknown minimum, or nothing to trim, are left out.
    """
    out: dict[int, int] = {}
    for p, start in sorted(starts.items()):
        cutoff = None if cutoffs is None else cutoffs.get(p, start)
        target = trim_target(start, interest.min_committed(p), ends[p], cutoff=cutoff)
        if target is not None:
            out[p] = target
    return out
