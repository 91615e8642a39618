"""The judge stage: which fetched records are delivered, which wait at a gate, and every
gate decision behind that.

Records come here from the fetch stage (:mod:`ordered.consumer.fetch`), checked against
the layouts; what passes goes to the caller to deliver (:mod:`ordered.consumer.calls`).
Three parts, one per question:

* :class:`BatchFilter`: which records of a batch may be given now (the fast and checked
  paths, stashes, delivery's bookkeeping, relimiting the partitions for a new history);
* :class:`GateDecider`: the gate rule's answer for a record at its partition's limit,
  over one :class:`CommittedView` of the group's progress;
* :class:`GateChecker`: when held gates are decided again, and what the consumer
  declares it waits on.

The batch filter
----------------

Two paths judge a batch. The *fast* path takes the whole batch when one topic is
assigned and each partition's last record in it is below the partition's limit
(within a batch a partition's offsets grow, so every record is); its audits look at
every ``ordered.audit.every``-th record and only confirm the common case. Anything else
goes to the *checked* path, which judges record by record: gates (asked of the
:class:`~ordered.consumer.judge.GateDecider`), stashes, tombstone copies of compacted
topics, and the full audit (:mod:`~ordered.consumer.audit`).

The gate decision
-----------------

Every gate decision of the consumer goes through :class:`GateDecider`, whichever path
asks: a fetched record at its partition's limit (:meth:`GateDecider.reach`, the fetch
path) or the re-check of held partitions (:meth:`GateDecider.recheck`, scheduled by
:mod:`~ordered.consumer.judge`). Both run the one sequence of
:meth:`GateDecider.decide`: the partitions the rule needs
(:meth:`~linear_hash.gating.GateEvaluator.required_partitions`) read into ONE
:class:`CommittedView` (:meth:`GateDecider.view`), then
:meth:`~linear_hash.gating.GateEvaluator.may_deliver` for each ask, in order.
``gate_status`` reads the same view to list what a held gate waits on
(:meth:`GateDecider.waits_of`).

The view is shaped in one place, :class:`CommittedView`: the group's committed offsets
read from Kafka (one request per decision), raised by the commits this consumer made
itself (Kafka may not show them yet), then lowered to this consumer's own positions
(:func:`cap_to_positions`, rule 2 of ``docs/consumer.md`` "Replays"). Only Kafka's
committed offsets open a gate: when Kafka does not answer, nothing opens.

Re-checks
---------

A closed gate holds its partition ``BLOCKED``. :meth:`GateChecker.recheck_blocked`
asks the :class:`~ordered.consumer.judge.GateDecider` again, once per topic for all
its held partitions, every ``ordered.gate.poll.interval.ms``, or at once when the
position service (:mod:`coordinator.kernel.positions`) says that something a gate waits on
was committed. Only Kafka's committed offsets open a gate: the service only makes the
re-check prompt.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from confluent_kafka import KafkaException, Message, TopicPartition

from coordinator.kernel.errors import StoreError
from ordered.compaction import is_tombstone_copy
from ordered.consumer.audit import KEY_MEMO, RecordAudit, audit_span
from ordered.consumer.partition import AnnounceState, GateEvent, GateState
from ordered.consumer.scan import SCAN, SCAN_MOST

if TYPE_CHECKING:
    from coordinator.kernel.positions import PositionService, Progress
    from linear_hash.gating import GateEvaluator, Wait
    from ordered.consumer.layouts import TopicView
    from ordered.consumer.partition import PartState
    from ordered.consumer.probe import LogStartProbe
    from ordered.consumer.state import Core

__all__ = [
    "KEY_MEMO",
    "NOTIFY_SLICE",
    "BatchFilter",
    "CommittedView",
    "GateChecker",
    "GateDecider",
    "Verdict",
    "audit_span",
    "cap_to_positions",
]

_log = logging.getLogger(__name__)

# Unbound, so ``map`` calls it per record without a Python frame.
_PARTITION: Callable[[Any], Any] = Message.partition
_OFFSET: Callable[[Any], Any] = Message.offset

IDLE = AnnounceState.IDLE

NOTIFY_SLICE = 0.01
"""Longest inner poll while a gate waits on the position service (seconds)."""


def cap_to_positions(core: Core, topic: str, committed: dict[int, int]) -> None:
    """Rule 2: lower ``committed`` (partition -> offset) to this consumer's own positions.

    The group's progress on a partition this consumer owns is at most its own position:
    an offset committed before a rewind is not progress of the replay.
    """
    if not core.replay_guard:
        return
    for partition, offset in committed.items():
        part = core.parts.get((topic, partition))
        if part is None:
            continue
        own = part.position if part.position is not None else part.start
        if own is not None and own < offset:
            committed[partition] = own


class CommittedView:
    """Committed offsets (one request per decision) and log starts (lazily) from Kafka.

    The only place the group's progress is shaped for the gate rule (see the module
    doc). Satisfies :class:`linear_hash.gating.OffsetView`.

    Raises:
        KafkaException: The committed offsets could not be read.
    """

    def __init__(
        self, core: Core, probe: LogStartProbe, topic: str, partitions: Iterable[int]
    ) -> None:
        self._probe = probe
        self._topic = topic
        self._committed: dict[int, int] = {}
        self._starts: dict[int, int] = {}
        wanted = sorted(set(partitions))
        if wanted:
            got = core.consumer.committed(
                [TopicPartition(topic, p) for p in wanted], timeout=core.request_timeout
            )
            for tp in got:
                if tp.error is None and tp.offset >= 0:
                    self._committed[tp.partition] = tp.offset
        for (t, p), offset in core.known_commits.items():
            if t == topic and offset > self._committed.get(p, -1):
                self._committed[p] = offset
        cap_to_positions(core, topic, self._committed)

    def committed(self, partition: int) -> int | None:
        """The group's committed offset of ``partition`` (``None``: none)."""
        return self._committed.get(partition)

    def log_start(self, partition: int) -> int:
        """The log start offset of ``partition``."""
        if partition not in self._starts:
            self._starts[partition] = self._probe.gate_log_start(self._topic, partition)
        return self._starts[partition]


