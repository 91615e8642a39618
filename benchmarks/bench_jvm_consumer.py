"""Benchmark: ``OrderedKafkaConsumer`` against Kafka's ``KafkaConsumer``, reading a backlog.

Not a test. Run as ``.venv/bin/python benchmarks/bench_jvm_consumer.py`` (starts its own
cluster in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a running
one. Needs the ordered jar (``bash scripts/setup.sh``; ``ordered jvm-jar`` prints it) and
Kafka's tools in the jars cache (fetched when missing). Prints the figures and writes
``benchmarks/results/jvm_consumer.json``; ``scripts/bench_table.py --add jvm_consumer``
puts them in the README's table.

Two backlogs of ``--records`` keyed 100-byte records (``--keys`` keys) each, written by a
Java producer with the ordered plugins (``benchmarks/jvm/KeyedPerf.java``):

* steady: a topic adopted at 4 partitions, no layout change; timed from the first
  non-empty ``poll()`` to the last record. Goal >= 0.95x.
* expansion: a topic adopted at 2 partitions, half the records, expanded to 4, the other
  half, so the ordered side meets real gates (two partitions receive keys at a boundary
  and are held there until the sources' tails are read and committed); timed from
  ``subscribe()`` (the group's join and every gate's wait inside) to the last record.
  Goal >= 0.9x. The same reads timed from their first record are reported beside it (every
  gate's wait still inside, without the group's join and a fresh consumer's first reads).

Each side is a fresh JVM running ``benchmarks/jvm/ConsumePerf.java`` (compiled once
here): one consumer with kafka-clients 4.x and its defaults (auto-commit on), subscribed
in a fresh group, reading from the beginning until it has every record. The sides differ
only in the class and the ``ordered.zookeeper.*`` keys. Rounds alternate which side runs
first; the ratio (ordered / Kafka records/s) is taken per round and reported as median,
quartiles, min and max, beside each side's median records/s, the JVMs' CPU per record
and the load averages.
"""

from __future__ import annotations

import json
import os
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
RESULTS = HERE / "results" / "jvm_consumer.json"
SOURCES = [HERE / "jvm" / "KeyedPerf.java", HERE / "jvm" / "ConsumePerf.java"]
WORKLOADS = ("steady", "expansion")
GOALS = {"steady": ">= 0.95", "expansion": ">= 0.9"}


