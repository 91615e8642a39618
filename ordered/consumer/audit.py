"""The violation audit: does a fetched record sit where its layout put it?

A violation is a record whose key routes elsewhere under every layout that may have
placed it at its offset, or whose epoch header contradicts the boundaries. The
producers of the layer route by the layout, so the audit only catches producers
outside it. Two depths (:class:`RecordAudit`):

* :meth:`RecordAudit.sample`, for the batch filter's fast path: it looks at a sample
  of a batch (``ordered.audit.every``) and only *confirms* the common case (one layout
  in force, every key where it routes); anything else answers ``False`` and the batch
  goes to the checked path.
* :meth:`RecordAudit.check`, for the checked path, one record at a time: a
  contradiction counts in :attr:`OrderedConsumer.violations`, logs, or raises
  :class:`~coordinator.kernel.errors.OrderViolationError` with
  ``ordered.violation.policy=raise``.

Every key the audit routes goes through :data:`route` (one key) or
:func:`route_sample` (a whole sample through the compiled router): the audit's one
seam to the router of :mod:`linear_hash`.
"""

from __future__ import annotations

import logging
import math
import operator
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple

from confluent_kafka import Message

from coordinator.kernel.errors import OrderViolationError
from linear_hash import Layout
from linear_hash.gating import epoch_range
from ordered.compiled import compiled_module, compiled_router
from ordered.consumer.layouts import AuditSpan, TopicView

if TYPE_CHECKING:
    from ordered.consumer.partition import PartState
    from ordered.consumer.state import Core

__all__ = ["KEY_MEMO", "RecordAudit", "audit_span", "route", "route_sample"]

_log = logging.getLogger("ordered.consumer")

KEY_MEMO = 100_000
"""Keys whose partition is memoised per layout before the memo restarts."""

# Unbound, so ``map`` calls them per record without a Python frame.
_PARTITION: Callable[[Any], Any] = Message.partition
_OFFSET: Callable[[Any], Any] = Message.offset
_KEY: Callable[[Any], Any] = Message.key
_HEADERS: Callable[[Any], Any] = Message.headers

_COMPILED = compiled_module()
# The compiled router of a layout (``ordered.compiled.compiled_router``, the C twin of
# ``linear_hash.Router``): the murmur3 route in C. The key audit's sample is routed with
# it rather than looked up in the memo: a lookup of a key just fetched (its hash not
# cached, the memo's entry cold) cost about 0.3 us, the route about 0.1 us.
_ROUTE: Callable[[Layout], Callable[[Any], int]] | None = (
    None if _COMPILED is None else lambda layout: compiled_router(layout).partition
)
_ROUTED_IN_C = "murmur3"


# --- routing: the audit's only calls into the router ------------------------------------


route: Callable[[Layout, Any, str], int] = Layout.partition_for
"""``route(layout, key, algorithm)``: the partition ``key`` routes to under ``layout``.

The unbound method itself, not a wrapper: the checked path routes every record it
audits, and a Python frame per route would cost it about 50 ns a record.
"""


def route_sample(layout: Layout, algorithm: str, keys: Sequence[Any]) -> list[int] | None:
    """Every key's partition under ``layout``, by the compiled router, in one pass.

    Returns:
        The partitions, or ``None`` when the compiled router does not serve
        ``algorithm`` (not built) or a record has no key: the caller then routes key by
        key with :data:`route`.
    """
    if _ROUTE is None or algorithm != _ROUTED_IN_C:
        return None
    try:
        return list(map(_ROUTE(layout), keys))
    except TypeError:
        return None  # an unkeyed record (key None)


# --- spans --------------------------------------------------------------------------

_Bounds = dict[int, tuple[int, float]]
_Plan = tuple[_Bounds, list[tuple[str, bytes]], Callable[[Any], int], TopicView]


