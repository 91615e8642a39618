"""``ordered bench [--quick] [--json]``: every benchmark, one table, one JSON.

Runs the scripts of ``benchmarks/`` (a source checkout's; they are not installed) against
one local cluster that it starts in a temporary directory, then reads each script's
JSON and prints one table of figures, each with the baseline measured in the same run
and its spread over rounds. ``--json`` prints the table as JSON; the table is also
written to ``benchmarks/results/bench.json`` (``bench-quick.json`` with ``--quick``),
which is what the README's performance table is generated from
(``scripts/bench_table.py``).

``--quick`` shrinks every benchmark to fit in about five minutes on two cores.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, Final

from coordinator import devcluster
from coordinator.client.errors import OrderedError, UsageError
from ordered.cli.output import emit, progress

__all__ = ["BENCHMARKS", "add_parsers", "render_markdown", "summarise"]

REPO: Final = Path(__file__).resolve().parents[2]
BENCH_DIR: Final = REPO / "benchmarks"

# name -> (script, full arguments, quick arguments, needs the cluster)
BENCHMARKS: Final[dict[str, tuple[str, list[str], list[str], bool]]] = {
    "linear_hash": ("bench_linear_hash.py", [], ["--keys", "30000", "--repeats", "5"], False),
    "producer": (
        "bench_producer.py",
        [],
        [
            "--pairs", "5", "--pair-records", "60000", "--records", "100000",
            "--repeats", "1", "--seal-runs", "3", "--client-records", "60000",
            "--client-repeats", "2", "--steady-seconds", "2",
        ],
        True,
    ),
    "consumer": (
        "bench_consumer.py",
        [],
        ["--records", "100000", "--repeats", "3", "--latency-samples", "10"],
        True,
    ),
    "scale": ("bench_scale.py", [], ["--quick"], True),
    "spark": (
        "bench_spark.py",
        [],
        ["--records", "100000", "--sink-records", "60000", "--repeats", "2",
         "--sink-repeats", "3", "--planning-samples", "30"],
        True,
    ),
}  # fmt: skip

_OUT_FLAG: Final = {"linear_hash": "--output"}


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``bench``."""
    p = sub.add_parser(
        "bench",
        help="run every benchmark against a local cluster and print one table",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    p.add_argument("--quick", action="store_true", help="small runs (about 5 minutes)")
    p.add_argument("--json", action="store_true", help="print the table as JSON")
    p.add_argument(
        "--only",
        nargs="+",
        choices=sorted(BENCHMARKS),
        default=None,
        metavar="NAME",
        help=f"run only these ({', '.join(sorted(BENCHMARKS))})",
    )
    p.add_argument(
        "--results",
        type=Path,
        default=None,
        help="directory for the benchmarks' JSON (default: benchmarks/results, "
        "benchmarks/results/quick with --quick)",
    )
    p.set_defaults(func=_bench)


# --- reading the results ------------------------------------------------------------


def _get(data: Any, *path: str) -> Any:
    for key in path:
        if not isinstance(data, dict) or key not in data:
            return None
        data = data[key]
    return data


def _row(
    figure: str,
    value: Any,
    baseline: Any = None,
    ratio: Any = None,
    spread: Any = None,
    goal: str = "report",
    source: str = "",
) -> dict[str, Any]:
    return {
        "figure": figure,
        "value": value,
        "baseline": baseline,
        "ratio": ratio,
        "spread": spread,
        "goal": goal,
        "source": source,
    }


def _linear_hash(d: dict[str, Any]) -> list[dict[str, Any]]:
    b = _get(d, "results", "bytes") or {}
    return [
        _row(
            "`Layout.partition_for`, bytes keys (ns/key)",
            b.get("layout_ns"),
            f"bare `mmh3 % n` {b.get('bare_ns')}",
            b.get("layout_ratio"),
            None,
            "<= 2x",
            "linear_hash",
        )
    ]


def _producer(d: dict[str, Any]) -> list[dict[str, Any]]:
    h = _get(d, "headline") or {}
    cost = _get(d, "client_cost_no_broker") or {}
    lat = _get(d, "latency") or {}
    seal = _get(d, "seal_with_10_producers") or {}

    def spread(s: Any) -> str | None:
        return (
            None
            if not s
            else f"quartiles {s.get('q1')}-{s.get('q3')} over {len(s.get('rounds', []))}"
        )

    dvp = h.get("default_vs_plain") or {}
    hvp = h.get("header_on_vs_plain") or {}
    return [
        _row(
            "OrderedProducer, default configuration, end to end (records/s)",
            "paired rounds",
            f"plain median {h.get('plain_per_s_median')}/s",
            dvp.get("median"),
            spread(dvp),
            ">= 0.9",
            "producer",
        ),
        _row(
            "... opt-in epoch header, end to end",
            "paired rounds",
            "plain",
            hvp.get("median"),
            spread(hvp),
            "report",
            "producer",
        ),
        _row(
            "... client-side cost without a broker (ns/record)",
            _get(cost, "ordered_default", "ns_per_record"),
            f"plain {_get(cost, 'plain', 'ns_per_record')}",
            _get(cost, "ordered_default", "ratio_vs_plain"),
            None,
            "report",
            "producer",
        ),
        _row(
            "... produce p99 during an expansion vs steady (ms)",
            _get(lat, "ordered", "during_expansion", "p99_ms"),
            f"steady {_get(lat, 'ordered', 'steady', 'p99_ms')}",
            None,
            f"plain beside it {_get(lat, 'plain', 'steady', 'p99_ms')} / "
            f"{_get(lat, 'plain', 'during_expansion', 'p99_ms')}",
            "report",
            "producer",
        ),
        _row(
            "expand -> sealed, 10 producers, median (s)",
            seal.get("median_s"),
            None,
            None,
            f"max {seal.get('max_s')} over {len(seal.get('runs', []))}",
            "< 1 s",
            "producer",
        ),
    ]


def _consumer(d: dict[str, Any]) -> list[dict[str, Any]]:
    t = _get(d, "throughput") or {}
    r = _get(d, "default_ratio_vs_plain") or {}
    svc = _get(d, "unblock_latency_position_service") or {}
    fb = _get(d, "unblock_latency_fallback") or {}
    rows = [
        _row(
            "OrderedConsumer, default configuration (records/s)",
            _get(t, "ordered_default", "median_per_s"),
            f"plain {_get(t, 'plain', 'median_per_s')}",
            r.get("median"),
            f"range {r.get('range')}",
            ">= 0.9",
            "consumer",
        )
    ]
    for name, label in (
        ("ordered_header_audit_every_16", "... header audit 1 in 16"),
        ("ordered_key_audit_every_record", "... key audit on every record"),
        ("ordered_full_audit", "... full audit"),
    ):
        rows.append(
            _row(
                label,
                _get(t, name, "median_per_s"),
                "plain",
                _get(t, name, "ratio_median_vs_plain"),
                None,
                "report",
                "consumer",
            )
        )
    rows.append(
        _row(
            "gate unblock p50 / p99, position service (ms)",
            f"{svc.get('p50_ms')} / {svc.get('p99_ms')}",
            f"fallback poll {fb.get('p50_ms')} / {fb.get('p99_ms')}",
            None,
            f"{svc.get('samples')} samples",
            "<= 100 ms",
            "consumer",
        )
    )
    return rows


def _spark(d: dict[str, Any]) -> list[dict[str, Any]]:
    src = _get(d, "source_rows_per_s") or {}
    steady = _get(d, "source_steady_rows_per_s") or {}
    startup = _get(d, "source_startup_s") or {}
    sink = _get(d, "sink_rows_per_s") or {}
    plan = _get(d, "planning_ms_direct") or {}

    def ratio(name: str) -> tuple[Any, str | None]:
        # Paired rounds: {"median", "min", "max", "rounds"}; older files: one median.
        paired = _get(d, f"{name}_ratio")
        if isinstance(paired, dict):
            return paired.get("median"), (
                f"rounds {paired.get('rounds')} (min {paired.get('min')}, max {paired.get('max')})"
            )
        return _get(d, f"{name}_ratio_median"), None

    source_ratio, source_spread = ratio("source")
    sink_ratio, sink_spread = ratio("sink")
    rows = [
        _row(
            "Spark source, `ordered-kafka`, end to end with query start-up (rows/s)",
            _get(src, "ordered-kafka", "median"),
            f"Spark's Kafka source {_get(src, 'kafka', 'median')}",
            source_ratio,
            source_spread,
            ">= 0.9",
            "spark",
        )
    ]
    steady_ratio, steady_spread = ratio("source_steady")
    if steady_ratio is not None:
        rows.append(
            _row(
                "... steady state: inside micro-batches only (rows/s)",
                _get(steady, "ordered-kafka", "median"),
                f"Spark's Kafka source {_get(steady, 'kafka', 'median')}",
                steady_ratio,
                steady_spread,
                "report",
                "spark",
            )
        )
    if startup:
        rows.append(
            _row(
                "... start-up per query, outside micro-batches, median (s)",
                _get(startup, "ordered-kafka", "median"),
                f"Spark's Kafka source {_get(startup, 'kafka', 'median')}",
                None,
                f"rounds {_get(startup, 'ordered-kafka', 'rounds')} vs "
                f"{_get(startup, 'kafka', 'rounds')}",
                "report",
                "spark",
            )
        )
    return [
        *rows,
        _row(
            "Spark sink, `ordered-kafka` (rows/s)",
            _get(sink, "ordered-kafka", "median"),
            f"Spark's Kafka sink {_get(sink, 'kafka', 'median')}",
            sink_ratio,
            sink_spread,
            ">= 0.9",
            "spark",
        ),
        _row(
            "Spark planning per micro-batch, p95 (ms)",
            plan.get("p95_ms"),
            None,
            None,
            f"median {plan.get('median_ms')}, max {plan.get('max_ms')}",
            "<= 50 ms",
            "spark",
        ),
    ]


def _backlog_ratios(rows: list[dict[str, Any]]) -> str:
    """The backlog rows' ratios to plain, by batch size and fetch backoff."""
    parts = [
        f"{r['mode'].removeprefix('backlog, ')} "
        f"{r.get('ratio_median_of_rounds', r['ratio_vs_plain'])}"
        + (
            f" (CPU per record {r['cpu_ratio_median_of_rounds']})"
            if "cpu_ratio_median_of_rounds" in r
            else ""
        )
        + (
            f", in lockstep {r['lockstep_ratio_median_of_rounds']} "
            f"(CPU per record {r['lockstep_cpu_ratio_median_of_rounds']})"
            if "lockstep_ratio_median_of_rounds" in r
            else ""
        )
        for r in rows
        if r.get("mode", "").startswith("backlog") and "ratio_vs_plain" in r
    ]
    return f"ratio (median of rounds) {'; '.join(parts)}; " if parts else ""


def _load(d: dict[str, Any]) -> str:
    """``; load L`` when the figure came with the machine's 1-minute load average."""
    load = d.get("load_average")
    return f"; load {load[0]}" if load else ""


def _scale(d: dict[str, Any]) -> list[dict[str, Any]]:
    rows = []
    for b in _get(d, "barrier") or []:
        rows.append(
            _row(
                f"barrier: expand -> sealed, {b['producers']} producer processes, median (s)",
                b["median_s"],
                None,
                None,
                f"max {b['max_s']} over {b['rounds']}" + _load(b),
                "<= 1 s at 50" if b["producers"] == 50 else "report",
                "scale",
            )
        )
    c = _get(d, "coordinator")
    if c:
        rows.append(
            _row(
                f"coordinator: relay p99, {c['topics']} topics, {c['groups_waiting']} groups "
                "waiting (ms)",
                c["relay_p99_ms"],
                None,
                None,
                f"p50 {c['relay_p50_ms']}, max {c['relay_max_ms']} over "
                f"{c.get('relay_samples', '?')}"
                + (
                    f"; one full round p50 {c['relay_round_p50_ms']}, p99 "
                    f"{c['relay_round_p99_ms']} ms"
                    if "relay_round_p99_ms" in c
                    else ""
                )
                + f"; daemon CPU {c['daemon_cpu_relaying']} (idle {c['daemon_cpu_idle']}); "
                f"ZooKeeper {c['zookeeper_requests_per_s_relaying']} req/s (idle "
                f"{c['zookeeper_requests_per_s_idle']})" + _load(c),
                "<= 50 ms",
                "scale",
            )
        )
    z = _get(d, "zookeeper_load")
    if z:
        rows.append(
            _row(
                "ZooKeeper requests/s per consumer at full speed",
                z["zookeeper_requests_per_s_full_speed"],
                f"one server answers {z['zookeeper_server_requests_per_s']}/s",
                z["ratio_vs_plain"],
                (
                    "ratio: the largest batches, 10 ms for both, read in lockstep; "
                    if z.get("ratio_method") == "lockstep"
                    else ""
                )
                + f"idle {z['zookeeper_requests_per_s_idle']}/s; consumer at "
                f"{z['full_speed_records_per_s']} records/s (plain {z['plain_records_per_s']}); "
                + _backlog_ratios(z.get("rows", []))
                + f"~{z['consumers_per_3_node_ensemble_at_full_speed']} consumers per 3-node "
                "ensemble" + _load(z),
                "<= 20 req/s, ratio >= 0.9",
                "scale",
            )
        )
    g = _get(d, "gate_wait")
    if g:
        on = [r["child_gated_s"] for r in g if r["favour_sources"]]
        off = [r["child_gated_s"] for r in g if not r["favour_sources"]]
        if on and off:
            rows.append(
                _row(
                    "gate wait of a new partition under a lagging consumer, sources favoured (s)",
                    round(sorted(on)[len(on) // 2], 3),
                    f"not favoured {round(sorted(off)[len(off) // 2], 3)} s",
                    round(sorted(on)[len(on) // 2] / max(sorted(off)[len(off) // 2], 1e-9), 3),
                    f"rounds {on} vs {off}",
                    "report",
                    "scale",
                )
            )
    p = _get(d, "partitions")
    if p:
        steps = ", ".join(f"{s['to']}: {s['seconds']} s" for s in p["steps"])
        gates = ", ".join(f"{g['partitions']}: {g['gate_ns_per_record']}" for g in p["gate"])
        rows.append(
            _row(
                "expand under traffic, seconds per step (to partitions)",
                steps,
                None,
                None,
                f"gate rule ns/record by partitions {gates}",
                "report",
                "scale",
            )
        )
        rows.append(
            _row(
                f"layout history in ZooKeeper after {p['history_epochs']} epochs (bytes)",
                p["history_bytes"],
                None,
                None,
                f"{p['history_znodes']} znodes"
                + (
                    f"; read in {p['history_load_ms']} ms"
                    + (
                        f", {p['history_reload_ms']} ms after one more change"
                        if "history_reload_ms" in p
                        else ""
                    )
                    + "; gate rule "
                    f"{p['history_gate_ns_per_record']} ns/record on it"
                    if "history_load_ms" in p
                    else ""
                ),
                "report",
                "scale",
            )
        )
        c = p.get("history_compaction")
        if c:
            rows.append(
                _row(
                    "layout history after compaction, every partition trimmed (bytes)",
                    c["bytes_after"],
                    p["history_bytes"],
                    None,
                    f"{c['epochs_after']} epoch(s), {c['znodes_after']} znodes, read in "
                    f"{c['load_ms_after']} ms; {c['dropped']} epochs dropped in "
                    f"{c['compact_ms']} ms ({c['dropped_before_trim']} before the trim)",
                    "report",
                    "scale",
                )
            )
    return rows


_EXTRACT: Final[dict[str, Callable[[dict[str, Any]], list[dict[str, Any]]]]] = {
    "linear_hash": _linear_hash,
    "producer": _producer,
    "consumer": _consumer,
    "spark": _spark,
    "scale": _scale,
}


def summarise(results: dict[str, dict[str, Any]]) -> list[dict[str, Any]]:
    """The table's rows from each benchmark's JSON (``name -> parsed JSON``)."""
    rows: list[dict[str, Any]] = []
    for name in BENCHMARKS:
        if name in results:
            rows += _EXTRACT[name](results[name])
    return rows


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, float):
        return f"{value:g}"
    return str(value)


def render_markdown(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table (the README's performance table)."""
    lines = [
        "| figure | value | baseline (same run) | ratio | spread | goal |",
        "|---|---|---|---|---|---|",
    ]
    for r in rows:
        cells = [r["figure"], r["value"], r["baseline"], r["ratio"], r["spread"], r["goal"]]
        lines.append("| " + " | ".join(_cell(c).replace("|", "/") for c in cells) + " |")
    return "\n".join(lines)


def _render_text(rows: list[dict[str, Any]]) -> str:
    out = []
    for r in rows:
        ratio = "" if r["ratio"] is None else f"  ratio {_cell(r['ratio'])}"
        base = "" if r["baseline"] is None else f"  vs {_cell(r['baseline'])}"
        spread = "" if r["spread"] is None else f"  ({_cell(r['spread'])})"
        out.append(f"{r['figure']}: {_cell(r['value'])}{base}{ratio}{spread}  [goal {r['goal']}]")
    return "\n".join(out)


# --- running ------------------------------------------------------------------------


def _run_one(
    name: str, quick: bool, results: Path, servers: tuple[str, str] | None
) -> dict[str, Any]:
    script, full, short, needs_cluster = BENCHMARKS[name]
    out = results / f"{name}.json"
    argv = [sys.executable, str(BENCH_DIR / script), *(short if quick else full)]
    argv += [_OUT_FLAG.get(name, "--out"), str(out)]
    if needs_cluster and servers is not None:
        argv += ["--bootstrap", servers[0], "--zookeeper", servers[1]]
    started = time.monotonic()
    progress(f"bench: {name} ...")
    done = subprocess.run(argv, capture_output=True, text=True, cwd=REPO)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).strip().splitlines()[-15:])
        raise OrderedError(f"benchmark {name} failed (exit {done.returncode}):\n{tail}")
    progress(f"bench: {name} done in {time.monotonic() - started:.0f} s")
    data: dict[str, Any] = json.loads(out.read_text())
    return data


def _bench(args: argparse.Namespace) -> int:
    if not BENCH_DIR.is_dir():
        raise UsageError(
            f"ordered bench runs from a source checkout: {BENCH_DIR} is missing "
            "(git clone the project and run scripts/setup.sh)"
        )
    names = args.only or list(BENCHMARKS)
    results_dir = args.results or (
        BENCH_DIR / "results" / "quick" if args.quick else BENCH_DIR / "results"
    )
    results_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    results: dict[str, dict[str, Any]] = {}
    with tempfile.TemporaryDirectory(prefix="ordered-bench-") as tmp:
        servers = None
        if any(BENCHMARKS[n][3] for n in names):
            progress("bench: starting a local cluster")
            state = devcluster.up(Path(tmp))
            servers = (state.bootstrap_servers, state.zookeeper_connect)
        try:
            for name in names:
                results[name] = _run_one(name, args.quick, results_dir, servers)
        finally:
            if servers is not None:
                devcluster.down(Path(tmp))
    rows = summarise(results)
    summary = {
        "quick": bool(args.quick),
        "seconds": round(time.monotonic() - started, 1),
        "benchmarks": names,
        "rows": rows,
        "dates": {n: results[n].get("date") or results[n].get("timestamp") for n in results},
    }
    target = BENCH_DIR / "results" / ("bench-quick.json" if args.quick else "bench.json")
    target.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")
    emit(summary, _render_text(rows) + f"\nwrote {target}", args.json)
    return 0
