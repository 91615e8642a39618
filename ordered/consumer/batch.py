"""The batch filter: which fetched records are delivered, which wait at a gate; the audit.

Two paths judge a batch. The *fast* path takes the whole batch when one topic is
assigned and each partition's last record in it is below the partition's limit
(within a batch a partition's offsets grow, so every record is); its audits look at
every ``ordered.audit.every``-th record and only confirm the common case. Anything else
goes to the *checked* path, which judges record by record: gates, stashes, tombstone
copies of compacted topics, and the full audit.

The audit (a violation is a record whose key routes elsewhere under every layout that
may have placed it at its offset, or whose epoch header contradicts the boundaries)
counts in :attr:`OrderedConsumer.violations`, logs, or raises
:class:`~coordinator.client.errors.OrderViolationError` with ``ordered.violation.policy=raise``.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, NamedTuple

from confluent_kafka import Message, TopicPartition

from coordinator.client.errors import OrderViolationError
from linear_hash import Layout
from linear_hash.gating import epoch_range
from ordered.compaction import is_tombstone_copy
from ordered.compiled import compiled_module
from ordered.consumer.gate import PAUSED, GateEvent, GateState
from ordered.consumer.layouts import AuditSpan, TopicView

if TYPE_CHECKING:
    from ordered.consumer.announce import Announcer
    from ordered.consumer.recheck import GateChecker
    from ordered.consumer.state import Core, PartState

__all__ = ["KEY_MEMO", "BatchFilter", "audit_span"]

_log = logging.getLogger("ordered.consumer")

KEY_MEMO = 100_000
"""Keys whose partition is memoised per layout before the memo restarts."""

# Unbound, so ``map`` calls them per record without a Python frame.
_PARTITION: Callable[[Any], Any] = Message.partition
_OFFSET: Callable[[Any], Any] = Message.offset
_KEY: Callable[[Any], Any] = Message.key
_HEADERS: Callable[[Any], Any] = Message.headers

_COMPILED = compiled_module()
# ``partition(key, modulus_high, modulus_low, active)``: the murmur3 route in C. The key
# audit's sample is routed with it rather than looked up in the memo: a lookup of a key
# just fetched (its hash not cached, the memo's entry cold) cost about 0.3 us, the
# route about 0.1 us.
_ROUTE: Callable[..., int] | None = None if _COMPILED is None else _COMPILED.partition
_ROUTED_IN_C = "murmur3"


class _FastSpan(NamedTuple):
    """Offsets of one partition with one layout in force, for the fast audit."""

    first: int
    end: float
    header: list[tuple[str, bytes]]
    layout: Layout
    memo: dict[Any, int]


def audit_span(view: TopicView, partition: int, offset: int) -> AuditSpan:
    """The offsets around ``offset`` with the same epoch range, and its layouts."""
    lo, hi = epoch_range(list(view.epochs), partition, offset)
    below = 0
    above: float = math.inf
    for info in view.epochs:
        bound = info.boundaries.get(partition)
        if bound is None:
            continue
        if bound <= offset:
            below = max(below, bound)
        else:
            above = min(above, bound)
    layouts = tuple(view.layouts[e] for e in range(lo, hi + 1) if e in view.layouts)
    return AuditSpan(below, above, layouts, lo, hi)


class BatchFilter:
    """Judges fetched batches for the consumer.

    Args:
        core: The shared state.
        checker: Opens and closes gates.
        announcer: Schedules boundary announcements as delivery reaches them.
        reload: Reads a topic's history again (and relimits its partitions).
    """

    def __init__(
        self,
        core: Core,
        checker: GateChecker,
        announcer: Announcer,
        reload: Callable[[str], None],
    ) -> None:
        self._core = core
        self.reload = reload
        self._checker = checker
        self._announcer = announcer
        self.single: str | None = None  # the one assigned topic, if exactly one
        self._fast_spans: dict[int, _FastSpan] = {}
        self._key_memos: dict[tuple[str, Layout], dict[Any, int]] = {}

    def forget_spans(self) -> None:
        """Drop the fast path's caches (a new history)."""
        self._fast_spans.clear()

    def update_single(self) -> None:
        """Remember the one assigned topic, if there is exactly one (the fast path)."""
        topics = {topic for topic, _partition in self._core.parts}
        usable = self._core.layouts.usable
        single = topics.pop() if len(topics) == 1 and usable else None
        if single != self.single:
            self._fast_spans.clear()
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
            if not self._audit_sample(view, sample):
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

    def _audit_sample(self, view: TopicView, sample: Sequence[Any]) -> bool:
        """The fast audit of a batch's sample: ``True`` when it confirms every record.

        Within a batch a partition's offsets grow, so its first and last sampled
        offsets bound the others: each partition's span (one layout in force) is
        checked at those two. When every sampled partition has the same layout in
        force, the sample's partitions and its keys' routes under that layout are
        compared as whole lists, so only C runs per record: the routes come from the
        compiled murmur3 router when it is built and the topic uses murmur3, else from
        the per-layout memo (a key not memoised yet is routed, memoised, then
        compared). Anything else (an epoch boundary inside the sample, partitions
        under different layouts) goes to :meth:`_audit_records`, record by record.
        """
        offsets = list(map(_OFFSET, sample))
        if None in offsets:
            return False  # an error event (no offset): the checked path passes it on
        partitions = list(map(_PARTITION, sample))
        first = partitions[0]
        if partitions.count(first) == len(partitions):  # nearly always: one partition
            lows, highs = {first: offsets[0]}, {first: offsets[-1]}
        else:
            # The last value per key wins: from the reversed lists, each partition's first.
            lows = dict(zip(reversed(partitions), reversed(offsets), strict=False))
            highs = dict(zip(partitions, offsets, strict=False))
        spans = self._fast_spans
        shared: _FastSpan | None = None
        for partition, low in lows.items():
            high = highs[partition]
            span = spans.get(partition)
            if span is None or not span.first <= low or not high < span.end:
                span = self._fast_span(view, partition, low)
                if span is None:
                    return False
                spans[partition] = span
                if not high < span.end:
                    return self._audit_records(view, sample)
            if shared is None:
                shared = span
            elif span.memo is not shared.memo:  # another layout: its own memo and header
                return self._audit_records(view, sample)
        assert shared is not None  # a sample is never empty (the batch is not)
        settings = self._core.config.ordered
        if settings.header_audit:
            headers = list(map(_HEADERS, sample))
            if headers.count(None) + headers.count(shared.header) != len(headers):
                return False
        if settings.key_audit:
            keys = list(map(_KEY, sample))
            layout = shared.layout
            if _ROUTE is not None and view.algorithm == _ROUTED_IN_C:
                try:
                    routed = list(
                        map(
                            _ROUTE,
                            keys,
                            repeat(layout.modulus_high),
                            repeat(layout.modulus_low),
                            repeat(layout.active),
                        )
                    )
                except TypeError:
                    pass  # an unkeyed record (key None): the memo's way below
                else:
                    return routed == partitions
            memo = shared.memo
            placed = list(map(memo.get, keys))
            if placed != partitions:
                # Unkeyed records map to None (nothing to check: take their partition),
                # keys not memoised yet too (route and memoise them, then compare).
                algorithm = view.algorithm
                for i, route in enumerate(placed):
                    if route is None:
                        key = keys[i]
                        if key is None:
                            placed[i] = partitions[i]
                            continue
                        if len(memo) >= KEY_MEMO:
                            memo.clear()
                        placed[i] = memo[key] = layout.partition_for(key, algorithm)
                if placed != partitions:
                    return False
        return True

    def _audit_records(self, view: TopicView, sample: Sequence[Any]) -> bool:
        """The fast audit record by record: ``True`` when it confirms every record."""
        settings = self._core.config.ordered
        header_audit = settings.header_audit
        key_audit = settings.key_audit
        spans = self._fast_spans
        for m in sample:
            partition = m.partition()
            offset = m.offset()
            if offset is None:
                return False  # an error event (no offset): the checked path passes it on
            span = spans.get(partition)
            if span is None or not span.first <= offset < span.end:
                span = self._fast_span(view, partition, offset)
                if span is None:
                    return False
                spans[partition] = span
            if header_audit:
                headers = m.headers()
                if headers is not None and headers != span.header:
                    return False
            if key_audit:
                key = m.key()
                if key is not None:
                    memo = span.memo
                    placed = memo.get(key)
                    if placed is None:
                        if len(memo) >= KEY_MEMO:
                            memo.clear()
                        placed = memo[key] = span.layout.partition_for(key, view.algorithm)
                    if placed != partition:
                        return False
        return True

    def _fast_span(self, view: TopicView, partition: int, offset: int) -> _FastSpan | None:
        """The offsets around ``offset`` where one layout is in force, for the fast audit."""
        span = audit_span(view, partition, offset)
        if len(span.layouts) != 1 or span.lo != span.hi:
            return None
        layout = span.layouts[0]
        memo = self._key_memos.setdefault((view.algorithm, layout), {})
        header = [(self._core.config.ordered.epoch_header_name, str(layout.epoch).encode())]
        return _FastSpan(span.first, span.end, header, layout, memo)

    def _filter_checked(self, batch: Sequence[Any], audit: bool, from_stash: bool) -> list[Any]:
        """Judge every record: audit, gates, stashes."""
        core = self._core
        parts = core.parts
        topics = core.layouts.topics
        reach = self._checker.reach
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
                    and self._audit(part, view, m, offset)
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

    # --- the violation audit ---------------------------------------------------------

    def _audit(self, part: PartState, view: TopicView, message: Any, offset: int) -> bool:
        """Check one record against the layout; count, log or raise a contradiction.

        Returns:
            ``True`` if the record's epoch header made the history be read again.
        """
        core = self._core
        reloaded = False
        settings = core.config.ordered
        problem = ""
        header_epoch: int | None = None
        if settings.header_audit:
            headers = message.headers()
            if headers:
                value = next((v for k, v in headers if k == settings.epoch_header_name), None)
                if value is not None:
                    try:
                        header_epoch = int(value)
                    except (TypeError, ValueError):
                        problem = f"epoch header {value!r} is not an epoch number"
                    if (
                        header_epoch is not None
                        and view.gates is not None
                        and header_epoch > view.gates.latest_epoch
                    ):
                        # A producer outside the layer wrote under an epoch newer than
                        # our copy: read the history before deciding about it.
                        self.reload(view.name)
                        reloaded = True
        span = view.audit.get(part.partition)
        if span is None or not span.first <= offset < span.end:
            span = audit_span(view, part.partition, offset)
            view.audit[part.partition] = span
        key = message.key() if settings.key_audit else None
        algorithm = view.algorithm
        if header_epoch is not None and not problem:
            if not span.lo <= header_epoch <= span.hi:
                problem = (
                    f"epoch header {header_epoch} outside epochs {span.lo}..{span.hi} "
                    "at this offset"
                )
            elif key is not None:
                layout = view.layouts.get(header_epoch)
                if layout is not None and layout.partition_for(key, algorithm) != part.partition:
                    problem = f"key routes elsewhere under its header epoch {header_epoch}"
        if (
            not problem
            and key is not None
            and span.layouts
            and all(
                layout.partition_for(key, algorithm) != part.partition for layout in span.layouts
            )
        ):
            problem = f"key routes elsewhere under every epoch {span.lo}..{span.hi}"
        if problem:
            core.events.violation(part.topic, part.partition, offset, problem)
            if settings.violation_policy == "raise":
                raise OrderViolationError(part.topic, part.partition, offset, problem)
            _log.warning(
                "order violation in %s[%d]@%d: %s", part.topic, part.partition, offset, problem
            )
        return reloaded
