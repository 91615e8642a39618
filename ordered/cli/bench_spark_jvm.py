"""The rows of ``ordered bench``'s table from ``benchmarks/bench_spark_jvm.py``.

The JVM Spark source (``ordered-kafka-jvm``) against Spark's own Kafka source, with the
Python source (``ordered-kafka``) from the same run beside it: one row per workload.
Kept apart from :mod:`ordered.cli.bench_rows`, which holds the other benchmarks' rows.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["spark_jvm_rows"]

_WORKLOADS: Final = {
    "raw": "rows into `noop`",
    "count": "`groupBy(key).count()`, update mode, into `noop`",
}
_GOALS: Final = {"steady": ">= 0.95", "expanded": ">= 0.9"}


def _records(n: Any) -> str:
    if isinstance(n, int) and n % 1_000_000 == 0:
        return f"{n // 1_000_000}M"
    if isinstance(n, int) and n % 1000 == 0:
        return f"{n // 1000}k"
    return str(n)


def _spread(s: dict[str, Any] | None) -> str:
    return f"{s.get('min')}-{s.get('max')}" if s else "?"


def _figure(w: dict[str, Any], topics: dict[str, Any]) -> str:
    kind = str(w.get("topic", ""))
    layout = "adopted, 4 partitions"
    if kind.startswith("expanded"):
        layout = f"through an expansion ({(topics.get(kind) or {}).get('layout', '4 -> 8')})"
    what = _WORKLOADS.get(str(w.get("workload")), str(w.get("workload")))
    return (
        f"Spark JVM source `ordered-kafka-jvm`, {what}, {_records(w.get('records'))} "
        f"records, {layout}, end to end (rows/s)"
    )


def spark_jvm_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workload: JVM source over Spark's Kafka source, median of the rounds."""
    topics = d.get("topics") or {}
    loads = d.get("load_average_1m_per_round") or []
    load = f"; load {min(loads):.1f}-{max(loads):.1f}" if loads else ""
    if any(d.get("chaos_run_beside_per_round") or []):
        load += " (a chaos run beside)"
    rows = []
    for w in (d.get("workloads") or {}).values():
        rates = w.get("end_to_end_rows_per_s") or {}
        ratio = w.get("end_to_end_ratio_jvm_to_kafka") or {}
        inside = w.get("in_batches_ratio_jvm_to_kafka") or {}
        python = w.get("end_to_end_ratio_python_to_kafka")
        spread = (
            f"min-max {_spread(ratio)} over {w.get('rounds')} rounds; in batches "
            f"{inside.get('median')} ({_spread(inside)})"
        )
        if python:
            spread += (
                f"; Python source `ordered-kafka` {(rates.get('python') or {}).get('median')} "
                f"rows/s, ratio {python.get('median')} ({_spread(python)})"
            )
        kind = str(w.get("topic", "")).split("-")[0]
        rows.append(
            {
                "figure": _figure(w, topics),
                "value": (rates.get("jvm") or {}).get("median"),
                "baseline": f"Spark's Kafka source {(rates.get('kafka') or {}).get('median')}",
                "ratio": ratio.get("median"),
                "spread": spread + load,
                "goal": _GOALS.get(kind, "report"),
                "source": "spark_jvm",
            }
        )
    return rows
