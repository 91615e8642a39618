"""The asyncio clients' rows of the performance table (``benchmarks/bench_aio.py``)."""

from __future__ import annotations

from typing import Any

from helpers import load_script

from ordered.cli.bench import BENCHMARKS, summarise


def _part(ours: list[int], theirs: list[int]) -> dict[str, Any]:
    ratios = sorted(o / t for o, t in zip(ours, theirs, strict=True))
    return {
        "ours": ours,
        "theirs": theirs,
        "ratio": {
            "median": round(ratios[len(ratios) // 2], 3),
            "min": round(ratios[0], 3),
            "max": round(ratios[-1], 3),
        },
        "ours_median": sorted(ours)[len(ours) // 2],
        "theirs_median": sorted(theirs)[len(theirs) // 2],
    }


def _result() -> dict[str, Any]:
    return {
        "date": "2026-12-07T12:00:00+00:00",
        "records": 1_000_000,
        "record_bytes": 100,
        "lag_records": 100_000,
        "goals": {
            "producer": ">= 0.9",
            "consumer": ">= 0.9",
            "consumer_same_backoff": "report",
            "lag": "<= 50 ms or <= 1.5x",
        },
        "throughput": {
            "producer": _part([100, 90, 110], [100, 100, 100]),
            "consumer": _part([300, 310, 290], [100, 100, 100]),
            "consumer_same_backoff": _part([95, 97, 99], [100, 100, 100]),
        },
        "lag": {
            "ours": {"max_ms": 30.0, "rounds": [{"max_ms": 30.0}, {"max_ms": 20.0}]},
            "theirs": {"max_ms": 25.0, "rounds": [{"max_ms": 25.0}, {"max_ms": 10.0}]},
            "ratio": 1.2,
        },
        "load_average_1m_per_round": [1.5, 2.5],
    }


def test_a_row_per_throughput_part_then_the_loop_lag() -> None:
    rows = summarise({"aio": _result()})
    assert [r["source"] for r in rows] == ["aio"] * 4
    producer, consumer, same, lag = rows
    assert producer["figure"].startswith("OrderedAIOProducer")
    assert "1M keyed 100 B records" in producer["figure"]
    assert producer["value"] == 100 and producer["baseline"] == "AIOProducer 100"
    assert producer["ratio"] == 1.0 and producer["goal"] == ">= 0.9"
    assert producer["spread"] == "range [0.9, 1.1] over 3 rounds; load 1.5-2.5"
    assert "backlog of 1M" in consumer["figure"] and "each client's defaults" in consumer["figure"]
    assert consumer["ratio"] == 3.0 and consumer["baseline"] == "AIOConsumer 100"
    assert same["figure"].startswith("... `fetch.queue.backoff.ms=10`")
    assert same["ratio"] == 0.97 and same["goal"] == "report"
    assert lag["value"] == 30.0 and lag["baseline"] == "AIOProducer + AIOConsumer 25.0"
    assert lag["ratio"] == 1.2 and lag["goal"] == "<= 50 ms or <= 1.5x"
    assert lag["spread"].startswith("rounds [30.0, 20.0] vs [25.0, 10.0]")


def test_a_run_without_a_part_has_no_row_for_it() -> None:
    result = _result()
    del result["throughput"]["consumer_same_backoff"]
    del result["lag"]
    assert [r["figure"].split(" ")[0] for r in summarise({"aio": result})] == [
        "OrderedAIOProducer,",
        "OrderedAIOConsumer",
    ]


def test_ordered_bench_runs_it_and_add_merges_it_in_bench_order() -> None:
    assert BENCHMARKS["aio"][0] == "bench_aio.py" and BENCHMARKS["aio"][3]
    script = load_script("bench_table")
    summary = {
        "quick": True,
        "seconds": 10.0,
        "benchmarks": ["calls", "scale"],
        "rows": [{"figure": "s", "source": "scale"}, {"figure": "c", "source": "calls"}],
        "dates": {"calls": "2026-01-02", "scale": "2026-01-02"},
    }
    merged = script.merge(summary, "aio", _result())
    assert [r["source"] for r in merged["rows"]] == ["calls"] + ["aio"] * 4 + ["scale"]
    assert merged["dates"]["aio"] == "2026-12-07T12:00:00+00:00"