class Verdict(NamedTuple):
    """The gate rule's answer for one ask of :meth:`GateDecider.decide`.

    Attributes:
        part: The partition asked about.
        offset: The offset asked about.
        open: Whether the record at ``offset`` may be delivered.
        progress: The view it was decided on (``None``: Kafka did not answer, closed).
    """

    part: PartState
    offset: int
    open: bool
    progress: CommittedView | None


class GateDecider:
    """Decides gates from the group's committed offsets, for every path that asks.

    Args:
        core: The shared state (partitions, layouts, events, known commits).
        probe: The log-start probe (the view's log starts).
        prompt: A position service is running: a gate found closed on the fetch path
            is re-checked at once (which declares the interest), not after
            ``ordered.gate.poll.interval.ms``.
    """

    def __init__(self, core: Core, probe: LogStartProbe, prompt: bool) -> None:
        self._core = core
        self._probe = probe
        self._prompt = prompt
        self._interval = core.config.ordered.gate_poll_interval_ms / 1000.0

    def view(
        self, topic: str, gates: GateEvaluator, asks: Iterable[tuple[PartState, int]]
    ) -> CommittedView | None:
        """ONE view of every partition the rule may read to decide ``asks`` of ``topic``.

        Returns:
            The view, or ``None`` (gates stay closed) if Kafka did not answer.
        """
        needed: set[int] = set()
        for part, offset in asks:
            needed |= gates.required_partitions(part.partition, offset)
        try:
            return CommittedView(self._core, self._probe, topic, needed)
        except KafkaException as exc:
            _log.warning("cannot read committed offsets of %s (gates stay closed): %s", topic, exc)
            return None

    def decide(
        self, topic: str, gates: GateEvaluator, asks: Sequence[tuple[PartState, int]]
    ) -> Iterator[Verdict]:
        """The one decision sequence: required partitions, one view, the rule per ask.

        Lazily, in the order of ``asks``: the caller acts on one verdict (fires its
        gate event) before the next is decided, as the rule's cache of satisfied gates
        grows with each decision.
        """
        progress = self.view(topic, gates, asks)
        for part, offset in asks:
            allowed = progress is not None and gates.may_deliver(part.partition, offset, progress)
            yield Verdict(part, offset, allowed, progress)

    def reach(self, part: PartState, offset: int, crossed: list[tuple[PartState, int]]) -> bool:
        """The fetch path: a record at or past the limit arrived; open the gate or hold it.

        Args:
            part: The partition.
            offset: The record's offset.
            crossed: Gets ``(part, boundary)`` for each gate this record passes.

        Returns:
            Whether the record may be delivered.
        """
        core = self._core
        if not core.layouts.usable:
            core.fire(part, GateEvent.UNAVAILABLE, held=offset)
            core.check_gates_at(0.0)
            return False
        view = core.layouts.topics.get(part.topic)
        gates = view.gates if view is not None else None
        if gates is None:
            core.fire(part, GateEvent.GATE_OPEN, reason="not ordered")
            return True
        # Counted before Kafka is asked: a record held because Kafka did not answer
        # was judged too.
        core.events.gate_check(part.topic, part.partition)
        verdict = next(self.decide(part.topic, gates, [(part, offset)]))
        if not verdict.open:
            core.fire(part, GateEvent.GATE_CLOSED, held=offset)
            # With the position service, re-check at once: that declares the interest
            # and sets the watches that make later re-checks prompt.
            core.check_gates_at(0.0 if self._prompt else core.clock.monotonic() + self._interval)
            return False
        start = part.start if part.start is not None else offset
        for boundary, _epoch in gates.gates_of(part.partition):
            if start <= boundary <= offset and boundary > part.assigned_upto:
                crossed.append((part, boundary))
        core.fire(part, GateEvent.GATE_OPEN)
        return True

    def recheck(
        self, topic: str, gates: GateEvaluator, parts: Sequence[PartState], waits: bool
    ) -> dict[int, int] | None:
        """The re-check path: decide the held ``parts`` of ``topic`` again.

        A gate found open fires ``RECHECK_OPEN`` with the limit kept at the held record,
        so its delivery runs the crossing (and ``on_partition_key_assigned``) like any
        other record.

        Args:
            topic: The topic.
            gates: Its gate rule.
            parts: Its ``BLOCKED`` partitions.
            waits: Also collect what the gates still closed wait on.

        Returns:
            Partition -> the offset the closed gates wait for it to reach (empty
            without ``waits``), or ``None`` when Kafka did not answer (nothing decided).
        """
        core = self._core
        asks = []
        for part in parts:
            assert part.gate.held is not None
            asks.append((part, part.gate.held))
        found: dict[int, int] = {}
        for verdict in self.decide(topic, gates, asks):
            if verdict.progress is None:
                return None
            part, held = verdict.part, verdict.offset
            core.events.gate_check(topic, part.partition)
            if verdict.open:
                core.fire(part, GateEvent.RECHECK_OPEN, cap=held)
            elif waits:
                for wait in gates.waiting_on(part.partition, held, verdict.progress):
                    if wait.partition >= 0:
                        found[wait.partition] = max(found.get(wait.partition, 0), wait.offset)
        return found

    def waits_of(self, part: PartState) -> tuple[Wait, ...]:
        """What the gate of a held partition waits on (reads committed offsets)."""
        view = self._core.layouts.topics.get(part.topic)
        held = part.gate.held
        if held is None or view is None or view.gates is None:
            return ()
        gates = view.gates
        progress = self.view(part.topic, gates, [(part, held)])
        if progress is None:
            return ()
        return tuple(gates.waiting_on(part.partition, held, progress))


