"""One assigned partition's state in one object, as pure state machines (no I/O).

Each assigned partition has one :class:`PartState`, as each has one
``TopicPartitionState`` in Kafka's Java consumer: its gate (state, limit, held offset,
stash), who wants it paused in librdkafka, its boundary announcement, and where delivery
stands. Nothing here calls Kafka, ZooKeeper or the clock: an event goes in
(:meth:`PartitionGate.fire`, the :class:`Announcement`'s methods,
:meth:`PartState.reach_marks`) and what the shell must do comes out (a :class:`Change`:
pause or resume, held or let go; an announcement due). The shell that carries it out
is ``Core.fire`` in :mod:`ordered.consumer.state`, which also holds the one caller of
librdkafka's ``pause``/``resume``.

The gate
--------

No I/O here: :meth:`PartitionGate.fire` changes the state, the limit, the held offset
and the stash, and returns a :class:`Change` that says whether the partition became
held or free (the owner decides librdkafka's pause from it). Unit tests drive the
machine with fake messages (anything with an ``offset()`` method).

A partition is *held* while it is ``BLOCKED`` or ``DRAINING``: the records of it that
could not be delivered are kept in the partition's *stash* and delivered first, and
every record of it handed over meanwhile joins the stash. Entering a held state asks
for a pause (confluent ``pause``), leaving one for a resume (:class:`Change`); the owner
(``Core.fire``) pauses librdkafka only when the partition's log reaches beyond its
share of the pre-fetch window past the held records, or once the stash outgrows that
share (see there why). Pausing makes librdkafka drop what it pre-fetched for the
partition and restart, on resume, right after the last record it handed to the
wrapper. The stash saves the refetch after a seek, which librdkafka only starts at
its next fetch cycle (up to a second).

The *limit* is the lowest offset at which a record must consult the gate rule: the
next boundary of the partition not known to be open (``inf``: none), or ``-1`` (every
record) while the partition is ``BLOCKED`` or the layout is unavailable.

Transitions (``state --event--> targets``; "open" is ``FREE`` when no gate lies ahead
of the partition, else ``GATED``; "unheld" is ``DRAINING`` while the stash holds
records, else open)::

    FREE/GATED/DRAINING --HISTORY--> unheld         a new layout history
    BLOCKED             --HISTORY--> BLOCKED        (the owner re-checks it at once)
    FREE/GATED/DRAINING --GATE_OPEN--> unheld       a record reached an open gate
    FREE/GATED/DRAINING --GATE_CLOSED--> BLOCKED    a record reached a closed gate
    FREE/GATED/DRAINING --UNAVAILABLE--> BLOCKED    ZooKeeper session away at a record
    BLOCKED             --RECHECK_OPEN--> unheld    a re-check found the gate open
    FREE/GATED          --STASHED--> DRAINING       a batch could not be delivered
    DRAINING/BLOCKED    --STASHED--> (same)         more records join the stash
    DRAINING            --STASH_DELIVERED--> open   the stash is empty again
    FREE/GATED/DRAINING --LAYOUT_LOST--> (same)     limit -1: every record is checked
    FREE/GATED/DRAINING --LAYOUT_BACK--> unheld     the layout is readable again
    any                 --SOUGHT--> open            the application sought: stash dropped

Every other (state, event) pair is a :class:`~coordinator.kernel.errors.StateTransitionError`.
A revoked, lost or unassigned partition's gate is simply dropped.

The announcement
----------------

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

Any other (state, event) pair is a :class:`~coordinator.kernel.errors.StateTransitionError`.
"""

from __future__ import annotations

import enum
import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from coordinator.kernel.errors import StateTransitionError
from linear_hash.gating import Wait

__all__ = [
    "ANNOUNCE_TRANSITIONS",
    "HOLD_ALL",
    "NO_LIMIT",
    "PAUSED",
    "TRANSITIONS",
    "AnnounceEvent",
    "AnnounceState",
    "Announcement",
    "Change",
    "GateEvent",
    "GateState",
    "GateStatus",
    "PartPauses",
    "PartState",
    "PartitionGate",
    "PauseOwner",
]


class PauseOwner(enum.Enum):
    """Who wants a partition paused in librdkafka."""

    GATE = "gate"
    """A held gate (``BLOCKED``/``DRAINING``) whose partition's log reaches far past it."""
    APPLICATION = "application"
    """The application's ``pause()``, until its ``resume()``."""