class _FastSpan(NamedTuple):
    """Offsets of one partition with one layout in force, for the fast audit."""

    first: int
    end: float
    header: list[tuple[str, bytes]]
    layout: Layout
    memo: dict[Any, int]
    more: tuple[Layout, ...] = ()  # the other layouts that may have placed these offsets


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


class RecordAudit:
    """The audit of fetched records, with the fast path's caches.

    Args:
        core: The shared state (settings, events).
    """

    def __init__(self, core: Core) -> None:
        self._core = core
        self._fast_spans: dict[int, _FastSpan] = {}
        self._key_memos: dict[tuple[str, Layout], dict[Any, int]] = {}
        self._routers: dict[Layout, Callable[[Any], int]] = {}  # compiled, per layout
        self._plan: _Plan | None = None  # fast_plan()'s, until the spans change

    def forget_spans(self) -> None:
        """Drop the fast audit's spans (a new history, another topic)."""
        self._fast_spans.clear()
        self._plan = None

    # --- the fast audit -------------------------------------------------------------

    def fast_plan(
        self, view: TopicView
    ) -> tuple[_Bounds, list[tuple[str, bytes]], Callable[[Any], int]] | None:
        """What the compiled scan audits a sample by: spans, the header, the router.

        The cached spans of the partitions with the first cached span's layout and
        header and no other layout that may have placed their offsets (what
        :meth:`sample` confirms by whole lists); a sampled record of another partition
        ends the scan, and :meth:`sample` judges the batch. ``None`` when there is no
        span yet or the compiled router does not serve the topic's algorithm.
        """
        plan = self._plan
        if plan is not None and plan[3] is view:
            return plan[:3]
        spans = self._fast_spans
        if not spans or _ROUTE is None or view.algorithm != _ROUTED_IN_C:
            return None
        first = next(iter(spans.values()))
        if first.more:
            return None
        layout, header = first.layout, first.header
        bounds = {
            partition: (span.first, span.end)
            for partition, span in spans.items()
            if span.layout == layout and span.header == header and not span.more
        }
        route = self._routers.get(layout)
        if route is None:
            route = self._routers[layout] = _ROUTE(layout)
        self._plan = (bounds, header, route, view)
        return bounds, header, route

    def sample(self, view: TopicView, sample: Sequence[Any]) -> bool:
        """The fast audit of a batch's sample: ``True`` when it confirms every record.

        Within a batch a partition's offsets grow, so its first and last sampled
        offsets bound the others: each partition's span (one layout in force) is
        checked at those two. When every sampled partition has the same layout in
        force, the sample's partitions and its keys' routes under that layout are
        compared as whole lists, so only C runs per record: the routes come from the
        compiled router when it is built and serves the topic's algorithm, else from
        the per-layout memo (a key not memoised yet is routed, memoised, then
        compared). Anything else (an epoch boundary inside the sample, partitions
        under different layouts) goes to :meth:`_sample_records`, record by record.
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
                self._plan = None
                if not high < span.end:
                    return self._sample_records(view, sample)
            if shared is None:
                shared = span
            elif span.memo is not shared.memo or span.more != shared.more:
                return self._sample_records(view, sample)  # other layouts: memos, headers
        assert shared is not None  # a sample is never empty (the batch is not)
        settings = self._core.config.ordered
        if settings.header_audit:
            headers = list(map(_HEADERS, sample))
            if headers.count(None) + headers.count(shared.header) != len(headers):
                return False
        if settings.key_audit:
            keys = list(map(_KEY, sample))
            layout = shared.layout
            algorithm = view.algorithm
            if shared.more:
                return self._sample_any(layout, shared.more, algorithm, keys, partitions)
            routed = route_sample(layout, algorithm, keys)
            if routed is not None:
                return routed == partitions
            memo = shared.memo
            placed = list(map(memo.get, keys))
            if placed != partitions:
                # Unkeyed records map to None (nothing to check: take their partition),
                # keys not memoised yet too (route and memoise them, then compare).
                for i, found in enumerate(placed):
                    if found is None:
                        key = keys[i]
                        if key is None:
                            placed[i] = partitions[i]
                            continue
                        if len(memo) >= KEY_MEMO:
                            memo.clear()
                        placed[i] = memo[key] = route(layout, key, algorithm)
                if placed != partitions:
                    return False
        return True

    @staticmethod
    def _sample_any(
        layout: Layout,
        more: tuple[Layout, ...],
        algorithm: str,
        keys: list[Any],
        partitions: list[int],
    ) -> bool:
        """``True`` when every key routes to its record's partition under one of the layouts.

        The offsets lie where any of them may have placed a record (a partition an
        epoch left alone, an epoch's first records): what the full audit accepts, by the
        compiled router's whole-list maps (nothing but C per record).
        """
        ok: list[bool] | None = None
        for each in (layout, *more):
            routed = route_sample(each, algorithm, keys)
            if routed is None:
                return False  # not compiled, or unkeyed records: the checked path audits
            hits = list(map(operator.eq, routed, partitions))
            ok = hits if ok is None else list(map(operator.or_, ok, hits))
        return ok is not None and all(ok)

    def _sample_records(self, view: TopicView, sample: Sequence[Any]) -> bool:
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
                self._plan = None
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
                        placed = memo[key] = route(span.layout, key, view.algorithm)
                    if placed != partition:
                        return False
        return True

    def _fast_span(self, view: TopicView, partition: int, offset: int) -> _FastSpan | None:
        """The offsets around ``offset`` where one layout is in force, for the fast audit."""
        span = audit_span(view, partition, offset)
        if not span.layouts:
            return None
        more: tuple[Layout, ...] = ()
        if len(span.layouts) != 1 or span.lo != span.hi:
            # Several epochs may have placed these offsets: only the key audit is
            # confirmed in bulk (any of their layouts), by the compiled router.
            if self._core.config.ordered.header_audit or _ROUTE is None:
                return None
            more = span.layouts[1:]
        layout = span.layouts[0]
        memo = self._key_memos.setdefault((view.algorithm, layout), {})
        header = [(self._core.config.ordered.epoch_header_name, str(layout.epoch).encode())]
        return _FastSpan(span.first, span.end, header, layout, memo, more)

    # --- the full audit -------------------------------------------------------------

    def check(
        self, part: PartState, view: TopicView, message: Any, offset: int, newer: bool = True
    ) -> bool:
        """Check one record against the layout; count, log or raise a contradiction.

        Args:
            part: The record's partition.
            view: Its topic's layouts.
            message: The record.
            offset: Its offset.
            newer: Look for an epoch header newer than ``view``'s history (``False``:
                the history was just read again for this record).

        Returns:
            ``True`` when the record's epoch header names an epoch newer than ``view``'s
            history: nothing was checked; the caller reads the history again and checks
            the record again with ``newer=False``.

        Raises:
            OrderViolationError: A contradiction with ``ordered.violation.policy=raise``.
        """
        core = self._core
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
                        newer
                        and header_epoch is not None
                        and view.gates is not None
                        and header_epoch > view.gates.latest_epoch
                    ):
                        # A producer outside the layer wrote under an epoch newer than
                        # our copy: the history is read before deciding about it.
                        return True
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
                if layout is not None and route(layout, key, algorithm) != part.partition:
                    problem = f"key routes elsewhere under its header epoch {header_epoch}"
        if (
            not problem
            and key is not None
            and span.layouts
            and all(route(layout, key, algorithm) != part.partition for layout in span.layouts)
        ):
            problem = f"key routes elsewhere under every epoch {span.lo}..{span.hi}"
        if problem:
            core.events.violation(part.topic, part.partition, offset, problem)
            if settings.violation_policy == "raise":
                raise OrderViolationError(part.topic, part.partition, offset, problem)
            _log.warning(
                "order violation in %s[%d]@%d: %s", part.topic, part.partition, offset, problem
            )
        return False