class BatchFilter:
    """Judges fetched batches for the consumer.

    Args:
        core: The shared state.
        decider: Decides the gates of records at their partition's limit.
    """

    def __init__(self, core: Core, decider: GateDecider) -> None:
        self._core = core
        self._decider = decider
        self.single: str | None = None  # the one assigned topic, if exactly one
        self._limits_key: tuple[str, int, int] | None = None
        self._limits_cached: dict[int, Any] = {}
        self.audit = RecordAudit(core)

    def relimit(self, views: Iterable[TopicView]) -> None:
        """New histories were read: relimit their partitions, re-check held ones."""
        core = self._core
        core.unquiet()
        self.forget_spans()
        names = {view.name for view in views}
        for part in core.parts.values():
            if part.topic not in names:
                continue
            if part.gate.state is GateState.BLOCKED:
                core.check_gates_at(0.0)  # re-check it at once against the new history
            core.fire(part, GateEvent.HISTORY)
            if core.layouts.topics[part.topic].ordered:
                self.check_marks(part)

    def reload_topic(self, topic: str) -> None:
        """Read ``topic``'s history again now (a failure is logged; the next check retries)."""
        try:
            self.relimit(self._core.layouts.reload([topic]))
        except StoreError as exc:
            _log.warning("layout reload of %s failed: %s", topic, exc)

    def check_marks(self, part: PartState) -> None:
        """Make ``part``'s announcement due if its position reached a source's boundary."""
        core = self._core
        view = core.layouts.topics.get(part.topic)
        if view is None or view.gates is None:
            return
        known = core.known_commits.get((part.topic, part.partition), -1)
        if part.reach_marks(view.gates.source_marks(part.partition), known):
            core.unquiet()

    def forget_spans(self) -> None:
        """Drop the fast path's caches (a new history)."""
        self.audit.forget_spans()

    def update_single(self) -> None:
        """Remember the one assigned topic, if there is exactly one (the fast path)."""
        topics = {topic for topic, _partition in self._core.parts}
        usable = self._core.layouts.usable
        single = topics.pop() if len(topics) == 1 and usable else None
        if single != self.single:
            self.audit.forget_spans()
        self.single = single

    def filter(
        self,
        batch: Sequence[Any],
        from_stash: bool = False,
        last: dict[tuple[str, int], int] | None = None,
    ) -> list[Any]:
        """Return the deliverable part of ``batch``; stash the rest at closed gates.

        Args:
            batch: Messages from librdkafka, or from a stash (``from_stash``).
            from_stash: The batch comes from stashes of partitions whose gate opened.
            last: Each partition's last offset in ``batch`` when the fetch knows it
                (:attr:`~ordered.consumer.fetch.Fetcher.taken_last`), else ``None``.
        """
        settings = self._core.config.ordered
        audit = settings.key_audit or settings.header_audit
        if not from_stash and self.single is not None:
            fast = self._filter_fast(batch, self.single, last)
            if fast is not None:
                return fast
        return self._filter_checked(batch, audit, from_stash)

    def _filter_fast(
        self,
        batch: Sequence[Any],
        topic: str,
        known: dict[tuple[str, int], int] | None,
    ) -> list[Any] | None:
        """The whole batch, delivered, when :meth:`judge` passes it; else ``None``."""
        last = self.judge(batch, topic, known)
        if last is None:
            return None
        self.delivered(last)
        self._core.events.records_delivered(len(batch))
        # take() hands over a list of its own: it is the caller's already.
        return batch if type(batch) is list else list(batch)

    def judge(
        self,
        batch: Sequence[Any],
        topic: str,
        known: dict[tuple[str, int], int] | None,
    ) -> dict[tuple[str, int], int] | None:
        """Each partition's last offset when nothing in ``batch`` can reach a gate or fail an audit.

        ``None`` otherwise (the checked path judges it). Only each partition's last
        offset is judged (within a batch a partition's offsets grow). Given by the fetch
        (``known``), no record is looked at but the audit's sample; else confluent's
        ``Message`` methods are mapped over the batch, so only C runs per record (a
        Python loop per record cost ~10% of a plain consumer's time at
        ``consume(500)``). ``Message.topic()`` builds a new string per call, so it is
        not called here. Nothing is delivered: the first offset of a partition's
        assignment is noted (where delivery starts), nothing else changes.
        """
        core = self._core
        settings = core.config.ordered
        view = core.layouts.topics[topic]
        if view.compacted or not batch:
            return None  # every record is looked at: tombstone copies are dropped
        scanned = self._scan(batch, topic, view)
        if scanned is not None:
            return scanned
        if known is None or any(key[0] != topic for key in known):
            last = self._last_offsets(batch, topic)
            if last is None:
                return None
        else:
            last = known
        if view.ordered and (settings.header_audit or settings.key_audit):
            every = settings.audit_every
            sample = batch if every == 1 else batch[::every]
            if not self.audit.sample(view, sample):
                return None
        parts = core.parts
        for key, offset in last.items():
            part = parts.get(key)
            if part is None or offset >= part.gate.limit or part.gate.paused:
                return None
        return self._started(batch, topic, last)

    def judge_covered(
        self, batch: list[Any], covered: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], int] | None:
        """:meth:`judge` of a batch no layout check has looked at, and its coverage, in one pass.

        The compiled scan passes the whole batch only when every record also lies below
        its partition's ``covered`` offset (:attr:`LayoutTracker.covered
        <ordered.consumer.layouts.LayoutTracker.covered>`: a check that answered after
        the record was fetched), so the batch needs no check of its own either
        (:mod:`~ordered.consumer.fetch`). ``None`` for anything else: one assigned topic
        and a batch the scan takes (:data:`~ordered.consumer.scan.SCAN_MOST`) only.
        """
        topic = self.single
        if topic is None:
            return None
        view = self._core.layouts.topics[topic]
        if view.compacted:
            return None
        return self._scan(batch, topic, view, covered)

    def _scan(
        self,
        batch: Sequence[Any],
        topic: str,
        view: TopicView,
        covered: dict[tuple[str, int], int] | None = None,
    ) -> dict[tuple[str, int], int] | None:
        """:meth:`judge` by the compiled scan (:mod:`~ordered.consumer.scan`): in one C pass.

        ``None`` when it does not pass the whole batch, or the scan cannot take it (not
        built, or more than :data:`~ordered.consumer.scan.SCAN_MOST` records):
        :meth:`judge`'s own path decides then (it reads the audit's spans afresh, or hands
        the batch to the checked path). With ``covered``, each partition's limit is also
        its covered offset (see :meth:`judge_covered`). A batch that passes has its
        partitions' starts noted (:meth:`_started`).
        """
        if SCAN is None or len(batch) > SCAN_MOST:
            return None
        settings = self._core.config.ordered
        spans: dict[int, tuple[int, float]] = {}
        header: Any = None
        route: Any = None
        if view.ordered and (settings.header_audit or settings.key_audit):
            plan = self.audit.fast_plan(view)
            if plan is None:
                return None
            spans, header, route = plan
            if not settings.header_audit:
                header = None
            if not settings.key_audit:
                route = None
        limits = self._limits(topic, covered)
        scanned = SCAN(
            batch if type(batch) is list else list(batch),
            settings.audit_every,
            limits,
            spans,
            header,
            route,
        )
        if scanned is None or scanned[0] != len(batch):
            return None
        last = {(topic, partition): offset for partition, offset in scanned[1].items()}
        return self._started(batch, topic, last)

    def _limits(self, topic: str, covered: dict[tuple[str, int], int] | None) -> dict[int, Any]:
        """Each of ``topic``'s partitions' limit for the scan (the covered offset too, if given).

        With ``covered``, cached until a gate, a partition or the coverage changes
        (``Core.version``, ``LayoutTracker.covered_version``): the steady state asks the
        same at every call.
        """
        core = self._core
        key = None
        if covered is not None:
            key = (topic, core.version, core.layouts.covered_version)
            if key == self._limits_key:
                return self._limits_cached
        limits: dict[int, Any] = {}
        for tp, part in core.parts.items():
            if tp[0] == topic:
                gate = part.gate
                limit = -1 if gate.paused else gate.limit
                if covered is not None:
                    mark = covered.get(tp, -1)
                    if mark < limit:
                        limit = mark
                limits[tp[1]] = limit
        if key is not None:
            self._limits_key, self._limits_cached = key, limits
        return limits

    def _started(
        self, batch: Sequence[Any], topic: str, last: dict[tuple[str, int], int]
    ) -> dict[tuple[str, int], int]:
        """``last``, once each partition starting its assignment in ``batch`` noted its start."""
        parts = self._core.parts
        for key in last:  # nearly always every start is known: no set is built
            if parts[key].start is None:
                break
        else:
            return last
        starting = {key[1] for key in last if parts[key].start is None}
        if starting:
            # First batch of an assignment: where it starts decides which boundaries
            # this consumer crossed (callbacks), so find each partition's first record.
            for m in batch:
                partition = m.partition()
                if partition in starting and m.error() is None:
                    parts[(topic, partition)].start = m.offset()
                    starting.discard(partition)
                    if not starting:
                        break
        return last

    def crosses_marks(self, last: dict[tuple[str, int], int]) -> bool:
        """Whether delivering up to ``last`` reaches a source's boundary (an announcement).

        ``poll()`` hands a judged batch out one record at a time only when it does not:
        the announcement then runs at the call after the boundary's last record, as it
        does when records are judged one by one.
        """
        core = self._core
        for key, offset in last.items():
            gates = core.layouts.topics[key[0]].gates
            if gates is None:
                continue
            marks = gates.source_marks(key[1])
            if marks:
                position = core.parts[key].position
                low = -1 if position is None else position
                if any(low < mark <= offset + 1 for mark in marks):
                    return True
        return False

    def deliver_judged(self, last: dict[tuple[str, int], int], count: int) -> None:
        """Record the delivery of a whole judged batch of ``count`` records (its ``last``)."""
        self.delivered(last)
        self._core.events.records_delivered(count)

    def deliver_served(self, records: list[Any], topic: str) -> None:
        """Record the delivery of ``records`` (a judged batch's records handed out so far)."""
        offsets = list(map(_OFFSET, records))
        partitions = list(map(_PARTITION, records))
        if None in offsets:  # error events (no offset) among them: they move nothing
            pairs = [(p, o) for p, o in zip(partitions, offsets, strict=True) if o is not None]
        else:
            pairs = list(zip(partitions, offsets, strict=True))
        last = {(topic, p): o for p, o in dict(pairs).items()}
        if last:
            self.delivered(last)
        self._core.events.records_delivered(len(records))

    @staticmethod
    def _last_offsets(batch: Sequence[Any], topic: str) -> dict[tuple[str, int], int] | None:
        """Each partition's last offset in ``batch``; ``None`` when an event ends one."""
        try:
            partitions = list(map(_PARTITION, batch))
        except TypeError:  # not confluent's Message: the checked path judges it
            return None
        first = partitions[0]
        if partitions.count(first) == len(partitions):
            ends: dict[int, Any] = {first: batch[-1]}
        else:
            ends = dict(zip(partitions, batch, strict=True))
        last: dict[tuple[str, int], int] = {}
        for partition, m in ends.items():
            if m.error() is not None:
                return None
            last[(topic, partition)] = m.offset()
        return last

    def _filter_checked(self, batch: Sequence[Any], audit: bool, from_stash: bool) -> list[Any]:
        """Judge every record: audit, gates, stashes."""
        core = self._core
        parts = core.parts
        topics = core.layouts.topics
        reach = self._decider.reach
        check = self.audit.check
        out: list[Any] = []
        last: dict[tuple[str, int], int] = {}
        crossed: list[tuple[PartState, int]] = []
        withheld: dict[tuple[str, int], list[Any]] = {}
        try:
            for m in batch:
                if m.error() is not None:
                    out.append(m)
                    continue
                key = (m.topic(), m.partition())
                part = parts.get(key)
                offset = m.offset()
                if part is None:
                    # Not tracked (an assignment we were not told of): deliver as is.
                    out.append(m)
                    last[key] = offset
                    continue
                if part.start is None:
                    part.start = offset
                state = part.gate.state
                if (
                    key in withheld
                    or state is GateState.BLOCKED
                    or (state is GateState.DRAINING and not from_stash)
                ):
                    # Behind a held record, or fetched before the pause took effect.
                    withheld.setdefault(key, []).append(m)
                    continue
                if offset >= part.gate.limit and not reach(part, offset, crossed):
                    withheld.setdefault(key, []).append(m)
                    continue
                view = topics[key[0]]
                if m.value() is None and view.compacted and is_tombstone_copy(m):
                    # For compaction only: the key's newer value lives elsewhere. Passed
                    # over like a delivered record, so positions and commits cover it.
                    core.events.tombstone_copy(key[0], key[1], offset)
                    last[key] = offset
                    continue
                if audit and view.ordered and check(part, view, m, offset):
                    # Its epoch header is newer than this copy of the history: read it
                    # again (the view is updated in place), then audit and judge again.
                    self.reload_topic(key[0])
                    check(part, view, m, offset, newer=False)
                    if offset >= part.gate.limit and not reach(part, offset, crossed):
                        withheld.setdefault(key, []).append(m)
                        continue
                out.append(m)
                last[key] = offset
            if crossed and core.listener is not None:
                tps = [TopicPartition(p.topic, p.partition, b) for p, b in crossed]
                core.listener.on_partition_key_assigned(tps)
        except BaseException:
            # Nothing of this batch is delivered: stash it all for the next call, and
            # make the gates crossed in it run their callback again.
            caps: dict[tuple[str, int], int] = {}
            for part, boundary in crossed:
                key = (part.topic, part.partition)
                caps[key] = min(caps.get(key, boundary), boundary)
            by_key: dict[tuple[str, int], list[Any]] = {}
            for m in batch:
                if m.error() is None:
                    by_key.setdefault((m.topic(), m.partition()), []).append(m)
            for key, messages in by_key.items():
                if key in parts:
                    core.fire(parts[key], GateEvent.STASHED, records=messages, cap=caps.get(key))
            raise
        for part, boundary in crossed:
            part.assigned_upto = max(part.assigned_upto, boundary)
        self._stash_withheld(withheld)
        if from_stash:
            for part in list(parts.values()):
                if part.gate.state is GateState.DRAINING and not part.gate.stash:
                    core.fire(part, GateEvent.STASH_DELIVERED)
        if last:
            self.delivered(last)
        core.events.records_delivered(len(out))
        return out

    def hold(self, records: Sequence[Any]) -> None:
        """Stash ``records``, all of partitions whose gate holds them.

        What the checked judgement does with such records (``BLOCKED``, or
        ``DRAINING`` outside its stash), for a run of them at once
        (:meth:`Fetcher.take_held <ordered.consumer.fetch.Fetcher.take_held>`).
        """
        by_key: dict[tuple[str, int], list[Any]] = {}
        for m in records:
            by_key.setdefault((m.topic(), m.partition()), []).append(m)
        self.hold_grouped(by_key)

    def hold_grouped(self, by_key: dict[tuple[str, int], list[Any]]) -> None:
        """:meth:`hold` of records already grouped by partition (each group in fetch order)."""
        parts = self._core.parts
        for key, messages in by_key.items():
            part = parts[key]
            if part.start is None:
                part.start = messages[0].offset()
        self._stash_withheld(by_key)

    def _stash_withheld(self, withheld: dict[tuple[str, int], list[Any]]) -> None:
        """Each partition's withheld records join its stash (counted as held)."""
        core = self._core
        parts = core.parts
        for key, messages in withheld.items():
            core.events.records_held(key[0], key[1], len(messages))
            core.fire(parts[key], GateEvent.STASHED, records=messages)

    def delivered(self, last: dict[tuple[str, int], int]) -> None:
        """Record delivery up to ``last`` (offsets) and store the offsets to commit."""
        core = self._core
        parts = core.parts
        topics = core.layouts.topics
        store = []
        for key, offset in last.items():
            part = parts.get(key)
            after = offset + 1
            stored: int | None = after
            if part is not None:
                part.position = after
                view = topics[key[0]]
                gates = view.gates
                # Only a source partition has boundaries to announce (check_marks does
                # nothing else): asked here, the call is saved on every other one.
                if gates is not None and gates.has_source_marks(key[1]):
                    self.check_marks(part)
                # KIP order: no commit (auto-commit, or commit() of the stored offsets)
                # may reach a source's boundary before maybe_revoked ran, nor move
                # while the partition gives keys away in a pending epoch.
                stored = part.ann.store_for(after, key[1] in view.pending_givers)
            if stored is not None:
                store.append(TopicPartition(key[0], key[1], stored))
        held = core.call_stores
        if held is not None:
            # A consume() call holds these records until it returns: they are stored
            # then (store_call), so no commit meanwhile (auto-commit, a revocation's)
            # covers a record the application was not given.
            for key in last:
                held.setdefault(key, None)
            for tp in store:
                held[(tp.topic, tp.partition)] = tp.offset
            return
        if store and core.config.store_offsets:
            core.consumer.store_offsets(offsets=store)

    def store_call(self) -> None:
        """The consume() call returns its records: store their offsets, end the call's hold."""
        core = self._core
        held = core.call_stores
        core.call_stores = None
        if not held or not core.config.store_offsets:
            return
        store = [
            TopicPartition(topic, partition, offset)
            for (topic, partition), offset in held.items()
            if offset is not None and (topic, partition) in core.parts
        ]
        if store:
            core.consumer.store_offsets(offsets=store)


