"""The rows of ``ordered bench``'s table from ``benchmarks/bench_spark_jvm.py``.

The JVM Spark source (``ordered-kafka-jvm``) against Spark's own Kafka source, one row
per workload, then the Python source (``ordered-kafka``) against Spark's in the same
rounds, one row per workload: the table's figures of the Python source at 1M and 3M
records (``bench_spark.py``'s smaller reads stay out of it). Kept apart from
:mod:`ordered.cli.bench_rows`, which holds the other benchmarks' rows.
"""

from __future__ import annotations

from typing import Any, Final

__all__ = ["spark_jvm_rows"]

_WORKLOADS: Final = {
    "raw": "rows into `noop`",
    "count": "`groupBy(key).count()`, update mode, into `noop`",
}
_GOALS: Final = {"steady": ">= 0.95", "expanded": ">= 0.9"}
# The Python source's goal, end to end, whatever the layout (docs/spark.md, "Speed").
_PYTHON_GOAL: Final = ">= 0.9"


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


def _figure(w: dict[str, Any], topics: dict[str, Any], source: str) -> str:
    kind = str(w.get("topic", ""))
    layout = "adopted, 4 partitions"
    if kind.startswith("expanded"):
        layout = f"through an expansion ({(topics.get(kind) or {}).get('layout', '4 -> 8')})"
    what = _WORKLOADS.get(str(w.get("workload")), str(w.get("workload")))
    return f"{source}, {what}, {_records(w.get('records'))} records, {layout}, end to end (rows/s)"


def spark_jvm_rows(d: dict[str, Any]) -> list[dict[str, Any]]:
    """One row per workload: JVM source over Spark's Kafka source, median of the rounds;
    then one per workload for the Python source, measured in the same rounds."""
    topics = d.get("topics") or {}
    loads = d.get("load_average_1m_per_round") or []
    load = f"; load {min(loads):.1f}-{max(loads):.1f}" if loads else ""
    if any(d.get("chaos_run_beside_per_round") or []):
        load += " (a chaos run beside)"
    workloads = sorted((d.get("workloads") or {}).values(), key=_order)
    rows = []
    for source, name in (
        ("jvm", "Spark JVM source `ordered-kafka-jvm`"),
        ("python", "Spark source `ordered-kafka` (Python)"),
    ):
        for w in workloads:
            rates = w.get("end_to_end_rows_per_s") or {}
            ratio = w.get(f"end_to_end_ratio_{source}_to_kafka")
            if not ratio:
                continue  # a run without the Python source
            inside = w.get(f"in_batches_ratio_{source}_to_kafka") or {}
            kind = str(w.get("topic", "")).split("-")[0]
            rows.append(
                {
                    "figure": _figure(w, topics, name),
                    "value": _rate(rates.get(source)),
                    "baseline": f"Spark's Kafka source {_rate(rates.get('kafka'))}",
                    "ratio": ratio.get("median"),
                    "spread": (
                        f"min-max {_spread(ratio)} over {w.get('rounds')} rounds; in batches "
                        f"{inside.get('median')} ({_spread(inside)})"
                    )
                    + load,
                    "goal": _GOALS.get(kind, "report") if source == "jvm" else _PYTHON_GOAL,
                    "source": "spark_jvm",
                }
            )
    return rows