@dataclass(slots=True)
class PartPauses:
    """One partition's pause wishes, and what librdkafka was last told.

    Attributes:
        wishes: The owners that want it paused; paused while not empty.
        applied: librdkafka has it paused (written only by the shell's ``PauseArbiter``).
    """

    wishes: set[PauseOwner] = field(default_factory=set)
    applied: bool = False


NO_LIMIT = math.inf
"""The limit of a partition with no gate ahead."""

HOLD_ALL = -1.0
"""A limit below every offset: every record takes the checked path."""


class GateState(enum.Enum):
    """The gate state of one assigned partition (see the module doc)."""

    FREE = "free"
    GATED = "gated"
    BLOCKED = "blocked"
    DRAINING = "draining"


class GateEvent(enum.Enum):
    """What happened to a partition's gate (see the module doc)."""

    HISTORY = "history"
    GATE_OPEN = "gate open"
    GATE_CLOSED = "gate closed"
    UNAVAILABLE = "layout unavailable"
    RECHECK_OPEN = "gate opened"
    STASHED = "stashed"
    STASH_DELIVERED = "stash delivered"
    LAYOUT_LOST = "layout lost"
    LAYOUT_BACK = "layout available"
    SOUGHT = "sought"


@dataclass(frozen=True, slots=True)
class GateStatus:
    """What ``OrderedConsumer.gate_status`` reports for one assigned partition.

    Attributes:
        topic: The topic.
        partition: The partition.
        state: Its :class:`GateState`.
        limit: The lowest boundary of a gate not known to be open (``None``: none).
        held: The offset it is paused at while ``BLOCKED``.
        waits: What the gate waits for (progress of other partitions, pending epochs).
    """

    topic: str
    partition: int
    state: GateState
    limit: int | None
    held: int | None
    waits: tuple[Wait, ...] = ()


PAUSED = frozenset({GateState.BLOCKED, GateState.DRAINING})
"""The held states: entering one asks for librdkafka's pause (see the module doc)."""

_F, _G, _B, _D = GateState.FREE, GateState.GATED, GateState.BLOCKED, GateState.DRAINING
_OPEN = frozenset({_F, _G})
_UNHELD = frozenset({_F, _G, _D})

TRANSITIONS: dict[tuple[GateState, GateEvent], frozenset[GateState]] = {
    **{(s, GateEvent.HISTORY): _UNHELD for s in _UNHELD},
    (_B, GateEvent.HISTORY): frozenset({_B}),
    **{(s, GateEvent.GATE_OPEN): _UNHELD for s in _UNHELD},
    **{(s, GateEvent.GATE_CLOSED): frozenset({_B}) for s in _UNHELD},
    **{(s, GateEvent.UNAVAILABLE): frozenset({_B}) for s in _UNHELD},
    (_B, GateEvent.RECHECK_OPEN): _UNHELD,
    (_F, GateEvent.STASHED): frozenset({_D}),
    (_G, GateEvent.STASHED): frozenset({_D}),
    (_D, GateEvent.STASHED): frozenset({_D}),
    (_B, GateEvent.STASHED): frozenset({_B}),
    (_D, GateEvent.STASH_DELIVERED): _OPEN,
    **{(s, GateEvent.LAYOUT_LOST): frozenset({s}) for s in _UNHELD},
    **{(s, GateEvent.LAYOUT_BACK): _UNHELD for s in _UNHELD},
    **{(s, GateEvent.SOUGHT): _OPEN for s in GateState},
}
"""Every allowed (state, event) pair and the states it may lead to."""


class Change(NamedTuple):
    """The result of one event.

    Attributes:
        old: The state before.
        new: The state after.
        pause: ``True``: the partition became held (a pause is asked for); ``False``:
            it is held no more (resume it if it was paused); ``None``: no change.
    """

    old: GateState
    new: GateState
    pause: bool | None