class GateChecker:
    """Re-checks closed gates when due; declares what they wait on.

    Args:
        core: The shared state.
        decider: Decides the gates.
        positions: The position service, or ``None`` (``ordered.positions=false``).
        member: This consumer's member name in interest records.
        wake: Called (on kazoo's thread) with a position-service notice: the
            consumer's fast path hands over, so the re-check runs at the next call.
    """

    def __init__(
        self,
        core: Core,
        decider: GateDecider,
        positions: PositionService | None,
        member: str,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self._core = core
        self._decider = decider
        self.positions = positions
        self._member = member
        self._interval = core.config.ordered.gate_poll_interval_ms / 1000.0
        self._declared: dict[str, dict[int, int]] = {}
        self._poked = threading.Event()  # set by a position-service watch (kazoo thread)
        # Whether a gate is paused or an announcement pending, as of Core.version: a gate
        # pauses only through Core.fire and an announcement becomes due only through
        # BatchFilter.check_marks, both of which bump it (one going idle unnoticed only keeps
        # the slices short a while longer).
        self._busy = False
        self._busy_version = -1
        self._wake = wake

    def quiet_until(self) -> float:
        """Until when :meth:`service` has nothing to do: the next re-check (0.0: a notice came)."""
        return 0.0 if self._poked.is_set() else self._core.next_check

    def service(self) -> None:
        """Re-check closed gates when due (at once after a position-service notice)."""
        if self._poked.is_set():
            self._poked.clear()
            self._core.check_gates_at(0.0)
        if self._core.clock.monotonic() >= self._core.next_check:
            self.recheck_blocked()

    def recheck_blocked(self) -> None:
        """Re-check every ``BLOCKED`` partition from the committed offsets."""
        core = self._core
        core.check_gates_at(core.clock.monotonic() + self._interval)
        if not core.layouts.usable:
            return
        by_topic: dict[str, list[PartState]] = {}
        for part in core.parts.values():
            if part.gate.state is GateState.BLOCKED:
                by_topic.setdefault(part.topic, []).append(part)
        for topic in [t for t in self._declared if t not in by_topic]:
            self._declare(topic, {})
        for topic, parts in by_topic.items():
            gates = core.layouts.topics[topic].gates
            if gates is None:
                for part in parts:
                    core.fire(part, GateEvent.RECHECK_OPEN, reason="not ordered")
                continue
            waits = self._decider.recheck(topic, gates, parts, self.positions is not None)
            if waits is not None:
                self._declare(topic, waits)

    def _declare(self, topic: str, waits: dict[int, int]) -> None:
        """Tell the position service what this consumer waits on, and watch it."""
        if self.positions is None or self._declared.get(topic, {}) == waits:
            return
        if waits:
            self._declared[topic] = waits
        else:
            self._declared.pop(topic, None)
        self.positions.declare(topic, self._member, waits)
        for partition in waits:
            self.positions.watch(topic, partition, self._on_progress)

    def _on_progress(self, _progress: Progress) -> None:
        # kazoo's thread: only raise a flag; the poll thread re-checks from Kafka.
        self._poked.set()
        if self._wake is not None:
            self._wake()

    def slice(self, deadline: float | None, dirty: bool) -> float:
        """How long the next inner poll may wait: short while a gate needs re-checks."""
        core = self._core
        if self._busy_version != core.version:  # a gate or an announcement may have moved
            self._busy_version = core.version
            self._busy = False
            for p in core.parts.values():
                if p.gate.paused or p.ann.state is not IDLE:
                    self._busy = True
                    break
        busy = self._busy
        step = self._interval if busy or dirty else 1.0
        if busy and self.positions is not None:
            # A progress notification is only seen between inner polls: keep them short.
            step = min(step, NOTIFY_SLICE)
        if deadline is None:
            return step
        return max(0.0, min(step, deadline - time.monotonic()))
