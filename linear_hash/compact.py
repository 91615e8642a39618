"""Which old epochs of a layout history can be dropped: pure logic, no I/O.

An epoch's gates only matter while some record they govern is still in Kafka. The gate
of ``b`` at epoch ``e`` waits for ``reached(a, B_a(e))`` of every source ``a``, and
``reached`` already holds for any reader once the log start offset of ``a`` is at or
past ``B_a(e)`` (what is gone can no longer be delivered to anyone), provided the
earlier gates it recurses into are open the same way. Log start offsets only grow
(time retention, trims, consumed retention), so such a gate is open for every group,
every position and every later moment: removing it changes no gate decision.

An epoch is *passed* when it is sealed, every partition of its edges has a boundary,
and the log start offset of every partition it has a boundary on is at or past that
boundary. The rule (:func:`compactable`):

1. take the longest run of passed epochs from the oldest one (never past an epoch the
   caller pins);
2. keep the last epoch of that run as the *base* and drop the epochs before it.

Because only a run from the oldest epoch goes, every gate the dropped gates recurse
into is dropped too, and each is open for any committed offsets. The base stays
because its layout still places the records of the dropped epochs that are in Kafka
(a partition's records from before an epoch in which it gives keys away lie below its
boundary there, so a record at or past every passed boundary was routed by a layout
that puts its key where the base puts it): readers that audit placement
(:func:`~linear_hash.gating.epoch_range` and the layouts in that range) still find an
epoch under which each such record belongs where it is. The newest epoch always stays.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from linear_hash.gating import EpochInfo

__all__ = ["Compaction", "compactable", "hold_of"]


@dataclass(frozen=True, slots=True)
class Compaction:
    """What :func:`compactable` found.

    Attributes:
        drop: The epochs that can go, ascending (oldest first: delete in this order).
        base: The oldest epoch that stays (``-1`` with no history).
        held_by: Why the epoch after ``base`` stays: ``(epoch, partition, boundary)`` of
            the first boundary a log start has not passed (``partition`` and
            ``boundary`` are ``-1`` when the epoch is pending, lacks a boundary, or
            follows a pinned one); ``None`` when the whole history is passed.
        reason: The same in words.
    """

    drop: tuple[int, ...]
    base: int
    held_by: tuple[int, int, int] | None
    reason: str

    def to_dict(self) -> dict[str, object]:
        """A JSON-ready form."""
        return {
            "drop": list(self.drop),
            "base": self.base,
            "held_by": None if self.held_by is None else list(self.held_by),
            "reason": self.reason,
        }


def hold_of(info: EpochInfo, log_starts: Mapping[int, int]) -> tuple[int, int, str] | None:
    """Why ``info`` is not passed: ``(partition, boundary, reason)``, ``None`` if passed.

    A partition missing from ``log_starts`` counts as log start 0.
    """
    if not info.sealed:
        return -1, -1, f"epoch {info.epoch} is pending"
    for a, b in info.edges:
        for p in (a, b):
            if p not in info.boundaries:
                return -1, -1, f"epoch {info.epoch} has no boundary for partition {p}"
    for p, boundary in sorted(info.boundaries.items()):
        start = log_starts.get(p, 0)
        if start < boundary:
            return (
                p,
                boundary,
                f"epoch {info.epoch}: partition {p} starts at {start}, before its "
                f"boundary {boundary}",
            )
    return None


def compactable(
    history: Sequence[EpochInfo],
    log_starts: Mapping[int, int],
    pinned: Collection[int] = (),
) -> Compaction:
    """The oldest epochs of ``history`` that can go without changing any gate decision.

    Args:
        history: The topic's epochs (any order; duplicates are a malformed history).
        log_starts: Partition -> Kafka's log start offset now (a missing partition
            counts as 0, which keeps every epoch with a boundary above 0 on it).
        pinned: Epochs that must stay for another reason; nothing at or after the
            oldest of them is dropped.

    Returns:
        The epochs to drop (oldest first), the base that stays, and what holds the rest.

    Raises:
        ValueError: Two epochs share a number.
    """
    infos = sorted(history, key=lambda e: e.epoch)
    if len({e.epoch for e in infos}) != len(infos):
        raise ValueError("the history names an epoch twice")
    if not infos:
        return Compaction((), -1, None, "no history")
    pin = min(pinned) if pinned else None
    held_by: tuple[int, int, int] | None = None
    reason = "every epoch is passed: only the newest stays"
    last = 0  # index of the base: the last epoch of the passed run
    for i, info in enumerate(infos):
        why = hold_of(info, log_starts)
        if why is not None:
            held_by, reason = (info.epoch, why[0], why[1]), why[2]
            last = max(i - 1, 0)
            break
        last = i
        if pin is not None and info.epoch >= pin:
            # A passed pinned epoch can be the base: nothing at or after it goes.
            if i + 1 < len(infos):
                held_by = (infos[i + 1].epoch, -1, -1)
                reason = f"epoch {info.epoch} is pinned"
            break
    drop = tuple(e.epoch for e in infos[:last])
    return Compaction(drop, infos[last].epoch, held_by, reason)