def _run(cmd: list[str]) -> dict[str, Any]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{cmd[4]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def write(classpath: str, topic: str, props: dict[str, str], records: int, keys: int) -> None:
    cmd = [_jvm.java_tool("java"), "-Xmx256m", "-cp", classpath, "KeyedPerf", "--topic", topic]
    cmd += ["--records", str(records), "--warmup", "0", "--keys", str(keys), "--size", "100"]
    for key, value in props.items():
        cmd += ["--property", f"{key}={value}"]
    result = _run(cmd)
    if result["errors"]:
        raise SystemExit(f"KeyedPerf: {result['errors']} records failed")


def read(classpath: str, topic: str, impl: str, props: dict[str, str]) -> dict[str, Any]:
    cmd = [_jvm.java_tool("java"), "-Xmx256m", "-cp", classpath, "ConsumePerf", "--topic", topic]
    cmd += ["--impl", impl]
    for key, value in {**props, "group.id": f"bench-{uuid.uuid4().hex[:8]}"}.items():
        cmd += ["--property", f"{key}={value}"]
    return _run(cmd)


def main() -> None:
    """Run the benchmark, print the results, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="the backlog")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    with _jvm.jvm_run(args, "jvm-consumer") as run:
        classpath = f"{run.classes}:{run.jar}:{run.tools.classpath}"
        _jvm.javac(run.classes, classpath, SOURCES, "-nowarn")
        zk = {"ordered.zookeeper.connect": run.zookeeper, "ordered.zookeeper.root": run.root}
        producer = {"bootstrap.servers": run.bootstrap, **_jvm.ORDERED_PRODUCER_PLUGINS, **zk}
        admin = KafkaAdmin(run.bootstrap, timeout=30.0)
        controller = Controller(LayoutStore(run.kz, run.root), KafkaAdmin(run.bootstrap))
        topics: dict[str, str] = {}
        for workload, first in (("steady", 4), ("expansion", 2)):
            topic = f"bench-jvmc-{workload}-{uuid.uuid4().hex[:8]}"
            admin.create_topics([topic], first)
            controller.adopt(topic)
            if workload == "steady":
                write(classpath, topic, producer, args.records, args.keys)
            else:
                half = args.records // 2
                write(classpath, topic, producer, half, args.keys)
                controller.expand(topic, 4, timeout=60)
                write(classpath, topic, producer, args.records - half, args.keys)
            topics[workload] = topic
        plain = {"bootstrap.servers": run.bootstrap}
        sides = {"kafka": plain, "ordered": {**plain, **zk}}
        rate_key = {"steady": "records_per_s", "expansion": "records_per_s_from_subscribe"}
        rates: dict[str, dict[str, list[float]]] = {
            w: {"kafka": [], "ordered": []} for w in WORKLOADS
        }
        cpu: dict[str, dict[str, list[float]]] = {
            w: {"kafka": [], "ordered": []} for w in WORKLOADS
        }
        ratios: dict[str, list[float]] = {w: [] for w in WORKLOADS}
        # The expansion read timed from its first record as well: the same gates' waits
        # without the group's join and a fresh consumer's first reads (reported, no goal).
        first_record: list[float] = []
        loads: list[float] = []
        for r in range(args.rounds):
            order = ["kafka", "ordered"] if r % 2 == 0 else ["ordered", "kafka"]
            line = []
            for workload in WORKLOADS:
                got: dict[str, float] = {}
                from_first: dict[str, float] = {}
                for side in order:
                    figures = read(classpath, topics[workload], side, sides[side])
                    if figures["records"] < args.records:
                        raise SystemExit(f"{side} read {figures['records']} of {args.records}")
                    got[side] = figures[rate_key[workload]]
                    from_first[side] = figures["records_per_s"]
                    rates[workload][side].append(got[side])
                    cpu[workload][side].append(figures["timed_cpu_us_per_record"])
                ratios[workload].append(got["ordered"] / got["kafka"])
                if workload == "expansion":
                    first_record.append(from_first["ordered"] / from_first["kafka"])
                line.append(
                    f"{workload}: kafka {got['kafka']:.0f}/s, ordered {got['ordered']:.0f}/s, "
                    f"ratio {ratios[workload][-1]:.3f}"
                )
            loads.append(os.getloadavg()[0])
            print(
                f"round {r + 1}/{args.rounds}: {'; '.join(line)} (load {loads[-1]:.2f})", flush=True
            )
    results: dict[str, Any] = {
        **environment("jvm_consumer"),
        **_jvm.jvm_facts(run),
        "records": args.records,
        "keys": args.keys,
        "value_bytes": 100,
        "rounds": args.rounds,
        "method": (
            "fresh JVM per side, workload and round, ConsumePerf, kafka-clients defaults "
            "(auto-commit on), fresh group reading from the beginning; ratio ordered/kafka "
            "per round, rounds alternate which side runs first"
        ),
        "workloads": {
            "steady": "adopted at 4 partitions, no layout change; timed from the first record",
            "expansion": (
                "adopted at 2 partitions, half the records, expanded to 4, the other half; "
                "timed from subscribe()"
            ),
        },
        "goals": GOALS,
        "load_average_1m": {"start": round(run.load_start[0], 2), "per_round": loads},
        "cpus": os.cpu_count(),
    }
    for workload in WORKLOADS:
        results[workload] = {
            "records_per_s": {side: _jvm.rate_summary(v) for side, v in rates[workload].items()},
            "ratio": _jvm.ratio_summary(ratios[workload]),
            "cpu_us_per_record": {side: _jvm.cpu_summary(v) for side, v in cpu[workload].items()},
        }
    results["expansion"]["ratio_from_first_record"] = _jvm.ratio_summary(first_record)
    _common.write_results(args.out, results)
    for workload in WORKLOADS:
        med = results[workload]["ratio"]
        print(
            f"{workload}: ordered/kafka median {med['median']} (quartiles {med['q1']}-"
            f"{med['q3']}, min {med['min']}, max {med['max']} over {args.rounds}; goal "
            f"{GOALS[workload]})"
        )
    late = results["expansion"]["ratio_from_first_record"]
    print(
        f"expansion timed from the first record: median {late['median']} (quartiles "
        f"{late['q1']}-{late['q3']})"
    )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
