"""The per-record judgement of a fetched batch, in one pass: compiled, or its reference.

:func:`scan_batch` is the reference; ``ordered._fastconsume.scan`` (``setup.py`` builds
it when a C compiler is there) is its compiled twin, and :data:`SCAN` is the one the
batch filter calls: the compiled one when it was built and could bind confluent's
``Message`` layout, else ``None`` (the filter then keeps its pure-Python judgement, which
reads no record but the audit's sample: in Python a pass over every record costs more
than it saves). ``tests/unit/test_fastconsume.py`` runs both on generated batches and
compares their results.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordinator.kernel.confluent_private import bind_message_layout
from ordered.compiled import compiled_consume_module

__all__ = ["SCAN", "SCAN_MOST", "SPLIT", "Scan", "Split", "scan_batch", "split_batch"]

Scan = Callable[
    [list[Any], int, dict[int, Any], dict[int, tuple[Any, Any]], Any, Any],
    "tuple[int, dict[int, int]] | None",
]
Split = Callable[[list[Any], dict[int, list[Any]]], "list[Any] | None"]


def scan_batch(
    batch: list[Any],
    every: int,
    limits: dict[int, Any],
    spans: dict[int, tuple[Any, Any]],
    header: Any,
    route: Callable[[Any], Any] | None,
) -> tuple[int, dict[int, int]] | None:
    """How many records of ``batch``, from its start, the fast path may serve; their last offsets.

    Args:
        batch: Messages from librdkafka.
        every: The audit samples the records at index 0, ``every``, ``2 * every``...
        limits: Each servable partition's limit: its records at or past it are not
            servable (a gate; ``-1``: a paused partition).
        spans: Each partition's span ``(first, end)`` of one layout in force: a sampled
            record must lie in it (only read when an audit is on).
        header: The epoch header every sampled record must carry (or none at all);
            ``None``: no header audit.
        route: The layout's router (``key -> partition``) a sampled key must route by
            (an unkeyed record passes); ``None``: no key audit.

    Returns:
        ``(n, last)``: the first ``n`` records pass (``n == len(batch)``: all of them;
        else the slow path takes over at index ``n``), ``last`` maps each of their
        partitions to its last offset among them. ``None`` when a partition is past
        65535 (the compiled twin's bound; never in Kafka's default limits).
    """
    audit = header is not None or route is not None
    if any(m.partition() is not None and m.partition() > _MAX_PARTITION for m in batch):
        return None
    last: dict[int, int] = {}
    for n, m in enumerate(batch):
        if m.error() is not None:
            return n, last
        p = m.partition()
        o = m.offset()
        limit = limits.get(p) if p is not None else None
        if o is None or limit is None or o >= limit:
            return n, last
        if audit and n % every == 0:
            span = spans.get(p)
            if span is None or not span[0] <= o < span[1]:
                return n, last
            if header is not None:
                got = m.headers()
                if got is not None and got != header:
                    return n, last
            if route is not None:
                key = m.key()
                if key is not None:  # unkeyed: nothing to route (as the audit's sample)
                    try:
                        routed = route(key)
                    except Exception:
                        return n, last
                    if not isinstance(routed, int) or routed != p:
                        return n, last
        last[p] = o
    return len(batch), last


_MAX_PARTITION = 65535


def split_batch(batch: list[Any], held: dict[int, list[Any]]) -> list[Any]:
    """The records of ``batch`` no gate holds; the held ones join ``held``.

    Args:
        batch: Messages of one topic, from librdkafka.
        held: Each held partition's list: a record of it (without an error) is
            appended there, in the batch's order.

    Returns:
        The other records (events, partitions not in ``held``), in the batch's order.
    """
    free: list[Any] = []
    for m in batch:
        target = held.get(m.partition()) if m.error() is None else None
        (free if target is None else target).append(m)
    return free


def _bound() -> Any | None:
    """``ordered._fastconsume`` once bound to confluent's ``Message`` layout, else ``None``."""
    module = compiled_consume_module()
    if module is None:
        return None
    # The compiled helpers read confluent's Message struct: only once a probe reads back.
    if not bind_message_layout(module):
        return None
    return module


_MODULE = _bound()

SCAN: Scan | None = None if _MODULE is None else _MODULE.scan
"""The compiled :func:`scan_batch` when built and bound, else ``None``."""

SPLIT: Split | None = None if _MODULE is None else _MODULE.split
"""The compiled :func:`split_batch` when built and bound, else ``None``."""

SCAN_MOST = 2000
"""The largest batch the filter scans in C.

A larger one is judged by the pure-Python path, which reads only the audit's sample and
each partition's last offset from the fetch: touching every record of a batch of
10,000 (1.4 MB of ``Message`` objects, past the caches) cost more than the sample's
Python saved (``consume(10000)``: CPU ratio 1.15 with the scan against 1.03 without).
"""
