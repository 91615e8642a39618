"""The rows of ``ordered bench``'s table from ``benchmarks/bench_calls.py`` (the cost per call).

Kept apart from :mod:`ordered.cli.bench`, which runs the scripts and holds the other
benchmarks' rows.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["CALLS_QUICK", "calls_rows"]

CALLS_QUICK: Final = [
    "--records", "60000", "--rounds", "5", "--expansion-records", "30000",
    "--expansion-rounds", "2", "--latency-samples", "6",
]  # fmt: skip
"""``bench_calls.py``'s arguments with ``--quick``."""

_CALLS: Final = (
    ("poll", "`poll(1.0)` per message"),
    ("consume_1", "`consume(1)`"),
    ("consume_100", "`consume(100)`"),
    ("consume_500", "`consume(500)`"),
    ("consume_10000", "`consume(10000)`"),
)


def _row(figure: str, c: dict[str, Any], goal: str, cpu: bool) -> dict[str, Any]:
    spread = f"range {c.get('ratio_range')}"
    if cpu:
        spread += (
            f"; CPU/record {c.get('ordered_cpu_us_per_record')} vs "
            f"{c.get('plain_cpu_us_per_record')} us (x{c.get('cpu_ratio_median')})"
        )
    return {
        "figure": figure,
        "value": c.get("ordered_median_per_s"),
        "baseline": f"plain {c.get('plain_median_per_s')}",
        "ratio": c.get("ratio_median"),
        "spread": spread,
        "goal": goal,
        "source": "calls",
    }


def calls_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per call (ordered against plain, same rounds); ``poll()`` through an expansion."""
    calls = d.get("calls") or {}
    goals = d.get("goals") or {}
    rows = [
        _row(f"OrderedConsumer {label} (records/s)", calls[name], goals.get(name, "report"), True)
        for name, label in _CALLS
        if calls.get(name)
    ]
    grown = d.get("expansion_poll") or {}
    if grown:
        label = "`poll()` through an expansion 2 -> 3, from `subscribe()` (records/s)"
        rows.append(_row(label, grown, goals.get("expansion_poll", "report"), False))
    return rows
