"""The rows of ``ordered bench``'s table from ``benchmarks/bench_aio.py`` (the asyncio clients).

Kept apart from :mod:`ordered.cli.bench_rows`, which holds the other benchmarks' rows.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["AIO_QUICK", "aio_rows"]

AIO_QUICK: Final = [
    "--records", "200000", "--rounds", "2", "--lag-records", "30000", "--lag-rounds", "2",
]  # fmt: skip
"""``bench_aio.py``'s arguments with ``--quick``."""

_THROUGHPUT: Final = (
    ("producer", "OrderedAIOProducer, `produce` awaited per record, {size}", "AIOProducer"),
    ("consumer", "OrderedAIOConsumer `consume(500)`, backlog of {size}, each client's defaults",
     "AIOConsumer"),
    ("consumer_same_backoff", "... `fetch.queue.backoff.ms=10` for both", "AIOConsumer"),
)  # fmt: skip
"""(part of the JSON's ``throughput``, the row's figure, confluent's class)."""


def _records(n: Any) -> str:
    if isinstance(n, int) and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if isinstance(n, int) and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def _load(d: dict[str, Any]) -> str:
    loads = d.get("load_average_1m_per_round") or []
    return f"; load {min(loads):.1f}-{max(loads):.1f}" if loads else ""


def aio_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """Producer and consumer throughput against confluent's asyncio clients (paired
    rounds, median ratio and its range), then the event loop's worst lag beside theirs."""
    goals = d.get("goals") or {}
    size = f"{_records(d.get('records'))} keyed {d.get('record_bytes')} B records"
    rows = []
    for part, label, their_class in _THROUGHPUT:
        t = (d.get("throughput") or {}).get(part)
        if not t:
            continue  # a run without that part
        ratio = t.get("ratio") or {}
        rows.append(
            {
                "figure": label.format(size=size) + " (records/s)",
                "value": t.get("ours_median"),
                "baseline": f"{their_class} {t.get('theirs_median')}",
                "ratio": ratio.get("median"),
                "spread": f"range [{ratio.get('min')}, {ratio.get('max')}] over "
                f"{len(t.get('ours') or [])} rounds{_load(d)}",
                "goal": goals.get(part, "report"),
                "source": "aio",
            }
        )
    lag = d.get("lag") or {}
    ours: dict[str, Any] = lag.get("ours") or {}
    theirs: dict[str, Any] = lag.get("theirs") or {}
    if ours and theirs:
        worst = [r.get("max_ms") for r in ours.get("rounds") or []]
        their_worst = [r.get("max_ms") for r in theirs.get("rounds") or []]
        rows.append(
            {
                "figure": "event loop's worst lag, producing and consuming through an "
                "expansion 2 -> 3 (ms)",
                "value": ours.get("max_ms"),
                "baseline": f"AIOProducer + AIOConsumer {theirs.get('max_ms')}",
                "ratio": lag.get("ratio"),
                "spread": f"rounds {worst} vs {their_worst}; probe every 10 ms, "
                f"{_records(d.get('lag_records'))} records per round",
                "goal": goals.get("lag", "report"),
                "source": "aio",
            }
        )
    return rows
