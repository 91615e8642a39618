"""The JVM Spark source's rows of the performance table (``benchmarks/bench_spark_jvm.py``)."""

from __future__ import annotations

from typing import Any

from helpers import load_script

from ordered.cli.bench import summarise


def _spread(median: float, low: float, high: float) -> dict[str, Any]:
    return {"median": median, "min": low, "max": high, "rounds": [low, median, high]}


def _workload(workload: str, topic: str, records: int, ratio: float) -> dict[str, Any]:
    return {
        "workload": workload,
        "topic": topic,
        "records": records,
        "rounds": 3,
        "end_to_end_rows_per_s": {
            "jvm": _spread(95.0, 90.0, 99.0),
            "kafka": _spread(100.0, 98.0, 103.0),
            "python": _spread(60.0, 55.0, 70.0),
        },
        "end_to_end_ratio_jvm_to_kafka": _spread(
            ratio, round(ratio - 0.05, 3), round(ratio + 0.02, 3)
        ),
        "in_batches_ratio_jvm_to_kafka": _spread(0.99, 0.97, 1.01),
        "end_to_end_ratio_python_to_kafka": _spread(0.6, 0.55, 0.7),
    }


def _result() -> dict[str, Any]:
    return {
        "date": "2026-12-07T02:00:00+00:00",
        "topics": {
            "steady-1M": {"records": 1_000_000},
            "expanded-1M": {"records": 1_000_000, "layout": "4 -> 8 during the writes"},
        },
        "workloads": {
            "count-3M": _workload("count", "steady-3M", 3_000_000, 0.96),
            "raw-1M": _workload("raw", "steady-1M", 1_000_000, 0.97),
            "raw-1M-expansion": _workload("raw", "expanded-1M", 1_000_000, 0.91),
        },
        "load_average_1m_per_round": [1.2, 2.0, 1.5],
        "chaos_run_beside_per_round": [False, False, False],
    }


def test_one_row_per_workload_with_its_goal_and_the_python_source_beside() -> None:
    rows = summarise({"spark_jvm": _result()})
    assert [r["source"] for r in rows] == ["spark_jvm"] * 3
    raw, count, grown = rows  # the fixed layout first, raw rows before the count
    assert raw["ratio"] == 0.97 and raw["goal"] == ">= 0.95" and raw["value"] == 95
    assert "1M records" in raw["figure"] and "rows into `noop`" in raw["figure"]
    assert raw["baseline"] == "Spark's Kafka source 100"
    assert "min-max 0.92-0.99 over 3 rounds" in raw["spread"]
    assert "in batches 0.99 (0.97-1.01)" in raw["spread"]
    assert "Python source `ordered-kafka` 60 rows/s, ratio 0.6 (0.55-0.7)" in raw["spread"]
    assert raw["spread"].endswith("load 1.2-2.0")
    assert "3M records" in count["figure"] and "count()" in count["figure"]
    assert grown["goal"] == ">= 0.9" and "through an expansion (4 -> 8" in grown["figure"]


def test_a_chaos_run_beside_is_named() -> None:
    result = _result()
    result["chaos_run_beside_per_round"] = [True, False, False]
    rows = summarise({"spark_jvm": result})
    assert all("(a chaos run beside)" in r["spread"] for r in rows)


def test_add_puts_the_rows_in_the_summary() -> None:
    script = load_script("bench_table")
    summary = {
        "quick": True,
        "seconds": 10.0,
        "benchmarks": ["spark"],
        "rows": [{"figure": "s", "source": "spark", "value": 2}],
        "dates": {"spark": "2026-01-02"},
    }
    merged = script.merge(summary, "spark_jvm", _result())
    assert [r["source"] for r in merged["rows"]] == ["spark"] + ["spark_jvm"] * 3
    assert merged["dates"]["spark_jvm"] == "2026-12-07T02:00:00+00:00"
