"""Benchmark: the JVM Spark source (``ordered-kafka-jvm``) against Spark's own Kafka source.

Not a test. Run as ``.venv/bin/python benchmarks/bench_spark_jvm.py`` (starts its own
cluster in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a
running one. Needs the two jars ``bash scripts/setup.sh`` builds
(``jvm-spark/target/ordered-kafka-spark.jar`` and ``jvm/target/ordered-kafka-jvm.jar``)
and Spark's Kafka connector in the jars cache. Prints each round and writes
``benchmarks/results/spark_jvm.json``.

Measured in one run, one SparkSession (``local[2]``, both jars and Spark's connector on
``spark.jars``), one broker. Three sources read the same topics with
``Trigger.AvailableNow``, one query at a time: ``format("ordered-kafka-jvm")`` (the JVM
source), ``format("kafka")`` (Spark's, the baseline) and ``format("ordered-kafka")``
(the Python source). The topics are adopted, 4 partitions, filled before the timed
queries with keyed 100-byte records (``--keys`` keys) by ``OrderedProducer``: one topic
per size in ``--sizes`` with a fixed layout (4 partitions throughout), and one of
``--expansion-records`` expanded 4 -> 8 while the producer writes (the expansion starts a
third of the way through the records, the producer goes on writing while it runs, and
the last third is written after it), so its gates are live. Workloads, each one query
per source per round:

* ``raw``: every row into the ``noop`` sink;
* ``count``: ``groupBy("key").count()`` in update mode into the ``noop`` sink (a
  shuffle and Spark's state store in every batch);
* ``raw`` on the expanded topic.

Rounds rotate which source runs first, and every workload of a round runs before the
next round starts, so a busy spell of the machine falls on all three sides. Per query:
end to end (rows over the seconds from ``load()`` to the query's termination, start-up
included), in batches (rows over the sum of ``durationMs.triggerExecution``), each
``durationMs`` part summed over the query's triggers (``latestOffset``, where the JVM
source reads ZooKeeper and Kafka's offsets, ``addBatch``, where the rows are read), the
number of triggers and batches, and the CPU seconds of Spark's processes (the JVM and
its Python processes, from ``/proc``). The ratios (JVM / Kafka and Python / Kafka) are
taken per round and reported as median, min, max and every round, with the load averages
of every round (1 min at its start and end, 5 and 15 min at its end) and ``--note``.
One untimed query per source and workload kind comes first (on the smallest steady
topic).
"""

from __future__ import annotations

import atexit
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers
from bench_spark import CONNECTOR_JARS, VALUE, create_topic, tree_cpu_s
from confluent_kafka import Consumer, TopicPartition

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from ordered.cli.jvm import jar_path
from ordered.devcluster import jars
from ordered.producer import OrderedProducer

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "spark_jvm.json"
SPARK_JAR = ROOT / "jvm-spark" / "target" / "ordered-kafka-spark.jar"
SOURCES = ("jvm", "kafka", "python")
FORMATS = {"jvm": "ordered-kafka-jvm", "kafka": "kafka", "python": "ordered-kafka"}
DURATIONS = ("latestOffset", "queryPlanning", "addBatch", "walCommit", "commitOffsets")


def fill(
    config: dict[str, Any],
    topic: str,
    count: int,
    keys: int,
    expand: tuple[Controller, int] | None = None,
) -> dict[str, Any]:
    """Write ``count`` keyed records; with ``expand``, expand the topic during the writes.

    The expansion runs in a thread from a third of the way through the records while
    this thread goes on producing (the barrier waits for this producer's
    acknowledgement, which it gives from its own calls); the last third is written
    after it has completed, so both layouts hold records.
    """
    producer = OrderedProducer(config)
    facts: dict[str, Any] = {}
    worker: threading.Thread | None = None
    errors: list[BaseException] = []

    def expand_now(controller: Controller, to: int) -> None:
        started = time.perf_counter()
        try:
            controller.expand(topic, to, timeout=120)
        except BaseException as exc:  # reported after the writes
            errors.append(exc)
        facts["expand_s"] = round(time.perf_counter() - started, 3)
        facts["records_written_when_expanded"] = written[0]

    written = [0]
    try:
        for i in range(count):
            if expand is not None and i == count // 3:
                facts["expansion_started_at_record"] = i
                worker = threading.Thread(target=expand_now, args=expand, daemon=True)
                worker.start()
            if expand is not None and i == 2 * count // 3:
                # The last third goes to the expanded layout: wait for the expansion
                # here if it is still running (answering the barrier meanwhile).
                while worker is not None and worker.is_alive():
                    producer.poll(0.05)
            while True:
                try:
                    producer.produce(topic, VALUE, f"k{i % keys}")
                    break
                except BufferError:
                    producer.poll(0.05)
            written[0] = i + 1
            if i % 10_000 == 0:
                producer.poll(0)
        while worker is not None and worker.is_alive():
            producer.poll(0.1)
        assert producer.flush(60) == 0
    finally:
        producer.close()
    if errors:
        raise errors[0]
    return facts