class PartitionGate:
    """Gate state, limit, held offset and stash of one partition; pure.

    Args:
        topic: The topic.
        partition: The partition.
        open_limit: The partition's next gate not known to be open (``inf``: none).

    Attributes:
        state: The :class:`GateState`; written only by ``_set_state`` (from :meth:`fire`).
        limit: Records at or past it consult the gate rule (see the module doc).
        held: The offset of the record held back while ``BLOCKED``.
        stash: Undelivered records, by offset.
        pauses: Who wants the partition paused in librdkafka (written by the
            consumer's :class:`~ordered.consumer.state.PauseArbiter`).
        reason: Why the last event happened (for logs and ``gate_status``).
    """

    __slots__ = ("held", "limit", "partition", "pauses", "reason", "stash", "state", "topic")

    def __init__(self, topic: str, partition: int, open_limit: float = NO_LIMIT) -> None:
        self.topic = topic
        self.partition = partition
        self.state = _F if open_limit == NO_LIMIT else _G
        self.limit: float = open_limit
        self.held: int | None = None
        self.stash: list[Any] = []
        self.pauses = PartPauses()
        self.reason = "assigned"

    @property
    def user_paused(self) -> bool:
        """The application paused the partition: never resumed by a gate."""
        return PauseOwner.APPLICATION in self.pauses.wishes

    @user_paused.setter
    def user_paused(self, paused: bool) -> None:
        # The wish only: OrderedConsumer.pause goes through the arbiter, which also
        # tells librdkafka.
        if paused:
            self.pauses.wishes.add(PauseOwner.APPLICATION)
        else:
            self.pauses.wishes.discard(PauseOwner.APPLICATION)

    @property
    def paused(self) -> bool:
        """Whether the gate holds the partition (its state is in :data:`PAUSED`)."""
        # Identity, not set membership: an Enum member's hash is Python code, and this
        # runs for every partition at every call.
        state = self.state
        return state is GateState.BLOCKED or state is GateState.DRAINING

    def fire(
        self,
        event: GateEvent,
        open_limit: float,
        *,
        held: int | None = None,
        cap: float | None = None,
        records: Sequence[Any] = (),
        reason: str = "",
    ) -> Change:
        """Apply ``event``: the new state, limit, held offset and stash.

        Args:
            event: What happened.
            open_limit: The partition's next gate not known to be open, from the
                topic's history (``inf``: none).
            held: ``GATE_CLOSED``/``UNAVAILABLE``: the offset of the record held back.
            cap: Lower the limit of an open state to this, so the record at ``cap``
                runs the gate crossing again (``RECHECK_OPEN``, ``STASHED``).
            records: ``STASHED``: the records to keep (merged by offset).
            reason: For the log; defaults to the event's name.

        Returns:
            The :class:`Change` (what to do with the librdkafka pause).

        Raises:
            StateTransitionError: ``event`` is not allowed in the current state.
        """
        old = self.state
        if (old, event) not in TRANSITIONS:
            raise StateTransitionError(
                f"gate of {self.topic}[{self.partition}]: event {event.name} "
                f"is not allowed in state {old.name}"
            )
        opened = _F if open_limit == NO_LIMIT else _G
        limit = open_limit
        if event in (GateEvent.GATE_CLOSED, GateEvent.UNAVAILABLE):
            if held is None:
                raise StateTransitionError(f"{event.name} needs the held offset")
            new = _B
        elif event is GateEvent.STASHED:
            self._stash(records)
            new = old if old in PAUSED else _D
            # Keep a lowered limit (a crossing still to run, the layout away).
            limit = min(self.limit, open_limit)
        elif event is GateEvent.HISTORY and old is _B:
            new, limit = _B, self.limit
        elif event is GateEvent.LAYOUT_LOST:
            new, limit = old, HOLD_ALL
        elif event is GateEvent.SOUGHT:
            self.stash = []
            new = opened
        elif event is GateEvent.STASH_DELIVERED:
            if self.stash:
                raise StateTransitionError(f"{event.name} with {len(self.stash)} records left")
            new = opened
        else:
            new = _D if self.stash else opened
        self._set_state(event, new)
        if new is _B:
            if held is not None:
                self.held = held
            self.limit = HOLD_ALL
        else:
            self.held = None
            self.limit = limit if cap is None else min(limit, cap)
        self.reason = reason or event.value
        pause: bool | None = None
        if new in PAUSED and old not in PAUSED:
            pause = True
        elif new not in PAUSED and old in PAUSED and not self.user_paused:
            pause = False
        return Change(old, new, pause)

    def _stash(self, records: Sequence[Any]) -> None:
        """Merge ``records`` into the stash by offset (later copies win)."""
        stash = self.stash
        if records:
            # Nearly always records that follow the stash, in order (what librdkafka
            # handed over next): appended, not merged, so that ``poll()`` stashing a
            # held partition's records one at a time costs each record once, not the
            # whole stash again.
            last = stash[-1].offset() if stash else -1
            ordered = True
            for m in records:
                offset = m.offset()
                if offset <= last:
                    ordered = False
                    break
                last = offset
            if ordered:
                stash.extend(records)
                return
        merged = {m.offset(): m for m in stash}
        merged.update((m.offset(), m) for m in records)
        self.stash = [merged[o] for o in sorted(merged)]

    def _set_state(self, event: GateEvent, new: GateState) -> None:
        """The only writer of :attr:`state`: ``new`` must be listed for the event."""
        allowed = TRANSITIONS.get((self.state, event), frozenset())
        if new not in allowed:
            raise StateTransitionError(
                f"gate of {self.topic}[{self.partition}]: "
                f"{self.state.name} --{event.name}--> {new.name} is not listed"
            )
        self.state = new

    def take(self, limit: int) -> list[Any]:
        """Remove and return up to ``limit`` stashed records of a ``DRAINING`` gate.

        Returns nothing while the gate is not draining or the application paused it.
        """
        if self.state is not _D or self.user_paused or not self.stash:
            return []
        out = self.stash[:limit]
        del self.stash[: len(out)]
        return out


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


