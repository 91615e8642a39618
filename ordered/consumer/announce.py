"""Boundary announcements and stored offsets: ``maybe_revoked``, then a boundary commit.

A consumer whose position on a partition ``a`` reaches a boundary where keys of ``a``
moved elsewhere calls ``on_partition_key_maybe_revoked([a])`` at the start of its next
``poll``/``consume`` (the application has processed the records returned so far),
then commits ``a`` synchronously at that position, so the destination's consumer may
proceed. Until then the offset stored for ``a`` stays one below the boundary, so no
auto-commit (or ``commit()`` of stored offsets) can open the destination's gate first.

Lifecycle of one partition's announcement (:class:`AnnounceState`)::

    IDLE --REACHED--> DUE          the position reached a source boundary
    DUE  --REACHED--> DUE          delivery went on: the position to commit moves
    DUE  --TOLD--> TOLD            maybe_revoked ran (a raise leaves it DUE)
    TOLD --REACHED--> DUE          delivery went on: the callback runs again
    DUE/TOLD --COMMITTED--> IDLE   the boundary commit succeeded
    TOLD --TOLD--> TOLD            a commit that failed is retried without the callback

Any other (state, event) pair is a :class:`~coordinator.errors.StateTransitionError`.
"""

from __future__ import annotations

import enum
import logging
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, TopicPartition

from coordinator.errors import StateTransitionError

if TYPE_CHECKING:
    from coordinator.positions import PositionService
    from ordered.consumer.state import Core, PartState

__all__ = ["ANNOUNCE_TRANSITIONS", "AnnounceEvent", "AnnounceState", "Announcement", "Announcer"]

_log = logging.getLogger(__name__)


class AnnounceState(enum.Enum):
    """Where one partition's boundary announcement stands."""

    IDLE = "idle"
    DUE = "due"
    TOLD = "told"


class AnnounceEvent(enum.Enum):
    """What happened to an announcement."""

    REACHED = "reached"
    TOLD = "told"
    COMMITTED = "committed"


_I, _D, _T = AnnounceState.IDLE, AnnounceState.DUE, AnnounceState.TOLD

ANNOUNCE_TRANSITIONS: dict[tuple[AnnounceState, AnnounceEvent], AnnounceState] = {
    (_I, AnnounceEvent.REACHED): _D,
    (_D, AnnounceEvent.REACHED): _D,
    (_T, AnnounceEvent.REACHED): _D,
    (_D, AnnounceEvent.TOLD): _T,
    (_T, AnnounceEvent.TOLD): _T,
    (_D, AnnounceEvent.COMMITTED): _I,
    (_T, AnnounceEvent.COMMITTED): _I,
}
"""Every allowed (state, event) pair and the state it leads to."""


class Announcement:
    """One partition's announcement and stored offset (pure).

    Attributes:
        state: The :class:`AnnounceState`; written only by :meth:`_set_state`.
        mark: The first boundary reached and not yet committed (``None`` when idle):
            the stored offset stays below it.
        position: The offset the boundary commit will write.
        announced: The highest offset a boundary commit wrote.
        stored: The offset last stored for a commit.
    """

    __slots__ = ("announced", "mark", "position", "state", "stored")

    def __init__(self) -> None:
        self.state = _I
        self.mark: int | None = None
        self.position = -1
        self.announced = -1
        self.stored: int | None = None

    def _set_state(self, event: AnnounceEvent) -> None:
        new = ANNOUNCE_TRANSITIONS.get((self.state, event))
        if new is None:
            raise StateTransitionError(
                f"announcement: event {event.name} is not allowed in state {self.state.name}"
            )
        self.state = new

    def reached(self, mark: int, position: int) -> None:
        """The position reached source boundary ``mark``; commit ``position``."""
        if self.state is _T and position == self.position:
            return  # the same announcement, already told
        self._set_state(AnnounceEvent.REACHED)
        self.position = position
        if self.mark is None:
            self.mark = mark

    def told(self) -> None:
        """``on_partition_key_maybe_revoked`` ran for :attr:`position`."""
        self._set_state(AnnounceEvent.TOLD)

    def committed(self, offset: int) -> None:
        """The boundary commit of ``offset`` succeeded."""
        self._set_state(AnnounceEvent.COMMITTED)
        self.mark = None
        self.stored = offset
        self.announced = max(self.announced, offset)

    def store_for(self, offset: int, pending_giver: bool) -> int | None:
        """The offset to store after delivering up to ``offset`` (exclusive), or ``None``.

        Args:
            offset: The last delivered offset + 1.
            pending_giver: The partition gives keys away in a pending epoch: its
                boundary is not known yet, so the stored offset does not move.
        """
        if self.mark is not None:
            stored: int | None = min(offset, self.mark - 1)
        elif pending_giver:
            stored = self.stored
        else:
            stored = offset
        if stored is not None:
            self.stored = stored
        return stored


class Announcer:
    """Schedules and runs boundary announcements for the consumer's partitions."""

    def __init__(self, core: Core, positions: PositionService | None) -> None:
        self._core = core
        self._positions = positions

    def due(self) -> bool:
        """Whether some partition has an announcement to run."""
        return any(p.ann.state is not _I for p in self._core.parts.values())

    def check_marks(self, part: PartState) -> None:
        """Schedule an announcement if the position reached a boundary of a source."""
        if part.position is None:
            return
        view = self._core.layouts.topics.get(part.topic)
        if view is None or view.gates is None:
            return
        known = self._core.known_commits.get((part.topic, part.partition), -1)
        start = part.start if part.start is not None else part.position
        for mark in view.gates.source_marks(part.partition):
            # Only a boundary this assignment delivered up to: a consumer that started
            # past it has nothing of the tail to announce.
            if max(part.ann.announced, known) < mark <= part.position and start < mark:
                part.ann.reached(mark, part.position)
                return

    def run(self, only: set[tuple[str, int]] | None = None) -> list[Any]:
        """Call ``on_partition_key_maybe_revoked``, then commit the boundary positions.

        A listener exception leaves the announcement due (the next call runs it again).
        A failed commit (a rebalance in progress, the coordinator moving) is logged and
        retried at the next call without calling the listener again.

        Returns:
            The boundary positions committed now.
        """
        core = self._core
        due = [
            part
            for key, part in sorted(core.parts.items())
            if part.ann.state is not _I and (only is None or key in only)
        ]
        done: list[Any] = []
        if not due:
            return done
        fresh = [p for p in due if p.ann.state is _D]
        if core.listener is not None and fresh:
            core.listener.on_partition_key_maybe_revoked(
                [TopicPartition(p.topic, p.partition, p.ann.position) for p in fresh]
            )
        for part in fresh:
            part.ann.told()
        tps = [TopicPartition(p.topic, p.partition, p.ann.position) for p in due]
        try:
            result = core.consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as exc:
            _log.warning("boundary commit failed, retrying at the next call: %s", exc)
            return done
        for tp in result or ():
            key = (tp.topic, tp.partition)
            if tp.error is not None:
                _log.warning("boundary commit of %s[%d] failed: %s", *key, tp.error)
                continue
            core.events.announcement(tp.topic, tp.partition, tp.offset)
            owner = core.parts.get(key)
            if owner is not None and owner.ann.state is _T:
                owner.ann.committed(tp.offset)
                if core.config.store_offsets:
                    core.consumer.store_offsets(offsets=[tp])
            core.remember_commit(tp.topic, tp.partition, tp.offset)
            if self._positions is not None:
                self._positions.publish_if_wanted(tp.topic, tp.partition, tp.offset)
            done.append(tp)
        return done
