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
from ordered.consumer.gate import PAUSED, GateEvent, GateState

if TYPE_CHECKING:
    from ordered.consumer.announce import Announcer
    from ordered.consumer.decide import GateDecider
    from ordered.consumer.state import Core, PartState

__all__ = ["KEY_MEMO", "BatchFilter", "audit_span"]

# Unbound, so ``map`` calls it per record without a Python frame.
_PARTITION: Callable[[Any], Any] = Message.partition


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
        """The whole batch when nothing in it can reach a gate or fail an audit, else ``None``.

        Only each partition's last offset is judged (within a batch a partition's
        offsets grow). Given by the fetch (``known``), no record is looked at but the
        audit's sample; else confluent's ``Message`` methods are mapped over the batch,
        so only C runs per record (a Python loop per record cost ~10% of a plain
        consumer's time at ``consume(500)``). ``Message.topic()`` builds a new string
        per call, so it is not called here.
        """
        core = self._core
        settings = core.config.ordered
        view = core.layouts.topics[topic]
        if view.compacted or not batch:
            return None  # every record is looked at: tombstone copies are dropped
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
            if part is None or offset >= part.gate.limit or part.gate.state in PAUSED:
                return None
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
        self.delivered(last)
        core.events.records_delivered(len(batch))
        # take() hands over a list of its own: it is the caller's already.
        return batch if type(batch) is list else list(batch)

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
        for key, messages in withheld.items():
            core.events.records_held(key[0], key[1], len(messages))
            core.fire(parts[key], GateEvent.STASHED, records=messages)
        if from_stash:
            for part in list(parts.values()):
                if part.gate.state is GateState.DRAINING and not part.gate.stash:
                    core.fire(part, GateEvent.STASH_DELIVERED)
        if last:
            self.delivered(last)
        core.events.records_delivered(len(out))
        return out

    def delivered(self, last: dict[tuple[str, int], int]) -> None:
        """Record delivery up to ``last`` (offsets) and store the offsets to commit."""
        core = self._core
        store = []
        for key, offset in last.items():
            part = core.parts.get(key)
            stored: int | None = offset + 1
            if part is not None:
                part.position = offset + 1
                view = core.layouts.topics[key[0]]
                if view.ordered:
                    self._announcer.check_marks(part)
                # KIP order: no commit (auto-commit, or commit() of the stored offsets)
                # may reach a source's boundary before maybe_revoked ran, nor move
                # while the partition gives keys away in a pending epoch.
                stored = part.ann.store_for(offset + 1, key[1] in view.pending_givers)
            if stored is not None:
                store.append(TopicPartition(key[0], key[1], stored))
        if core.config.store_offsets and store:
            core.consumer.store_offsets(offsets=store)
