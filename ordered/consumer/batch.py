"""The batch filter: which fetched records are delivered, which wait at a gate.

Two paths judge a batch. The *fast* path takes the whole batch when one topic is
assigned and each partition's last record in it is below the partition's limit
(within a batch a partition's offsets grow, so every record is); its audits look at
every ``ordered.audit.every``-th record and only confirm the common case. Anything else
goes to the *checked* path, which judges record by record: gates (asked of the
:class:`~ordered.consumer.decide.GateDecider`), stashes, tombstone copies of compacted
topics, and the full audit (:mod:`~ordered.consumer.audit`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from confluent_kafka import Message, TopicPartition

from ordered.compaction import is_tombstone_copy
from ordered.consumer.audit import KEY_MEMO, RecordAudit, audit_span
from ordered.consumer.partition import GateEvent, GateState
from ordered.consumer.scan import SCAN, SCAN_MOST

if TYPE_CHECKING:
    from ordered.consumer.announce import Announcer
    from ordered.consumer.decide import GateDecider
    from ordered.consumer.layouts import TopicView
    from ordered.consumer.partition import PartState
    from ordered.consumer.state import Core

__all__ = ["KEY_MEMO", "BatchFilter", "audit_span"]

# Unbound, so ``map`` calls it per record without a Python frame.
_PARTITION: Callable[[Any], Any] = Message.partition
_OFFSET: Callable[[Any], Any] = Message.offset


class BatchFilter:
    """Judges fetched batches for the consumer.

    Args:
        core: The shared state.
        decider: Decides the gates of records at their partition's limit.
        announcer: Schedules boundary announcements as delivery reaches them.
        reload: Reads a topic's history again (and relimits its partitions), for the
            audit.
    """

    def __init__(
        self,
        core: Core,
        decider: GateDecider,
        announcer: Announcer,
        reload: Callable[[str], None],
    ) -> None:
        self._core = core
        self._decider = decider
        self._announcer = announcer
        self.single: str | None = None  # the one assigned topic, if exactly one
        self._limits_key: tuple[str, int, int] | None = None
        self._limits_cached: dict[int, Any] = {}
        self.audit = RecordAudit(core, reload)

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
                if (
                    audit
                    and view.ordered
                    and check(part, view, m, offset)
                    and offset >= part.gate.limit
                    and not reach(part, offset, crossed)
                ):
                    # The audit read a newer history that puts a gate in the way.
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
                    self._announcer.check_marks(part)
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
