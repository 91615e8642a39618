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
  Goal >= 0.9x.

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
import shutil
import statistics
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers
from confluent_kafka.admin import AdminClient, NewTopic

from coordinator.client.kafka_admin import KafkaAdmin
from coordinator.client.store import LayoutStore
from coordinator.control.controller import Controller
from ordered.cli.jvm import jar_path
from ordered.devcluster import jars

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results" / "jvm_consumer.json"
SOURCES = [HERE / "jvm" / "KeyedPerf.java", HERE / "jvm" / "ConsumePerf.java"]
WORKLOADS = ("steady", "expansion")
GOALS = {"steady": ">= 0.95", "expansion": ">= 0.9"}


def _java(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: install Java 17 (a JDK)")
    return found


def _run(cmd: list[str]) -> dict[str, Any]:
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False)
    lines = [line for line in done.stdout.splitlines() if line.startswith("{")]
    if done.returncode != 0 or not lines:
        raise SystemExit(f"{cmd[4]} failed (exit {done.returncode}):\n{done.stderr[-3000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def write(classpath: str, topic: str, props: dict[str, str], records: int, keys: int) -> None:
    cmd = [_java("java"), "-Xmx256m", "-cp", classpath, "KeyedPerf", "--topic", topic]
    cmd += ["--records", str(records), "--warmup", "0", "--keys", str(keys), "--size", "100"]
    for key, value in props.items():
        cmd += ["--property", f"{key}={value}"]
    result = _run(cmd)
    if result["errors"]:
        raise SystemExit(f"KeyedPerf: {result['errors']} records failed")


def read(classpath: str, topic: str, impl: str, props: dict[str, str]) -> dict[str, Any]:
    cmd = [_java("java"), "-Xmx256m", "-cp", classpath, "ConsumePerf", "--topic", topic]
    cmd += ["--impl", impl]
    for key, value in {**props, "group.id": f"bench-{uuid.uuid4().hex[:8]}"}.items():
        cmd += ["--property", f"{key}={value}"]
    return _run(cmd)


def _quartiles(values: list[float]) -> tuple[float, float]:
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def main() -> None:
    """Run the benchmark, print the results, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--records", type=int, default=1_000_000, help="the backlog")
    parser.add_argument("--keys", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=5, help="paired rounds")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    jar = jar_path()
    tools = jars.resolve("kafka-tools")
    load_start = os.getloadavg()
    with (
        servers(args, "jvm-consumer") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (kz, root),
        tempfile.TemporaryDirectory(prefix="bench-jvm-consumer-") as tmp,
    ):
        classes = Path(tmp) / "classes"
        classpath = f"{classes}:{jar}:{tools.classpath}"
        subprocess.run(
            [_java("javac"), "-nowarn", "-d", str(classes), "-cp", classpath, *map(str, SOURCES)],
            check=True,
            capture_output=True,
            text=True,
        )
        zk = {"ordered.zookeeper.connect": zookeeper, "ordered.zookeeper.root": root}
        producer = {
            "bootstrap.servers": bootstrap,
            "partitioner.class": "org.orderedkafka.OrderedPartitioner",
            "interceptor.classes": "org.orderedkafka.OrderedProducerInterceptor",
            **zk,
        }
        admin = AdminClient({"bootstrap.servers": bootstrap})
        controller = Controller(LayoutStore(kz, root), KafkaAdmin(bootstrap))
        topics: dict[str, str] = {}
        for workload, first in (("steady", 4), ("expansion", 2)):
            topic = f"bench-jvmc-{workload}-{uuid.uuid4().hex[:8]}"
            admin.create_topics([NewTopic(topic, first, 1)])[topic].result(30)
            controller.adopt(topic)
            if workload == "steady":
                write(classpath, topic, producer, args.records, args.keys)
            else:
                half = args.records // 2
                write(classpath, topic, producer, half, args.keys)
                controller.expand(topic, 4, timeout=60)
                write(classpath, topic, producer, args.records - half, args.keys)
            topics[workload] = topic
        plain = {"bootstrap.servers": bootstrap}
        sides = {"kafka": plain, "ordered": {**plain, **zk}}
        rate_key = {"steady": "records_per_s", "expansion": "records_per_s_from_subscribe"}
        rates: dict[str, dict[str, list[float]]] = {
            w: {"kafka": [], "ordered": []} for w in WORKLOADS
        }
        cpu: dict[str, dict[str, list[float]]] = {
            w: {"kafka": [], "ordered": []} for w in WORKLOADS
        }
        ratios: dict[str, list[float]] = {w: [] for w in WORKLOADS}
        loads: list[float] = []
        for r in range(args.rounds):
            order = ["kafka", "ordered"] if r % 2 == 0 else ["ordered", "kafka"]
            line = []
            for workload in WORKLOADS:
                got: dict[str, float] = {}
                for side in order:
                    run = read(classpath, topics[workload], side, sides[side])
                    if run["records"] < args.records:
                        raise SystemExit(f"{side} read {run['records']} of {args.records}")
                    got[side] = run[rate_key[workload]]
                    rates[workload][side].append(got[side])
                    cpu[workload][side].append(run["timed_cpu_us_per_record"])
                ratios[workload].append(got["ordered"] / got["kafka"])
                line.append(
                    f"{workload}: kafka {got['kafka']:.0f}/s, ordered {got['ordered']:.0f}/s, "
                    f"ratio {ratios[workload][-1]:.3f}"
                )
            loads.append(os.getloadavg()[0])
            print(
                f"round {r + 1}/{args.rounds}: {'; '.join(line)} (load {loads[-1]:.2f})", flush=True
            )
    kafka_clients = sorted(p.name for p in tools.directory.glob("kafka-clients-*.jar"))
    results: dict[str, Any] = {
        **environment("jvm_consumer"),
        "java": subprocess.run(
            [_java("java"), "-version"], capture_output=True, text=True, check=False
        ).stderr.splitlines()[0],
        "kafka_clients": kafka_clients[0] if kafka_clients else None,
        "jar": jar.name,
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
        "load_average_1m": {"start": round(load_start[0], 2), "per_round": loads},
        "cpus": os.cpu_count(),
    }
    for workload in WORKLOADS:
        low, high = _quartiles(ratios[workload])
        results[workload] = {
            "records_per_s": {
                side: {
                    "median": round(statistics.median(v)),
                    "min": round(min(v)),
                    "max": round(max(v)),
                    "rounds": [round(x) for x in v],
                }
                for side, v in rates[workload].items()
            },
            "ratio": {
                "median": round(statistics.median(ratios[workload]), 3),
                "q1": round(low, 3),
                "q3": round(high, 3),
                "min": round(min(ratios[workload]), 3),
                "max": round(max(ratios[workload]), 3),
                "rounds": [round(x, 3) for x in ratios[workload]],
            },
            "cpu_us_per_record": {
                side: {"median": round(statistics.median(v), 3), "rounds": [round(x, 3) for x in v]}
                for side, v in cpu[workload].items()
            },
        }
    _common.write_results(args.out, results)
    for workload in WORKLOADS:
        med = results[workload]["ratio"]
        print(
            f"{workload}: ordered/kafka median {med['median']} (quartiles {med['q1']}-"
            f"{med['q3']}, min {med['min']}, max {med['max']} over {args.rounds}; goal "
            f"{GOALS[workload]})"
        )
    print(f"wrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
