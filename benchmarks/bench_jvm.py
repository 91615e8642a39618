"""Benchmark: a Java ``KafkaProducer`` with the ordered plugins against a plain one.

Not a test. Run as ``.venv/bin/python benchmarks/bench_jvm.py`` (starts its own cluster
in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a running one.
Needs the ordered jar (``bash scripts/setup.sh`` builds it; ``ordered jvm-jar`` prints
it) and Kafka's tools in the jars cache (fetched when missing). Prints the figures and
writes ``benchmarks/results/jvm.json``.

Measured in one run, one broker, one topic of 4 partitions, adopted (``initial 4,
active 4``: both sides spread the keys evenly over the same 4 partitions, so neither
gets bigger batches from the layout; an expanded layout such as 3 -> 4 gives two
partitions a sixth of the keys each and the other two a third, which changes batching,
not the cost of routing, the same code either way). Each side
is a fresh JVM running ``benchmarks/jvm/KeyedPerf.java`` (compiled once here): one
``KafkaProducer`` with kafka-clients 4.x and its defaults, keyed 100-byte records
(``--keys`` keys drawn from the same seeded sequence on both sides), ``--warmup``
untimed records, then ``--records`` timed ones, as fast as ``send()`` takes them, timed
from the first timed ``send()`` to the end of ``flush()``. The sides differ only in
``partitioner.class`` + ``interceptor.classes`` + ``ordered.zookeeper.*`` (the ordered
side) versus nothing (plain: Kafka's default ``murmur2 % n`` over the same 4
partitions). Rounds alternate which side runs first; the ratio (ordered / plain
records/s) is taken per round and reported as median, quartiles, min and max over the
rounds, beside each side's median records/s and the load averages. Beside it, the
JVM's CPU time (every thread: the sender's ``partition()`` and ``onSend``, the I/O
thread's acks) over the timed records, per record, and the ratio of the two per round
(ordered / plain: the plugins' cost, which other work on a shared machine moves less
than it moves the wall clock); and each JVM's CPU over its whole life (start-up,
ZooKeeper session, warm-up) per record sent. Kafka's own
``ProducerPerformance`` sends keyless records, which no partitioner routes by; the
loop of ``KeyedPerf`` is its loop with keys. Goal: >= 0.95x.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import _common
import _jvm
from _common import environment

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "jvm.json"
SOURCE = HERE / "jvm" / "KeyedPerf.java"


def run_side(
    classpath: str, topic: str, props: dict[str, str], args: argparse.Namespace
) -> dict[str, Any]:
    """One JVM, one producer: its JSON line."""
    cmd = [
        _jvm.java_tool("java"),
        "-Xmx512m",
        "-cp",
        classpath,
        "KeyedPerf",
        "--topic",
        topic,
        "--records",
        str(args.records),
        "--warmup",
        str(args.warmup),
        "--keys",
        str(args.keys),
        "--size",
        "100",
    ]
    for key, value in props.items():
        cmd += ["--property", f"{key}={value}"]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"KeyedPerf failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    # The JVM's CPU over its whole life (start, warm-up, timed records), per record sent:
    # a figure the other work of a shared machine moves less than the wall clock.
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    result["life_cpu_us_per_record"] = cpu * 1e6 / (args.records + args.warmup)
    if result["errors"]:
        raise SystemExit(f"KeyedPerf: {result['errors']} records failed")
    return result


def main() -> None:
    """Run the benchmark, print the results, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="timed records per side")
    parser.add_argument("--warmup", type=int, default=200_000, help="untimed records first")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=7, help="paired rounds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with _jvm.jvm_run(args, "jvm") as run:
        _jvm.javac(run.classes, run.tools.classpath, [SOURCE])
        classpath = f"{run.classes}:{run.jar}:{run.tools.classpath}"
        topic = f"bench-jvm-{uuid.uuid4().hex[:8]}"
        KafkaAdmin(run.bootstrap, timeout=30.0).create_topics([topic], 4)
        Controller(LayoutStore(run.kz, run.root), KafkaAdmin(run.bootstrap)).adopt(topic)
        plain = {"bootstrap.servers": run.bootstrap}
        ordered = {
            **plain,
            **_jvm.ORDERED_PRODUCER_PLUGINS,
            "ordered.zookeeper.connect": run.zookeeper,
            "ordered.zookeeper.root": run.root,
        }
        sides = {"plain": plain, "ordered": ordered}
        rates: dict[str, list[float]] = {"plain": [], "ordered": []}
        cpu: dict[str, list[float]] = {"plain": [], "ordered": []}
        life: dict[str, list[float]] = {"plain": [], "ordered": []}
        ratios: list[float] = []
        cpu_ratios: list[float] = []
        loads: list[float] = []
        for r in range(args.rounds):
            order = ["plain", "ordered"] if r % 2 == 0 else ["ordered", "plain"]
            got, used = {}, {}
            for side in order:
                figures = run_side(classpath, topic, sides[side], args)
                got[side] = figures["records_per_s"]
                used[side] = figures["timed_cpu_us_per_record"]
                life[side].append(figures["life_cpu_us_per_record"])
                rates[side].append(got[side])
                cpu[side].append(used[side])
            ratios.append(got["ordered"] / got["plain"])
            cpu_ratios.append(used["ordered"] / used["plain"])
            loads.append(os.getloadavg()[0])
            print(
                f"round {r + 1}/{args.rounds}: plain {got['plain']:.0f}/s, ordered "
                f"{got['ordered']:.0f}/s, ratio {ratios[-1]:.3f}; CPU per record plain "
                f"{used['plain']:.2f} us, ordered {used['ordered']:.2f} us (load {loads[-1]:.2f})",
                flush=True,
            )
    results = {
        **environment("jvm"),
        **_jvm.jvm_facts(run),
        "records": args.records,
        "warmup": args.warmup,
        "keys": args.keys,
        "value_bytes": 100,
        "rounds": args.rounds,
        "layout": {"initial": 4, "active": 4},
        "method": (
            "fresh JVM per side and round, KeyedPerf (ProducerPerformance's loop with keys), "
            "kafka-clients defaults; ratio ordered/plain per round, rounds alternate order"
        ),
        "records_per_s": {side: _jvm.rate_summary(v) for side, v in rates.items()},
        "ratio": _jvm.ratio_summary(ratios),
        "cpu_us_per_record": {side: _jvm.cpu_summary(v) for side, v in cpu.items()},
        "life_cpu_us_per_record": {side: _jvm.cpu_summary(v) for side, v in life.items()},
        "cpu_ratio": {
            "median": round(statistics.median(cpu_ratios), 3),
            "min": round(min(cpu_ratios), 3),
            "max": round(max(cpu_ratios), 3),
            "rounds": [round(x, 3) for x in cpu_ratios],
        },
        "goal": ">= 0.95",
        "load_average_1m": {"start": round(run.load_start[0], 2), "per_round": loads},
        "cpus": os.cpu_count(),
    }
    _common.write_results(args.out, results)
    med = results["ratio"]
    print(
        f"ordered/plain median {med['median']} (quartiles {med['q1']}-{med['q3']}, "
        f"min {med['min']}, max {med['max']} over {args.rounds}); plain median "
        f"{results['records_per_s']['plain']['median']}/s, ordered median "
        f"{results['records_per_s']['ordered']['median']}/s; CPU per record ordered/plain "
        f"median {results['cpu_ratio']['median']}; wrote {args.out}"
    )


if __name__ == "__main__":
    sys.exit(main())
