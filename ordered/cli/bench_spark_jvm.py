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


def _rate(s: dict[str, Any] | None) -> Any:
    """A median rate, as a whole number when it is one."""
    value = (s or {}).get("median")
    return int(value) if isinstance(value, float) and value.is_integer() else value


def _order(w: dict[str, Any]) -> tuple[bool, int, Any]:
    """The table's order: the fixed layout first, raw rows before the count, by size."""
    kinds = list(_WORKLOADS)
    workload = str(w.get("workload"))
    rank = kinds.index(workload) if workload in kinds else len(kinds)
    return str(w.get("topic", "")).startswith("expanded"), rank, w.get("records") or 0


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
    for w in sorted((d.get("workloads") or {}).values(), key=_order):
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
                f"; Python source `ordered-kafka` {_rate(rates.get('python'))} "
                f"rows/s, ratio {python.get('median')} ({_spread(python)})"
            )
        kind = str(w.get("topic", "")).split("-")[0]
        rows.append(
            {
                "figure": _figure(w, topics),
                "value": _rate(rates.get("jvm")),
                "baseline": f"Spark's Kafka source {_rate(rates.get('kafka'))}",
                "ratio": ratio.get("median"),
                "spread": spread + load,
                "goal": _GOALS.get(kind, "report"),
                "source": "spark_jvm",
            }
        )
    return rows
