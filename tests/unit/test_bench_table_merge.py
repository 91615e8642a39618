"""``scripts/bench_table.py --add``: one benchmark's rows refreshed, every other row kept."""

from __future__ import annotations

from typing import Any

from helpers import load_script


def _script() -> Any:
    return load_script("bench_table")


def _jvm(median: float) -> dict[str, Any]:
    return {
        "date": "2026-11-27T05:00:00+00:00",
        "rounds": 3,
        "records_per_s": {"plain": {"median": 100}, "ordered": {"median": 97}},
        "ratio": {"median": median, "q1": 0.9, "q3": 1.0, "min": 0.9, "max": 1.0},
        "load_average_1m": {"per_round": [1.0, 2.5]},
        "cpu_us_per_record": {"plain": {"median": 3.0}, "ordered": {"median": 3.1}},
        "cpu_ratio": {"median": 1.25},
    }


def test_add_replaces_only_that_benchmarks_rows_in_benchmark_order() -> None:
    script = _script()
    other = {"figure": "f", "source": "linear_hash", "value": 1}
    later = {"figure": "s", "source": "spark", "value": 2}
    summary = {
        "quick": True,
        "seconds": 10.0,
        "benchmarks": ["linear_hash", "spark"],
        "rows": [other, later],
        "dates": {"linear_hash": "2026-01-01", "spark": "2026-01-02"},
    }
    once = script.merge(summary, "jvm", _jvm(0.97))
    assert [r["source"] for r in once["rows"]] == ["linear_hash", "spark", "jvm", "jvm"]
    assert once["rows"][2]["ratio"] == 0.97 and once["rows"][2]["goal"] == ">= 0.95"
    assert "load 1.00-2.50" in once["rows"][2]["spread"]
    assert once["rows"][3]["ratio"] == 0.8 and once["rows"][3]["value"] == 3.1
    assert once["dates"]["jvm"] == "2026-11-27T05:00:00+00:00"
    assert once["benchmarks"] == ["linear_hash", "spark", "jvm"]
    twice = script.merge(once, "jvm", _jvm(0.99))
    assert [r["source"] for r in twice["rows"]] == ["linear_hash", "spark", "jvm", "jvm"]
    assert twice["rows"][2]["ratio"] == 0.99
    assert twice["rows"][:2] == [other, later] and twice["seconds"] == 10.0
    assert summary["rows"] == [other, later]  # the input is not changed