def partition_counts(bootstrap: str, topic: str, partitions: int) -> list[int]:
    """Records per partition (high minus low watermark)."""
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"wm-{uuid.uuid4().hex[:6]}"})
    try:
        out = []
        for p in range(partitions):
            low, high = consumer.get_watermark_offsets(TopicPartition(topic, p), timeout=30)
            out.append(high - low)
        return out
    finally:
        consumer.close()


def session() -> Any:
    """One ``local[2]`` session with the JVM source's jars, Spark's connector and the
    Python source registered."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    directory = jars.resolve("spark-kafka", cache=jars.cache_dir()).directory
    connector = sorted(str(p) for p in directory.glob("*.jar") if p.name.startswith(CONNECTOR_JARS))
    if not SPARK_JAR.is_file():
        raise SystemExit(f"{SPARK_JAR} is not built: run `bash scripts/setup.sh`")
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark-jvm")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join([str(SPARK_JAR), str(jar_path()), *connector]))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import spark_source

    spark_source.register(spark)
    return spark


def query(
    spark: Any, source: str, options: dict[str, str], workload: str, tmp: Path
) -> dict[str, Any]:
    """One timed ``availableNow`` query; its figures."""
    checkpoint = tmp / f"ck-{uuid.uuid4().hex[:8]}"
    cpu_before = tree_cpu_s()
    started = time.perf_counter()
    frame = spark.readStream.format(FORMATS[source]).options(**options).load()
    mode = "append"
    if workload == "count":
        frame = frame.groupBy("key").count()
        mode = "update"
    running = (
        frame.writeStream.format("noop")
        .outputMode(mode)
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    running.awaitTermination()
    seconds = time.perf_counter() - started
    cpu_after = tree_cpu_s()
    progress = running.recentProgress
    shutil.rmtree(checkpoint, ignore_errors=True)
    durations = {key: sum(p["durationMs"].get(key, 0) for p in progress) for key in DURATIONS}
    in_batches = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000
    return {
        "rows": sum(int(p["numInputRows"]) for p in progress),
        "seconds": round(seconds, 3),
        "in_batches_s": round(in_batches, 3),
        "triggers": len(progress),
        "batches": sum(1 for p in progress if p["numInputRows"]),
        "duration_ms": durations,
        "latest_offset_ms_per_trigger": [p["durationMs"].get("latestOffset", 0) for p in progress],
        "cpu_s": None
        if cpu_before is None or cpu_after is None
        else round(cpu_after - cpu_before, 3),
    }


def chaos_running() -> bool:
    """Whether an ``ordered chaos`` run shares the machine (recorded per round)."""
    found = subprocess.run(
        ["pgrep", "-f", "ordered.cli chaos"], capture_output=True, text=True, check=False
    )
    return bool(found.stdout.strip())


def spread(values: list[float], digits: int = 3) -> dict[str, Any]:
    return {
        "median": round(statistics.median(values), digits),
        "min": round(min(values), digits),
        "max": round(max(values), digits),
        "rounds": [round(v, digits) for v in values],
    }


def summarise(runs: list[dict[str, Any]]) -> dict[str, Any]:
    """Per workload: each source's rates, the per-round ratios to Kafka, the profile."""
    out: dict[str, Any] = {}
    for name in dict.fromkeys(r["workload_name"] for r in runs):
        mine = [r for r in runs if r["workload_name"] == name]
        rounds = sorted({r["round"] for r in mine})
        by = {(r["round"], r["source"]): r for r in mine}
        sources = [s for s in SOURCES if any(r["source"] == s for r in mine)]
        entry: dict[str, Any] = {
            "workload": mine[0]["workload"],
            "topic": mine[0]["topic_kind"],
            "records": mine[0]["rows"],
            "rounds": len(rounds),
        }
        for label, measure in (
            ("end_to_end", lambda r: r["rows"] / r["seconds"]),
            ("in_batches", lambda r: r["rows"] / max(r["in_batches_s"], 1e-9)),
        ):
            entry[f"{label}_rows_per_s"] = {
                s: spread([measure(by[(n, s)]) for n in rounds if (n, s) in by], 0) for s in sources
            }
            for s in sources:
                if s == "kafka":
                    continue
                ratios = [
                    measure(by[(n, s)]) / measure(by[(n, "kafka")])
                    for n in rounds
                    if (n, s) in by and (n, "kafka") in by
                ]
                if ratios:
                    entry[f"{label}_ratio_{s}_to_kafka"] = spread(ratios)
        entry["startup_s"] = {
            s: spread(
                [by[(n, s)]["seconds"] - by[(n, s)]["in_batches_s"] for n in rounds if (n, s) in by]
            )
            for s in sources
        }
        entry["cpu_us_per_row"] = {
            s: spread(
                [by[(n, s)]["cpu_s"] * 1e6 / by[(n, s)]["rows"] for n in rounds if (n, s) in by],
                2,
            )
            for s in sources
            if all(by[(n, s)]["cpu_s"] is not None for n in rounds if (n, s) in by)
        }
        entry["profile_median"] = {
            s: {
                "triggers": statistics.median(
                    by[(n, s)]["triggers"] for n in rounds if (n, s) in by
                ),
                "batches": statistics.median(by[(n, s)]["batches"] for n in rounds if (n, s) in by),
                **{
                    f"{key}_ms": statistics.median(
                        by[(n, s)]["duration_ms"][key] for n in rounds if (n, s) in by
                    )
                    for key in DURATIONS
                },
                "latest_offset_ms_per_trigger": statistics.median(
                    ms
                    for n in rounds
                    if (n, s) in by
                    for ms in by[(n, s)]["latest_offset_ms_per_trigger"]
                ),
            }
            for s in sources
        }
        out[name] = entry
    return out


