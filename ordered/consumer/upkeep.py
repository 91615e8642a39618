"""The consumer's upkeep on the poll thread: partitions tracked, layouts kept fresh.

:class:`ConsumerUpkeep` is a part the :class:`~ordered.consumer.OrderedConsumer` holds:
it tracks assigned partitions, reloads layouts, and keeps the layout state
(:class:`~ordered.consumer.layouts.LayoutState`: ``TRUSTED`` or ``HELD``) through its
one checked writer. :meth:`ConsumerUpkeep.service` is the step at the start of every
``poll``/``consume``.

It builds the fetch and judge stages (:class:`~ordered.consumer.fetch.Fetcher`,
:class:`~ordered.consumer.judge.BatchFilter`) and hands them nothing of its own: what a
fetch check finds comes back as notes (:attr:`Fetcher.notes
<ordered.consumer.fetch.Fetcher.notes>`) that :meth:`ConsumerUpkeep.absorb` acts on.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import TopicPartition

from coordinator.client.errors import StoreError
from coordinator.client.history import SessionState
from ordered.consumer.announce import Announcer
from ordered.consumer.fetch import Fetcher
from ordered.consumer.judge import BatchFilter, GateChecker, GateDecider
from ordered.consumer.layouts import (
    LayoutState,
    check_layout_transition,
)
from ordered.consumer.partition import (
    GateEvent,
    GateState,
    PartitionGate,
    PartState,
)
from ordered.consumer.replay import Rewinds
from ordered.consumer.state import Core

__all__ = ["ConsumerUpkeep"]

_log = logging.getLogger(__name__)


class ConsumerUpkeep:
    """Partition tracking and layout upkeep, for the consumer that holds it.

    Args:
        core: The shared state (the wrapped consumer, the layouts, the partitions).
        decider: Decides the gates (for the batch filter).
        checker: Re-checks held gates.
        announcer: Runs boundary announcements.
        rewinds: Applies the replay rules.

    Attributes:
        fetcher: Batches from librdkafka, released once checked.
        filter: Judges fetched batches.
    """

    def __init__(
        self,
        core: Core,
        decider: GateDecider,
        checker: GateChecker,
        announcer: Announcer,
        rewinds: Rewinds,
    ) -> None:
        self._core = core
        self._layouts = core.layouts
        self._checker = checker
        self._announcer = announcer
        self._rewinds = rewinds
        self._layout_state = LayoutState.TRUSTED
        self.filter = BatchFilter(core, decider)
        self.fetcher = Fetcher(core.consumer, core.layouts, core.events.layout_check)

    @property
    def layout_state(self) -> LayoutState:
        """Whether the layouts are trusted (read-only; see :meth:`_set_layout_state`)."""
        return self._layout_state

    # --- per-partition bookkeeping (poll thread) ---------------------------------------

    def load(self, partitions: Iterable[TopicPartition]) -> None:
        """Load the layouts of the ``partitions``' topics (raises when one cannot be read)."""
        for topic in {tp.topic for tp in partitions}:
            self._layouts.topic(topic)

    def track(self, partitions: Iterable[TopicPartition]) -> None:
        """Start tracking the ``partitions`` not tracked yet (gates apply to them)."""
        core = self._core
        core.unquiet()
        fresh = [tp for tp in partitions if (tp.topic, tp.partition) not in core.parts]
        for tp in fresh:
            self._layouts.topic(tp.topic)
        # A new assignment may start below what the gates learned (an offset reset,
        # explicit offsets): they are decided again from the group's progress now.
        self._rewinds.forget({tp.topic for tp in fresh})
        for tp in fresh:
            key = (tp.topic, tp.partition)
            limit = core.open_limit(tp.topic, tp.partition)
            core.parts[key] = PartState(tp.topic, tp.partition, PartitionGate(*key, limit))
            core.pauses.arrived(core.parts[key])
            if self._layout_state is LayoutState.HELD and self._layouts.topics[tp.topic].ordered:
                core.fire(core.parts[key], GateEvent.LAYOUT_LOST)
        self._rewinds.positioned(fresh)
        self.filter.update_single()
        self.fetcher.assignment_changed()

    def drop(self, key: tuple[str, int]) -> None:
        """Stop tracking one partition (revoked, lost, unassigned)."""
        self._core.unquiet()
        part = self._core.parts.pop(key, None)
        if part is not None:
            self._core.dropped(part)
        self.filter.update_single()
        self.fetcher.take_partition(key)
        self.withdraw_call(key)
        if part is not None:
            self._core.pauses.left(part)

    def withdraw_call(self, key: tuple[str, int]) -> None:
        """Take ``key``'s records out of the consume() call running now (revoked, lost).

        The application never gets them: the partition's position falls back to the
        first of them, its announcement with it (:meth:`Announcement.withdraw
        <ordered.consumer.partition.Announcement.withdraw>`), and their offsets,
        stored only when the call returns, are never stored.
        """
        core = self._core
        if core.call_stores is None:
            return
        core.call_stores.pop(key, None)
        first = self.fetcher.withdraw(key)
        part = core.parts.get(key)
        if first is None or part is None:
            return
        if part.position is None or part.position > first:
            part.position = first
        part.ann.withdraw(first)

    def announce_revoked(self, only: set[tuple[str, int]]) -> list[Any]:
        """The due announcements of partitions being revoked, without the call's records.

        librdkafka revokes inside a call, which may hold records of those partitions
        that the application will never get: they are taken out first, so the boundary
        commit covers only what it was given.
        """
        for key in only:
            self.withdraw_call(key)
        return self._announcer.run(only=only)

    def unstash(self) -> bool:
        """Hand the stashes of open gates back to the fetcher's ready records.

        A ``DRAINING`` gate whose first stashed record lies below its limit (the
        crossing at the held record ran) has its whole stash put before the ready
        records, and is open again: the stash is then judged in batches with them, not
        one call per record (``poll()`` took about 10 us per record that way). Those
        records were taken from librdkafka and not delivered, as the ready ones are.
        A stash whose crossing is still to run goes through :meth:`take_stash`.
        """
        core = self._core
        if not core.draining:
            return False  # nearly always
        moved: list[Any] = []
        for key in list(core.draining):
            part = core.parts.get(key)
            if part is None:
                continue
            gate = part.gate
            stash = gate.stash
            if gate.state is not GateState.DRAINING or gate.user_paused or not stash:
                continue
            if stash[0].offset() >= gate.limit:
                continue
            moved += gate.take(len(stash))
            core.fire(part, GateEvent.STASH_DELIVERED)
        if moved:
            self.fetcher.unshift(moved)
        return bool(moved)

    def take_stash(self, limit: int) -> list[Any]:
        """Stashed records of partitions whose gate is open, oldest first, up to ``limit``."""
        if not self._core.draining:
            return []  # nearly always: no gate is handing out a stash
        out: list[Any] = []
        for part in self._core.parts.values():
            if len(out) >= limit:
                break
            out += part.gate.take(limit - len(out))
        return out

    # --- layouts ------------------------------------------------------------------------

    def absorb(self) -> None:
        """Act on what the fetch stage's checks found, in the order they answered.

        A check read new histories (the partitions are relimited), failed (the layouts
        are held), or found the group's progress moved back (the replay rules apply).
        Run after every fetch, before its records are judged, and by the service step.
        """
        fetcher = self.fetcher
        notes = fetcher.notes
        if not notes:
            return
        fetcher.notes = []
        for note in notes:
            if note.reloaded is None:
                self.apply_stale()
            elif note.reloaded:
                self.filter.relimit(note.reloaded)
            if note.rewound:
                self._rewinds.forget(note.rewound)

    def apply_stale(self) -> None:
        """The layouts cannot be trusted: hold every record of ordered topics from now."""
        if self._layout_state is LayoutState.HELD:
            return
        self._set_layout_state(LayoutState.HELD)
        core = self._core
        for part in core.parts.values():
            view = self._layouts.topics.get(part.topic)
            if view is not None and view.ordered and part.gate.state is not GateState.BLOCKED:
                core.fire(part, GateEvent.LAYOUT_LOST)
        self.filter.update_single()

    def announcing(self) -> bool:
        """Whether a boundary announcement is due (delivery reached a source's boundary)."""
        return self._announcer.due()

    def service(self) -> None:
        """The step at the start of every poll/consume: layouts, announcements, gates."""
        self.absorb()
        layouts = self._layouts
        if not layouts.usable:
            self.apply_stale()
        if self._layout_state is LayoutState.HELD:
            if layouts.watcher.state is SessionState.CONNECTED:
                views = layouts.recover()
                if views is not None:
                    self._set_layout_state(LayoutState.TRUSTED)
                    self.filter.relimit(views)
                    for part in self._core.parts.values():
                        if part.gate.state is not GateState.BLOCKED:
                            self._core.fire(part, GateEvent.LAYOUT_BACK)
                    self.filter.update_single()
                    self._core.check_gates_at(0.0)
        else:
            try:
                views = layouts.reload_dirty()
            except StoreError as exc:
                _log.warning("layout reload failed (held until it succeeds): %s", exc)
                self.apply_stale()
            else:
                if views:
                    self.filter.relimit(views)
        if self._announcer.due():
            self._announcer.run()
        self._rewinds.service()
        self._checker.service()
        self._core.quiet_until = self._quiet_deadline()

    def _quiet_deadline(self) -> float:
        """Until when the step will have nothing to do, unless a halt or ``unquiet`` comes.

        What gives the step work: on kazoo's and the position service's threads (a
        session change, a watched topic changed, a progress notice), each of which halts
        the fast path (the caller compares halts); on a clock (the held gates'
        re-check, a rewind's commit read), bounded here; on the poll
        thread, anything that changes a gate (``Core.fire``), re-schedules its re-check,
        schedules an announcement, tracks or drops a partition, or moves the layout
        state, each of which calls ``Core.unquiet``. Not quiet at all while something
        is pending now: held layouts, a topic to read again, an announcement due, a
        stash being handed out.
        """
        layouts = self._layouts
        if self._layout_state is not LayoutState.TRUSTED or not layouts.usable:
            return 0.0
        if layouts.watcher.marked or self._core.draining or self._announcer.due():
            return 0.0
        return min(self._checker.quiet_until(), self._rewinds.quiet_until())

    def slice(self, deadline: float | None) -> float:
        """How long the next inner poll may wait (short while gates or layouts need care)."""
        return self._checker.slice(deadline, self._layout_state is LayoutState.HELD)

    def _set_layout_state(self, new: LayoutState) -> None:
        """The one writer of the layout state (checked against its transition table)."""
        check_layout_transition(self._layout_state, new)
        self._core.unquiet()
        self._layout_state = new
