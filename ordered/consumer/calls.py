"""The poll thread: the call path of ``poll()`` and ``consume()``, and the upkeep every
slow call starts with.

Each call runs the stages in one loop (:class:`CallPath`): the service step
(:meth:`ConsumerUpkeep.service`), the fetch stage (:mod:`ordered.consumer.fetch`: records
from librdkafka, released once checked), what its checks found
(:meth:`ConsumerUpkeep.absorb`), the judge stage (:mod:`ordered.consumer.judge`), and
delivery, with the stashes of gates that opened handed back first
(:meth:`ConsumerUpkeep.unstash`). A partition's state is :mod:`ordered.consumer.partition`'s,
changed through the shell's one applier (``Core.fire``, :mod:`ordered.consumer.state`).

The call path
-------------

A judged batch (:meth:`BatchFilter.judge`: no record of it can reach a gate, fail the
sampled audit, or take its partition to a source's boundary) is *served*: ``poll()``
pops the next record off :attr:`CallPath.left` (the batch reversed), ``consume(n)``
takes the next ``n`` when the batch still holds ``n`` (else the slow call fills the
batch, as confluent's ``consume`` does); nothing else runs per call. What delivery
changes (positions, the offsets stored for the next commit, the delivered count) is
recorded for the records handed out so far when the fast path hands over, or when
the last record of the batch is handed out: once per batch.

A ``consume(n)`` of :data:`POLL_BATCH` records or more is not served: in the steady state
its batch is judged as librdkafka returns it, gates and coverage in one compiled pass
(:meth:`Fetcher.fetch <ordered.consumer.fetch.Fetcher.fetch>` with ``judge``), and
delivered at once; librdkafka's list is returned as it is when it fills the call. A
batch that fails that judgement takes the usual way (its check, the ready queue, the
judgement record by record where need be).

Every slow call starts with the service step (layouts, announcements, re-checks, replays)
unless it is *quiet*: the step itself says until when it will have nothing
to do (``Core.quiet_until``: the next re-check, a rewind's commit read), and no halt
came since it ran. Whatever may give it work on the poll thread ends the quiet
(``Core.unquiet``: a gate event, a re-check scheduled, an announcement scheduled, a
partition tracked or dropped, the layout state moved, and :meth:`CallPath.hand_over`,
which the wrapper calls before any other call); the rest comes from other threads, which
halt.

The fast path hands over at one point, :meth:`CallPath.hand_over` (its records handed
out recorded, the rest put back among the checked records, to be judged again), and
every slow call starts there. It is made to hand over:

* by the slow path's own judgement: a batch with a record at a gate (or an epoch
  boundary inside the audit's sample, or a source's boundary) is not served;
* at once, from kazoo's thread (:meth:`CallPath.halt`): a watched topic changed (a new
  epoch), the ZooKeeper session changed state, or the position service noticed a
  commit a held gate waits on (its re-check slot);
* at once, on the poll thread: a seek, a pause or resume, an assignment change, a
  commit, ``position()``, ``close()`` (the wrapper calls :meth:`hand_over` first). A
  rebalance (assignment, revocation, loss) runs inside librdkafka, which only the slow
  path calls, after its hand-over.

librdkafka's auto-commit (its own thread) commits the offsets stored so far: while a
batch is served they lag the records handed out by at most that batch (a commit lower,
never higher, than a consumer that stores per record).

The upkeep
----------

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
import time
from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import TopicPartition

from coordinator.kernel.errors import StoreError
from coordinator.kernel.history import SessionState
from ordered.consumer.announce import Announcer
from ordered.consumer.fetch import Fetcher
from ordered.consumer.judge import BatchFilter, GateChecker, GateDecider
from ordered.consumer.layouts import LayoutState, check_layout_transition
from ordered.consumer.partition import GateEvent, GateState, PartitionGate, PartState
from ordered.consumer.replay import Rewinds
from ordered.consumer.scan import SPLIT, split_batch
from ordered.consumer.state import Core

__all__ = ["POLL_BATCH", "CallPath", "ConsumerUpkeep"]

_log = logging.getLogger(__name__)

POLL_BATCH = 500
"""Records a call takes from librdkafka at once when it needs fewer: one judgement serves them."""

_EMPTY: list[Any] = []  # never appended to: what `left` is while the fast path is off


class CallPath:
    """``poll()`` and ``consume()`` behind the wrapper's fast path.

    Args:
        core: The shared state.
        upkeep: The upkeep (service step, fetcher, filter).
        check_open: Raises ``RuntimeError`` when the consumer is closed.

    Attributes:
        left: The served batch's records not handed out yet, last first (the wrapper's
            ``poll`` pops it); an empty list while the fast path is off.
    """

    def __init__(self, core: Core, upkeep: ConsumerUpkeep, check_open: Callable[[], None]) -> None:
        self._core = core
        self._upkeep = upkeep
        self._filter = upkeep.filter
        self._fetcher = upkeep.fetcher
        self._check_open = check_open
        self.left: list[Any] = _EMPTY
        self._batch: list[Any] = []  # the served batch
        self._stack: list[Any] = _EMPTY  # its records not handed out (what `left` was)
        self._done = 0  # records of it whose delivery is recorded
        self._moved = 0  # the fetcher's partitions taken away when it was served
        self._topic = ""
        self._last: dict[tuple[str, int], int] = {}  # the served batch's last offsets
        self._halts = 0
        self._quiet_halts = -1  # the halts when the service step last ran
        # The checked records failed the judgement: judged record by record until
        # they are all gone (judging what is left again at every call cost O(batch)).
        self._rejected = False
        self._failed: Exception | None = None  # raised by the next consume() (see there)

    # --- the hand-over ----------------------------------------------------------------

    def halt(self) -> None:
        """Make the next call take the slow path (any thread; only flags are set)."""
        self._halts += 1
        self.left = _EMPTY

    def account(self) -> None:
        """Record the delivery of the served records handed out since the last time."""
        stack = self._stack
        upto = len(self._batch) - len(stack)
        if upto > self._done:
            if upto == len(self._batch) and not self._done:
                # All of it (nearly always): its last offsets are the judged ones.
                self._done = upto
                self._filter.deliver_judged(self._last, upto)
                return
            records = self._batch[self._done : upto]
            self._done = upto
            self._filter.deliver_served(records, self._topic)

    def hand_over(self) -> None:
        """The one point where the fast path ends: account, and unserve what is left.

        The wrapper calls it before any other call (a seek, a commit...): the service
        step runs at the next ``poll``/``consume`` too (``Core.unquiet``).
        """
        self._core.unquiet()
        self._end_served()

    def _end_served(self) -> None:
        """:meth:`hand_over`'s account and unserve, at the start of a slow call."""
        self.left = _EMPTY
        if not self._batch:
            return
        self.account()
        rest = self._stack[::-1]
        self._stack = _EMPTY
        self._batch = []
        self._done = 0
        if rest and self._fetcher.moved != self._moved:
            # A partition revoked while the batch was served (only a consume() fill
            # calls librdkafka then): its records are not ours to hand out.
            parts = self._core.parts
            rest = [m for m in rest if (m.topic(), m.partition()) in parts]
        if rest:
            self._fetcher.ready.push_front(rest)

    def _serve(self, halts: int) -> list[Any] | None:
        """Serve the checked records (up to :data:`POLL_BATCH`) if they pass the judgement."""
        topic = self._filter.single
        fetcher = self._fetcher
        if topic is None or not fetcher.ready or self._rejected:
            return None
        batch = fetcher.take(POLL_BATCH)
        flt = self._filter
        last = flt.judge(batch, topic, fetcher.taken_last)
        if last is None:
            # Records of a held partition refuse the whole batch: they join their
            # stash, and the rest is judged without them (the checked path would
            # deliver those one call at a time).
            held, free = self._split_held(batch, topic)
            if held:
                flt.hold_grouped(held)
                batch = free
                if not batch:
                    return None
                last = flt.judge(batch, topic, None)
        if last is None or flt.crosses_marks(last):
            fetcher.ready.push_front(batch)
            self._rejected = True
            return None
        self._batch = batch
        self._done = 0
        self._moved = fetcher.moved
        self._topic = topic
        self._last = last
        stack = self._stack = batch[::-1]
        # A halt since this call's service step (kazoo's thread): served by this call
        # only, the next one hands over.
        self.left = stack if halts == self._halts else _EMPTY
        return stack

    def _split_held(
        self, batch: list[Any], topic: str
    ) -> tuple[dict[tuple[str, int], list[Any]], list[Any]]:
        """``batch`` (of ``topic`` only) as each held partition's records, and the rest.

        In one compiled pass when built (:data:`~ordered.consumer.scan.SPLIT`): a held
        partition's backlog (a new partition's, while its sources drain) comes through
        here whole, ahead of the records the application gets first.
        """
        by_partition: dict[int, list[Any]] = {
            key[1]: []
            for key, part in self._core.parts.items()
            if part.gate.paused and key[0] == topic
        }
        if not by_partition:
            return {}, batch
        free = SPLIT(batch, by_partition) if SPLIT is not None else None
        if free is None:
            free = split_batch(batch, by_partition)
        held = {(topic, p): records for p, records in by_partition.items() if records}
        return held, free

    def _service(self, halts: int) -> None:
        """The service step, unless it is quiet (``Core.quiet_until``) and no halt came."""
        if halts != self._quiet_halts or self._core.clock.monotonic() >= self._core.quiet_until:
            self._upkeep.service()
            self._quiet_halts = halts

    # --- the slow calls ---------------------------------------------------------------

    def poll(self, timeout: float | None) -> Any:
        """``poll()`` when the fast path has nothing to hand out (see the wrapper)."""
        self._check_open()
        failed = self._failed
        if failed is not None:
            self._failed = None
            raise failed
        self._end_served()
        out: list[Any] = []
        self._run(out, 1, _deadline(timeout), single=True)
        return out[0] if out else None

    def consume(self, num_messages: int, timeout: float) -> list[Any]:
        """``consume()`` when the fast path cannot fill the call (see the wrapper).

        As confluent's: returns once ``num_messages`` records are deliverable or the
        timeout ends, whichever comes first (records held at a gate are not
        deliverable), or when the records it holds reach a source's boundary (the
        announcement runs at the next call, after the application has them). The wait
        is in slices (:meth:`ConsumerUpkeep.slice`), each starting with the service
        step, so a hand-over (a halt from kazoo's thread, a re-check slot) is taken
        within a slice, and what it makes deliverable joins the batch.
        """
        self._check_open()
        if not 0 <= num_messages <= 1_000_000:
            raise ValueError("num_messages must be between 0 and 1000000 (1M)")
        if num_messages == 0:
            return []  # as confluent: at once, whatever the timeout
        failed = self._failed
        if failed is not None:
            self._failed = None
            raise failed
        self._end_served()
        deadline = _deadline(timeout)
        out: list[Any] = []
        # A partition revoked during the fill (librdkafka runs the rebalance callbacks)
        # takes its records out of `out` (Fetcher.withdraw): the application never
        # gets them.
        self._fetcher.filling = out
        # Until the call returns, the records it holds are not the application's: their
        # offsets are stored on return, and no announcement of their partitions runs
        # (Core.call_stores; a revocation takes them out, Fetcher.withdraw).
        self._core.call_stores = {}
        try:
            whole = self._run(out, num_messages, deadline, single=False)
            if whole is not None:
                return whole
        except Exception as exc:
            if not out:
                raise
            # Records of this call are delivered (positions, stored offsets): they are
            # returned, and the error is raised by the next call, as if it came there.
            self._failed = exc
            self.left = _EMPTY  # the next call is a slow one: it raises
        finally:
            self._fetcher.filling = None
            self._filter.store_call()
        return out

    def _run(
        self, out: list[Any], want: int, deadline: float | None, single: bool
    ) -> list[Any] | None:
        """The one loop of ``poll()`` and ``consume()``: append deliverable records to ``out``.

        Each round runs the stages in order: the service step, the stashes of gates
        that opened, the fetch stage (and what its checks found), then the judge stage
        on the checked records, until ``out`` holds ``want`` records or time is up.

        Args:
            out: The call's records so far.
            want: How many the call returns at most (1 for ``poll()``).
            deadline: When the call ends (``time.monotonic()``; ``None``: never).
            single: ``poll()``: fetch as it does (wait for one record, then take what
                is there), and leave a served batch's records to the wrapper's fast path
                (their delivery is recorded once the batch is out).

        Returns:
            The list librdkafka returned, when it is the whole call (judged at once, it
            fills the call and ``out`` is empty): returned as it is, as a plain
            consumer's is, not copied into ``out``. ``None``: ``out`` is the call's.
        """
        upkeep = self._upkeep
        flt = self._filter
        fetcher = self._fetcher
        small = want < POLL_BATCH
        while True:
            need = want - len(out)
            halts = self._halts
            self._service(halts)
            if out and upkeep.announcing():
                # Records of this call reached a source's boundary (delivered by the last
                # round, or a history the service step just read puts one below them):
                # its announcement (maybe_revoked, the boundary's commit) runs at the
                # next call, once the application has them, never before (KIP-253's
                # order), and no librdkafka call (a revocation) comes in between.
                return None
            if upkeep.unstash():
                self._rejected = False  # records to judge at the front
            stashed = upkeep.take_stash(need)
            if stashed:
                out += flt.filter(stashed, from_stash=True)
                if len(out) >= want:
                    return None
                continue
            if not fetcher.ready:
                self._rejected = False
                wait = upkeep.slice(deadline) if fetcher.waits else 0.0
                if single:
                    judged = fetcher.fetch(POLL_BATCH, wait, single=True)
                else:
                    # The steady state (no check, gate or audit in the way): a batch of
                    # the call's own size is judged as it comes, and delivered without
                    # queueing.
                    judge = None if small else flt.judge_covered
                    ahead = POLL_BATCH if small else want
                    judged = fetcher.fetch(need, wait, single=False, ahead=ahead, judge=judge)
                if fetcher.notes:
                    upkeep.absorb()  # what its check found, before its records are judged
                if judged is not None:
                    batch, last = judged
                    flt.deliver_judged(last, len(batch))
                    if not out and len(batch) >= want:
                        return batch
                    out += batch
                    if len(out) >= want or _expired(deadline):
                        return None
                    continue
            if small:
                served = self._serve(halts)
                if served is not None:
                    out += take(served, need)
                    if not single or not served:
                        # Recorded now, before any other librdkafka call: a revocation
                        # in there takes them out of the call with their partition's
                        # position. poll() leaves the rest to the fast path, recorded
                        # once the batch is out.
                        self.account()
                    if len(out) >= want:
                        return None
                    continue
            held = fetcher.take_held(self._core.parts)
            if held:
                # A run of records that their gates hold: stashed at once, not judged
                # one call each.
                flt.hold(held)
                continue
            batch = fetcher.take(need)
            if batch:
                out += flt.filter(batch, last=fetcher.taken_last)
                if len(out) >= want:
                    return None
            if _expired(deadline):
                return None


def take(stack: list[Any], num: int) -> list[Any]:
    """The next ``num`` records of a served stack (last first), oldest first."""
    if num >= len(stack):
        out = stack[::-1]
        stack.clear()
        return out
    out = stack[: -num - 1 : -1]
    del stack[-num:]
    return out


def _deadline(timeout: float | None) -> float | None:
    if timeout is None or timeout < 0:
        return None
    return time.monotonic() + timeout


def _expired(deadline: float | None) -> bool:
    return deadline is not None and time.monotonic() >= deadline


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
