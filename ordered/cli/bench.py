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
from pathlib import Path
from typing import Any, Final

from coordinator.kernel.errors import OrderedError, UsageError
from ordered import devcluster
from ordered.cli.bench_aio import AIO_QUICK
from ordered.cli.bench_calls import CALLS_QUICK
from ordered.cli.bench_rows import render_markdown, render_text, summarise
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
    "calls": ("bench_calls.py", [], CALLS_QUICK, True),
    "aio": ("bench_aio.py", [], AIO_QUICK, True),
    "scale": ("bench_scale.py", [], ["--quick"], True),
    "spark": (
        "bench_spark.py",
        # The table takes the source's figures from reads of 1M records or more
        # (bench_rows.SPARK_SOURCE_MIN_RECORDS); the quick run's read stays below.
        ["--records", "1000000"],
        ["--records", "100000", "--sink-records", "60000", "--repeats", "2",
         "--sink-repeats", "3", "--planning-samples", "30"],
        True,
    ),
    "jvm": (
        "bench_jvm.py",
        [],
        ["--records", "300000", "--warmup", "100000", "--rounds", "3"],
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
    emit(summary, render_text(rows) + f"\nwrote {target}", args.json)
    return 0
