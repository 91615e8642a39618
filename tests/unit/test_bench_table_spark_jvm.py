"""The JVM Spark source's rows of the performance table (``benchmarks/bench_spark_jvm.py``),
and the Python source's, which come from the same run's 1M and 3M reads."""

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
        "in_batches_ratio_python_to_kafka": _spread(0.65, 0.6, 0.72),
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


def test_one_row_per_workload_and_source_with_its_goal() -> None:
    rows = summarise({"spark_jvm": _result()})
    assert [r["source"] for r in rows] == ["spark_jvm"] * 6
    raw, count, grown = rows[:3]  # the fixed layout first, raw rows before the count
    assert raw["ratio"] == 0.97 and raw["goal"] == ">= 0.95" and raw["value"] == 95
    assert "1M records" in raw["figure"] and "rows into `noop`" in raw["figure"]
    assert raw["baseline"] == "Spark's Kafka source 100"
    assert "min-max 0.92-0.99 over 3 rounds" in raw["spread"]
    assert "in batches 0.99 (0.97-1.01)" in raw["spread"]
    assert raw["spread"].endswith("load 1.2-2.0")
    assert "3M records" in count["figure"] and "count()" in count["figure"]
    assert grown["goal"] == ">= 0.9" and "through an expansion (4 -> 8" in grown["figure"]
    # The Python source in the same rounds, one row per workload, its own goal.
    python = rows[3:]
    assert all(r["figure"].startswith("Spark source `ordered-kafka` (Python), ") for r in python)
    assert [r["ratio"] for r in python] == [0.6] * 3
    assert all(r["goal"] == ">= 0.9" for r in python)
    assert python[0]["value"] == 60 and python[0]["baseline"] == "Spark's Kafka source 100"
    assert "1M records" in python[0]["figure"] and "3M records" in python[1]["figure"]
    assert (
        python[0]["spread"]
        == "min-max 0.55-0.7 over 3 rounds; in batches 0.65 (0.6-0.72); load 1.2-2.0"
    )


def test_without_the_python_source_only_the_jvm_rows() -> None:
    result = _result()
    for w in result["workloads"].values():
        del w["end_to_end_ratio_python_to_kafka"]
    assert len(summarise({"spark_jvm": result})) == 3


def _bench_spark(records: int) -> dict[str, Any]:
    """A ``bench_spark.py`` result of a ``records`` read."""
    return {
        "records": records,
        "source_rows_per_s": {"ordered-kafka": {"median": 50.0}, "kafka": {"median": 40.0}},
        "source_ratio": _spread(1.17, 1.1, 1.24),
        "sink_rows_per_s": {"ordered-kafka": {"median": 200.0}, "kafka": {"median": 180.0}},
        "sink_ratio": _spread(1.1, 1.0, 1.2),
        "planning_ms_direct": {"p95_ms": 10.0, "median_ms": 6.0, "max_ms": 20.0},
    }


def test_the_python_source_from_a_read_below_1m_stays_out_of_the_table() -> None:
    small = [r["figure"] for r in summarise({"spark": _bench_spark(400_000)})]
    assert small == [
        "Spark sink, `ordered-kafka` (rows/s)",
        "Spark planning per micro-batch, p95 (ms)",
    ]
    large = summarise({"spark": _bench_spark(1_000_000)})
    assert large[0]["figure"].startswith("Spark source, `ordered-kafka`, 1M records, end to end")
    assert large[0]["ratio"] == 1.17 and len(large) == 3


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
    assert [r["source"] for r in merged["rows"]] == ["spark"] + ["spark_jvm"] * 6
    assert merged["dates"]["spark_jvm"] == "2026-12-07T02:00:00+00:00"
