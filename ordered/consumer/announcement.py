"""One partition's boundary announcement as a pure state machine (no I/O).

Lifecycle of one partition's announcement (:class:`AnnounceState`)::

    IDLE --REACHED--> DUE          the position reached a source boundary
    DUE  --REACHED--> DUE          delivery went on: the position to commit moves
    DUE  --TOLD--> TOLD            maybe_revoked ran (a raise leaves it DUE)
    TOLD --REACHED--> DUE          delivery went on: the callback runs again
    DUE/TOLD --COMMITTED--> IDLE   the boundary commit succeeded
    TOLD --TOLD--> TOLD            a commit that failed is retried without the callback
    TOLD --RELEASED--> IDLE        application commit mode: the application commits
    DUE/TOLD --WITHDRAWN--> IDLE   revoked with the records that reached the boundary
                                   never given (the next owner reads them again)

Any other (state, event) pair is a :class:`~coordinator.client.errors.StateTransitionError`.
"""

from __future__ import annotations

import enum

from coordinator.client.errors import StateTransitionError

__all__ = ["ANNOUNCE_TRANSITIONS", "AnnounceEvent", "AnnounceState", "Announcement"]


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
    RELEASED = "released"
    WITHDRAWN = "withdrawn"


_I, _D, _T = AnnounceState.IDLE, AnnounceState.DUE, AnnounceState.TOLD

ANNOUNCE_TRANSITIONS: dict[tuple[AnnounceState, AnnounceEvent], AnnounceState] = {
    (_I, AnnounceEvent.REACHED): _D,
    (_D, AnnounceEvent.REACHED): _D,
    (_T, AnnounceEvent.REACHED): _D,
    (_D, AnnounceEvent.TOLD): _T,
    (_T, AnnounceEvent.TOLD): _T,
    (_D, AnnounceEvent.COMMITTED): _I,
    (_T, AnnounceEvent.COMMITTED): _I,
    (_T, AnnounceEvent.RELEASED): _I,
    (_D, AnnounceEvent.WITHDRAWN): _I,
    (_T, AnnounceEvent.WITHDRAWN): _I,
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

    def released(self) -> int:
        """Application commit mode: ``maybe_revoked`` ran; the application commits.

        Returns:
            The position to store (the application's commit of stored offsets covers it).
        """
        self._set_state(AnnounceEvent.RELEASED)
        self.mark = None
        self.stored = self.position
        self.announced = max(self.announced, self.position)
        return self.position

    def withdraw(self, first: int) -> None:
        """Records from ``first`` on were taken back before the application had them.

        The position to commit falls back to ``first``: still at or past the boundary,
        the announcement stays (due again: its callback runs for the new position);
        below it, the boundary was not reached, and the announcement ends.
        """
        if self.state is _I or self.position <= first:
            return
        if self.mark is not None and first >= self.mark:
            self._set_state(AnnounceEvent.REACHED)
            self.position = first
            return
        self._set_state(AnnounceEvent.WITHDRAWN)
        self.mark = None

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