def size_label(n: int) -> str:
    return f"{n // 1_000_000}M" if n % 1_000_000 == 0 else f"{n // 1000}k"


def main() -> None:
    """Run the benchmark, print each round, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument(
        "--sizes", default="1000000,3000000", help="records of each steady topic (comma list)"
    )
    parser.add_argument(
        "--expansion-records", type=int, default=1_000_000, help="0: no expansion workload"
    )
    parser.add_argument("--workloads", default="raw,count", help="on the steady topics")
    parser.add_argument("--keys", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--without-python",
        action="store_true",
        help="leave the Python source out (JVM and Kafka only)",
    )
    parser.add_argument(
        "--note",
        default="",
        help="what else ran on the machine (kept in the JSON beside the load averages)",
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args()
    sizes = [int(s) for s in args.sizes.split(",") if s]
    workloads = [w for w in args.workloads.split(",") if w]
    sources = [s for s in SOURCES if not (args.without_python and s == "python")]
    tmp = Path(f"/tmp/bench-spark-jvm-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    atexit.register(shutil.rmtree, tmp, True)
    began = time.perf_counter()
    with (
        servers(args, "spark-jvm") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (
            kz,
            root,
        ),
    ):
        admin = KafkaAdmin(bootstrap, timeout=60.0)
        controller = Controller(LayoutStore(kz, root), KafkaAdmin(bootstrap))
        config = {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zookeeper,
            "ordered.zookeeper.root": root,
            "linger.ms": 20,
        }
        topics: dict[str, dict[str, Any]] = {}
        for size in sizes:
            topic = f"bench-sparkjvm-{size_label(size)}-{uuid.uuid4().hex[:6]}"
            create_topic(admin, topic, 4)
            controller.adopt(topic)
            t0 = time.perf_counter()
            fill(config, topic, size, args.keys)
            topics[f"steady-{size_label(size)}"] = {
                "topic": topic,
                "records": size,
                "partitions": partition_counts(bootstrap, topic, 4),
                "fill_s": round(time.perf_counter() - t0, 1),
            }
            print(f"filled {topic}: {size} records", flush=True)
        if args.expansion_records:
            topic = f"bench-sparkjvm-exp-{uuid.uuid4().hex[:6]}"
            create_topic(admin, topic, 4)
            controller.adopt(topic)
            t0 = time.perf_counter()
            facts = fill(config, topic, args.expansion_records, args.keys, (controller, 8))
            topics[f"expanded-{size_label(args.expansion_records)}"] = {
                "topic": topic,
                "records": args.expansion_records,
                "layout": "4 -> 8 during the writes",
                "partitions": partition_counts(bootstrap, topic, 8),
                "fill_s": round(time.perf_counter() - t0, 1),
                **facts,
            }
            print(f"filled {topic}: {args.expansion_records} records, 4 -> 8 {facts}", flush=True)

        plan: list[tuple[str, str, str]] = []  # (workload name, workload, topic kind)
        for size in sizes:
            for w in workloads:
                plan.append((f"{w}-{size_label(size)}", w, f"steady-{size_label(size)}"))
        if args.expansion_records:
            label = size_label(args.expansion_records)
            plan.append((f"raw-{label}-expansion", "raw", f"expanded-{label}"))

        spark = session()

        def options(source: str, topic: str) -> dict[str, str]:
            out = {
                "kafka.bootstrap.servers": bootstrap,
                "subscribe": topic,
                "startingOffsets": "earliest",
            }
            if source != "kafka":
                out["ordered.zookeeper.connect"] = zookeeper
                out["ordered.zookeeper.root"] = root
            return out

        def results() -> dict[str, Any]:
            return {
                **environment("spark_jvm"),
                "pyspark": __import__("pyspark").__version__,
                "connector": "org.apache.spark:spark-sql-kafka-0-10_2.13:"
                + jars.pinned_version("spark-kafka"),
                "master": "local[2]",
                "trigger": "availableNow",
                "sink": "noop",
                "sources": {s: FORMATS[s] for s in sources},
                "keys": args.keys,
                "value_bytes": len(VALUE),
                "rounds": len(loads),
                "rounds_asked": args.rounds,
                "topics": topics,
                "method": (
                    "one query per source, workload and round, rounds rotating which source runs "
                    "first; ratios per round against Spark's Kafka source: end to end (load() to "
                    "termination, start-up included) and in batches (sum of triggerExecution)"
                ),
                "workloads": summarise(runs),
                "load_average_1m_per_round": loads,
                "load_averages_per_round": load_detail,
                "cpus": os.cpu_count(),
                "note": args.note,
                "chaos_run_beside_per_round": chaos,
                "seconds": round(time.perf_counter() - began, 1),
                "queries": runs,
            }

        # Warm-up: the JVM's code, Spark's Kafka consumers, the Python processes.
        warm_topic = topics[f"steady-{size_label(sizes[0])}"]
        for w in workloads:
            for source in sources:
                result = query(spark, source, options(source, warm_topic["topic"]), w, tmp)
                print(f"warm-up {w} {source}: {result['seconds']:.1f} s", flush=True)

        runs: list[dict[str, Any]] = []
        loads: list[float] = []
        load_detail: list[dict[str, float]] = []
        chaos: list[bool] = []
        for round_no in range(args.rounds):
            shift = round_no % len(sources)
            order = sources[shift:] + sources[:shift]
            at_start = os.getloadavg()[0]
            chaos.append(chaos_running())
            for name, workload, kind in plan:
                topic = topics[kind]
                rates = {}
                for source in order:
                    result = query(spark, source, options(source, topic["topic"]), workload, tmp)
                    assert result["rows"] == topic["records"], (name, source, result["rows"])
                    runs.append(
                        {
                            "round": round_no,
                            "workload_name": name,
                            "workload": workload,
                            "topic_kind": kind,
                            "source": source,
                            **result,
                        }
                    )
                    rates[source] = result["rows"] / result["seconds"]
                line = ", ".join(f"{s} {rates[s]:,.0f}" for s in sources)
                ratios = ", ".join(
                    f"{s}/kafka {rates[s] / rates['kafka']:.3f}" for s in sources if s != "kafka"
                )
                print(
                    f"round {round_no} {name}: rows/s {line}; {ratios}; "
                    f"load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
            loads.append(round(os.getloadavg()[0], 2))
            one, five, fifteen = os.getloadavg()
            load_detail.append(
                {
                    "start_1m": round(at_start, 2),
                    "end_1m": round(one, 2),
                    "end_5m": round(five, 2),
                    "end_15m": round(fifteen, 2),
                }
            )
            _common.write_results(args.out, results())  # what there is so far
        spark.stop()
        # The topics hold a few GB between them on a shared cluster: not left behind.
        admin.delete_topics(t["topic"] for t in topics.values())

    final = results()
    _common.write_results(args.out, final)
    brief = {k: v for k, v in final.items() if k != "queries"}
    print(json.dumps(brief, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