_IDLE, _DUE, _TOLD = AnnounceState.IDLE, AnnounceState.DUE, AnnounceState.TOLD

ANNOUNCE_TRANSITIONS: dict[tuple[AnnounceState, AnnounceEvent], AnnounceState] = {
    (_IDLE, AnnounceEvent.REACHED): _DUE,
    (_DUE, AnnounceEvent.REACHED): _DUE,
    (_TOLD, AnnounceEvent.REACHED): _DUE,
    (_DUE, AnnounceEvent.TOLD): _TOLD,
    (_TOLD, AnnounceEvent.TOLD): _TOLD,
    (_DUE, AnnounceEvent.COMMITTED): _IDLE,
    (_TOLD, AnnounceEvent.COMMITTED): _IDLE,
    (_TOLD, AnnounceEvent.RELEASED): _IDLE,
    (_DUE, AnnounceEvent.WITHDRAWN): _IDLE,
    (_TOLD, AnnounceEvent.WITHDRAWN): _IDLE,
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
        self.state = _IDLE
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
        if self.state is _TOLD and position == self.position:
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
        if self.state is _IDLE or self.position <= first:
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


@dataclass(slots=True)
class PartState:
    """One assigned partition: its gate, its announcement, where delivery stands.

    Attributes:
        gate: The gate state machine (with the stash and the pause wishes).
        ann: The boundary announcement and the stored offset.
        start: The first offset fetched in this assignment.
        position: The last delivered offset + 1.
        assigned_upto: The highest boundary ``on_partition_key_assigned`` ran for.
        blocked_at: When the gate last became ``BLOCKED`` (``Core.clock``'s monotonic),
            for the wait.
    """

    topic: str
    partition: int
    gate: PartitionGate
    ann: Announcement = field(default_factory=Announcement)
    start: int | None = None
    position: int | None = None
    assigned_upto: int = -1
    blocked_at: float = 0.0

    @property
    def fetch_paused(self) -> bool:
        """Its gate wants librdkafka to pause it (see ``Core.fire``)."""
        return PauseOwner.GATE in self.gate.pauses.wishes

    def reach_marks(self, marks: Iterable[int], known: int) -> bool:
        """Make the announcement due if delivery reached one of the source boundaries ``marks``.

        Only a boundary this assignment delivered up to: a consumer that started past it
        has nothing of the tail to announce.

        Args:
            marks: The partition's source boundaries (where its keys moved away).
            known: The highest offset this consumer committed on it (``-1``: none).

        Returns:
            Whether an announcement became due.
        """
        position = self.position
        if position is None:
            return False
        start = self.start if self.start is not None else position
        done = max(self.ann.announced, known)
        for mark in marks:
            if done < mark <= position and start < mark:
                self.ann.reached(mark, position)
                return True
        return False
