"""Benchmark: the ``ordered-kafka`` Spark source and sink against Spark's own Kafka connector.

Not a test. Run as ``.venv/bin/python benchmarks/bench_spark.py`` (starts its own cluster
in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a running one.
Needs Spark's Kafka connector in the cache (``scripts/setup.sh`` fetches it). Prints a
table and writes ``benchmarks/results/spark.json``.

Measured, all in one run, one SparkSession (``local[2]``), one broker:

1. Source rows/s: one pre-filled adopted topic (keyed 100-byte records written by the
   layout, with one expansion in its history, so the gates are live) is read whole by a
   streaming query with ``Trigger.AvailableNow`` into the ``noop`` sink;
   ``format("ordered-kafka")`` and ``format("kafka")`` on the same topic, the same rows,
   the same trigger, in paired rounds (alternating which runs first). Per query, three
   figures:

   * end to end: rows over the seconds from defining the query (``load()``) to its
     termination, start-up included. **The source goal (>= 0.9x) is judged on this
     ratio.**
   * steady state: rows over the sum of the query's micro-batch durations
     (``durationMs.triggerExecution`` of every ``StreamingQueryProgress``: what Spark's
     ``processedRowsPerSecond`` adds up to), start-up excluded;
   * start-up: end to end minus the micro-batches (query start, initial offsets, and
     for a Python source the Python process Spark starts for every query).

   The ratios are taken per round and reported with their spread (median, min, max,
   every round), with the load average.
2. Planning time per micro-batch: ``latestOffset`` + ``partitions`` of the reader, called
   directly (what Spark's driver-side Python runner calls), sampled after every round so
   the samples spread over the run; beside it ``durationMs.latestOffset`` as Spark
   reported it for the queries of (1), both sides (for ``ordered-kafka`` it includes the
   round trip to the runner process).
3. Sink rows/s: a batch DataFrame of keyed 100-byte rows written with
   ``df.write.format(...)`` into an adopted topic (``ordered-kafka``, through
   ``OrderedProducer``) and into a plain topic (``kafka``), in paired rounds as (1)
   (``--sink-repeats``, 9: a write takes about half a second, and single rounds of
   either sink move by 20 % here), after full-size warm-up writes of each
   (``--sink-warmups``, 3). Beside it, per
   write, the CPU seconds of Spark's processes (the JVM and its Python processes, read
   from ``/proc``) per row: a figure that other work on the machine disturbs less than
   the wall clock.

``--busy N`` runs N CPU-bound processes beside the measurements (from the session start
to its stop), for a busy machine on demand; the JSON records N and the load averages.
"""

from __future__ import annotations

import atexit
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from ordered.devcluster import jars
from ordered.producer import OrderedProducer

PROFILE: dict[str, list[dict[str, Any]]] = {}
RESULTS = Path(__file__).resolve().parent / "results" / "spark.json"
VALUE = b"x" * 100
# Spark's connector needs only these of its dependencies: the rest ship with pyspark.
CONNECTOR_JARS = ("spark-sql-kafka", "spark-token-provider-kafka", "kafka-clients", "commons-pool2")


def create_topic(admin: KafkaAdmin, name: str, partitions: int) -> None:
    admin.create_topics([name], partitions)


def fill(config: dict[str, Any], topic: str, count: int, keys: int = 10_000) -> None:
    producer = OrderedProducer(config)
    try:
        for i in range(count):
            while True:
                try:
                    producer.produce(topic, VALUE, f"k{i % keys}")
                    break
                except BufferError:
                    producer.poll(0.05)
            if i % 10_000 == 0:
                producer.poll(0)
        assert producer.flush(60) == 0
    finally:
        producer.close()


def session(cache: Path, startup_hook: bool = True) -> Any:
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    resolved = jars.resolve("spark-kafka", cache=cache)
    connector = sorted(
        str(p) for p in resolved.directory.glob("*.jar") if p.name.startswith(CONNECTOR_JARS)
    )
    spark = (
        SparkSession.builder.master("local[2]")
        .appName("bench-spark")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.jars", ",".join(connector))
        .getOrCreate()
    )
    spark.sparkContext.setLogLevel("ERROR")
    import spark_source

    spark_source.register(spark, prefer_installed_pyspark=startup_hook)
    return spark


RETRIES: dict[str, int] = {}


def read_once(spark: Any, fmt: str, options: dict[str, str], tmp: Path) -> tuple[float, int, Any]:
    """One timed query; retried (and counted) when Spark gave up on a Python process.

    Spark waits a fixed 10 s for a new Python process (the streaming source's runner)
    to connect back; on a very busy machine its start can take longer.
    """
    for _attempt in range(3):
        try:
            return _read_once(spark, fmt, options, tmp)
        except Exception as exc:
            if "failed to connect back" not in str(exc):
                raise
            RETRIES[fmt] = RETRIES.get(fmt, 0) + 1
            print(f"{fmt}: a Python process did not connect back in time; again", flush=True)
    return _read_once(spark, fmt, options, tmp)


def _read_once(spark: Any, fmt: str, options: dict[str, str], tmp: Path) -> tuple[float, int, Any]:
    checkpoint = tmp / f"ck-{uuid.uuid4().hex[:8]}"
    # From defining the query: for a Python source, load() asks a Python process for
    # the schema.
    started = time.perf_counter()
    query = (
        spark.readStream.format(fmt)
        .options(**options)
        .load()
        .writeStream.format("noop")
        .trigger(availableNow=True)
        .option("checkpointLocation", str(checkpoint))
        .start()
    )
    query.awaitTermination()
    seconds = time.perf_counter() - started
    progress = query.recentProgress
    rows = sum(int(p["numInputRows"]) for p in progress)
    latest_ms = [p["durationMs"].get("latestOffset", 0) for p in progress]
    # Where the time goes: inside Spark's micro-batches (reading, per batch costs) or
    # outside them (query start: for a Python source, the runner's Python process,
    # its clients, the initial offsets).
    batches = [p for p in progress if p["numInputRows"]]
    inside = sum(p["durationMs"].get("triggerExecution", 0) for p in progress) / 1000.0
    PROFILE.setdefault(fmt, []).append(
        {
            "batches": len(batches),
            "in_batches_s": round(inside, 3),
            "add_batch_s": round(
                sum(p["durationMs"].get("addBatch", 0) for p in batches) / 1000, 3
            ),
            "outside_batches_s": round(seconds - inside, 3),
        }
    )
    return seconds, rows, latest_ms


_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
EXCLUDED_PIDS: set[int] = set()
"""Children of this process left out of the CPU count (the ``--busy`` burners)."""


def tree_cpu_s() -> float | None:
    """CPU seconds (user + system, reaped children included) of this process's descendants.

    That is the Spark JVM and the Python processes it starts (workers, the data
    source's runners), not this driver script. ``None`` without ``/proc``.
    """
    parents: dict[int, list[tuple[int, float]]] = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return None
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat") as stat:
                text = stat.read()
        except OSError:
            continue  # gone meanwhile
        fields = text[text.rindex(")") + 2 :].split()
        ticks = sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
        parents.setdefault(int(fields[1]), []).append((int(name), ticks / _TICK))
    total, stack = 0.0, [os.getpid()]
    while stack:
        for pid, cpu in parents.get(stack.pop(), []):
            if pid not in EXCLUDED_PIDS:
                total += cpu
                stack.append(pid)
    return total


def write_once(
    spark: Any, fmt: str, options: dict[str, str], rows: int
) -> tuple[float, float | None]:
    """One timed write: (seconds, CPU seconds of Spark's processes meanwhile or ``None``)."""
    frame = spark.range(rows).selectExpr(
        "cast(id % 10000 as string) as key", "repeat('x', 100) as value"
    )
    frame = frame.cache()
    frame.count()
    cpu_before = tree_cpu_s()
    started = time.perf_counter()
    frame.write.format(fmt).options(**options).mode("append").save()
    seconds = time.perf_counter() - started
    cpu_after = tree_cpu_s()
    frame.unpersist()
    cpu = None if cpu_before is None or cpu_after is None else cpu_after - cpu_before
    return seconds, cpu


def planning(options: dict[str, str], samples: int) -> list[float]:
    from pyspark.sql.streaming.datasource import ReadAllAvailable

    from spark_source.options import parse_source_options
    from spark_source.source import OrderedKafkaStreamReader

    reader = OrderedKafkaStreamReader(parse_source_options(options, streaming=True))
    start = reader.initialOffset()
    reader.latestOffset(start, ReadAllAvailable())  # opens the clients: not a sample
    times: list[float] = []
    for _ in range(samples):
        t0 = time.perf_counter()
        end = reader.latestOffset(start, ReadAllAvailable())
        reader.partitions(start, end)
        times.append((time.perf_counter() - t0) * 1000)
    reader.stop()
    return times


def plan_summary(times: list[float]) -> dict[str, float]:
    """Median, p95 and max of the planning times (ms), over every round's samples."""
    times = sorted(times)
    return {
        "samples": len(times),
        "median_ms": round(statistics.median(times), 2),
        "p95_ms": round(times[int(len(times) * 0.95) - 1], 2),
        "max_ms": round(times[-1], 2),
    }


def main() -> None:
    """Run the benchmark, print the results, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--records", type=int, default=400_000)
    parser.add_argument("--sink-records", type=int, default=200_000)
    parser.add_argument("--repeats", type=int, default=5, help="paired rounds")
    parser.add_argument("--sink-repeats", type=int, default=9, help="paired sink rounds")
    parser.add_argument(
        "--sink-warmups",
        type=int,
        default=3,
        help="full-size writes of each sink before the timed rounds",
    )
    parser.add_argument(
        "--planning-samples", type=int, default=200, help="spread evenly over the rounds"
    )
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--without-startup-hook",
        action="store_true",
        help="register with prefer_installed_pyspark=False (Spark's zips compiled per process)",
    )
    parser.add_argument(
        "--busy",
        type=int,
        default=0,
        metavar="N",
        help="run N CPU-bound processes beside the measurements (a busy machine on demand)",
    )
    args = parser.parse_args()
    tmp = Path(f"/tmp/bench-spark-{uuid.uuid4().hex[:8]}")
    tmp.mkdir()
    with servers(args, "spark") as (bootstrap, zookeeper), scratch_root(zookeeper) as (kz, root):
        admin = KafkaAdmin(bootstrap, timeout=30.0)
        store = LayoutStore(kz, root)
        controller = Controller(store, KafkaAdmin(bootstrap))
        config = {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zookeeper,
            "ordered.zookeeper.root": root,
            "linger.ms": 20,
        }
        topic = f"bench-spark-{uuid.uuid4().hex[:8]}"
        create_topic(admin, topic, 4)
        controller.adopt(topic)
        fill(config, topic, args.records // 2)
        controller.expand(topic, 6, timeout=60)
        fill(config, topic, args.records - args.records // 2)
        print(f"filled {topic}: {args.records} records", flush=True)

        burners = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"]) for _ in range(args.busy)
        ]
        atexit.register(lambda: [b.kill() for b in burners])  # also when a query fails
        EXCLUDED_PIDS.update(b.pid for b in burners)
        spark = session(jars.cache_dir(), startup_hook=not args.without_startup_hook)
        kafka_options = {
            "kafka.bootstrap.servers": bootstrap,
            "subscribe": topic,
            "startingOffsets": "earliest",
        }
        ordered_options = dict(
            kafka_options,
            **{"ordered.zookeeper.connect": zookeeper, "ordered.zookeeper.root": root},
        )
        variants = {
            "kafka": ("kafka", kafka_options),
            "ordered-kafka": ("ordered-kafka", ordered_options),
        }
        for fmt, options in variants.values():  # warm-up: JVM, Python workers, consumers
            read_once(spark, fmt, options, tmp)
        reads: dict[str, list[float]] = {name: [] for name in variants}
        steady: dict[str, list[float]] = {name: [] for name in variants}
        startup: dict[str, list[float]] = {name: [] for name in variants}
        latest: dict[str, list[float]] = {name: [] for name in variants}
        read_ratios: list[float] = []
        steady_ratios: list[float] = []
        plan_times: list[float] = []
        plan_p95_per_round: list[float] = []
        loads: list[float] = []
        load_start = os.getloadavg()
        names = list(variants)
        for round_no in range(args.repeats):
            # Paired rounds, alternating which goes first: a busy spell hits both.
            order = names if round_no % 2 == 0 else names[::-1]
            rates: dict[str, float] = {}
            for name in order:
                fmt, options = variants[name]
                seconds, rows, latest_ms = read_once(spark, fmt, options, tmp)
                assert rows == args.records, (name, rows)
                rates[name] = rows / seconds
                reads[name].append(rates[name])
                latest[name].extend(latest_ms)
                # The same query inside its micro-batches only, and what is left: the
                # start-up (for a Python source, Spark's runner process for the query).
                profile = PROFILE[fmt][-1]
                steady[name].append(rows / max(profile["in_batches_s"], 1e-9))
                startup[name].append(profile["outside_batches_s"])
            read_ratios.append(rates["ordered-kafka"] / rates["kafka"])
            steady_ratios.append(steady["ordered-kafka"][-1] / steady["kafka"][-1])
            round_times = planning(ordered_options, args.planning_samples // args.repeats)
            plan_times.extend(round_times)
            plan_p95_per_round.append(plan_summary(round_times)["p95_ms"])
            loads.append(os.getloadavg()[0])
            print(
                f"round {round_no}: read ordered-kafka {rates['ordered-kafka']:,.0f} rows/s, "
                f"kafka {rates['kafka']:,.0f} rows/s, ratio {read_ratios[-1]:.2f} "
                f"(steady {steady_ratios[-1]:.2f}; start-up "
                f"{startup['ordered-kafka'][-1]:.2f} s vs {startup['kafka'][-1]:.2f} s; "
                f"planning p95 {plan_p95_per_round[-1]:.1f} ms); load {loads[-1]:.1f}",
                flush=True,
            )
        plan = plan_summary(plan_times)
        print(f"planning: {plan}", flush=True)

        out_ordered = f"bench-spark-out-{uuid.uuid4().hex[:8]}"
        out_plain = f"bench-spark-plain-{uuid.uuid4().hex[:8]}"
        create_topic(admin, out_ordered, 4)
        create_topic(admin, out_plain, 4)
        controller.adopt(out_ordered)
        sinks = {
            "kafka": ("kafka", {"kafka.bootstrap.servers": bootstrap, "topic": out_plain}),
            "ordered-kafka": (
                "ordered-kafka",
                {
                    "kafka.bootstrap.servers": bootstrap,
                    "topic": out_ordered,
                    "ordered.zookeeper.connect": zookeeper,
                    "ordered.zookeeper.root": root,
                },
            ),
        }
        # Warm-up, full-size writes of each: the Kafka sink's JVM code and producers
        # (its JIT-compiled send path), this sink's Python workers and producers. One
        # was not enough: the Kafka sink still sped up round after round (320k to 490k
        # rows/s over five rounds) while this one stayed level, so early rounds
        # favoured this sink.
        for _ in range(args.sink_warmups):
            for fmt, options in sinks.values():
                write_once(spark, fmt, options, args.sink_records)
        writes: dict[str, list[float]] = {name: [] for name in sinks}
        write_ratios: list[float] = []
        write_cpu: dict[str, list[float]] = {name: [] for name in sinks}
        cpu_ratios: list[float] = []
        sink_names = list(sinks)
        for round_no in range(args.sink_repeats):
            order = sink_names if round_no % 2 == 0 else sink_names[::-1]
            rates = {}
            cpus: dict[str, float] = {}
            for name in order:
                fmt, options = sinks[name]
                seconds, cpu = write_once(spark, fmt, options, args.sink_records)
                rates[name] = args.sink_records / seconds
                writes[name].append(rates[name])
                if cpu is not None:
                    cpus[name] = round(cpu * 1e6 / args.sink_records, 2)
                    write_cpu[name].append(cpus[name])
            write_ratios.append(rates["ordered-kafka"] / rates["kafka"])
            if len(cpus) == 2 and cpus["ordered-kafka"] > 0:
                cpu_ratios.append(cpus["kafka"] / cpus["ordered-kafka"])
            loads.append(os.getloadavg()[0])
            print(
                f"round {round_no}: write ordered-kafka {rates['ordered-kafka']:,.0f} rows/s, "
                f"kafka {rates['kafka']:,.0f} rows/s, ratio {write_ratios[-1]:.2f}; "
                f"CPU us/row {cpus}; load {loads[-1]:.1f}",
                flush=True,
            )
        spark.stop()
        for burner in burners:
            burner.kill()
            burner.wait()
        load_end = os.getloadavg()

    def summary(rates: list[float]) -> dict[str, float]:
        return {"best": round(max(rates)), "median": round(statistics.median(rates))}

    def seconds_spread(values: list[float]) -> dict[str, Any]:
        return {
            "median": round(statistics.median(values), 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
            "rounds": [round(v, 3) for v in values],
        }

    def p95(values: list[float]) -> float | None:
        if not values:
            return None
        ordered = sorted(values)
        return round(ordered[max(int(len(ordered) * 0.95) - 1, 0)], 1)

    def spread(ratios: list[float]) -> dict[str, Any]:
        return {
            "median": round(statistics.median(ratios), 3),
            "min": round(min(ratios), 3),
            "max": round(max(ratios), 3),
            "rounds": [round(r, 3) for r in ratios],
        }

    read_summary = {name: summary(rates) for name, rates in reads.items()}
    write_summary = {name: summary(rates) for name, rates in writes.items()}
    results = {
        **environment("spark"),
        "pyspark": __import__("pyspark").__version__,
        "connector": "org.apache.spark:spark-sql-kafka-0-10_2.13:"
        + jars.pinned_version("spark-kafka"),
        "records": args.records,
        "sink_records": args.sink_records,
        "sink_warmup_writes": args.sink_warmups,
        "sink_repeats": args.sink_repeats,
        "repeats": args.repeats,
        "busy_cpu_processes_beside": args.busy,
        "startup_hook": not args.without_startup_hook,
        "method": (
            "source goal judged on the end-to-end ratio (rows over query definition to "
            "termination, start-up included); steady state (rows over the sum of "
            "micro-batch durations) and each side's start-up seconds per query beside it"
        ),
        "source_rows_per_s": read_summary,
        "source_ratio": spread(read_ratios),
        "source_steady_rows_per_s": {name: summary(r) for name, r in steady.items()},
        "source_steady_ratio": spread(steady_ratios),
        "source_startup_s": {name: seconds_spread(v) for name, v in startup.items()},
        "source_profile": {
            fmt: {
                key: statistics.median(r[key] for r in runs)
                for key in ("batches", "in_batches_s", "add_batch_s", "outside_batches_s")
            }
            for fmt, runs in PROFILE.items()
        },
        "load_average_1m": {"min": min(loads), "max": max(loads)},
        "queries_retried_after_connect_back_timeout": RETRIES,
        "load_average_1m_per_round": [round(x, 1) for x in loads],
        "uptime_load_averages": {
            "start_1_5_15m": [round(x, 2) for x in load_start],
            "end_1_5_15m": [round(x, 2) for x in load_end],
        },
        "planning_ms_direct": plan,
        "planning_p95_ms_per_round": spread(plan_p95_per_round),
        "spark_latest_offset_ms_median": {
            name: round(statistics.median(values), 1) if values else None
            for name, values in latest.items()
        },
        "spark_latest_offset_ms_p95": {name: p95(values) for name, values in latest.items()},
        "sink_rows_per_s": write_summary,
        "sink_ratio": spread(write_ratios),
        # CPU of Spark's processes (JVM and Python workers, the same JVM for both
        # sinks) per row written, over the write: less sensitive to other work on the
        # machine than the wall-clock ratio. Ratio: Kafka sink's CPU over this sink's
        # (above 1: this sink needs less).
        "sink_cpu_us_per_row": {
            name: round(statistics.median(v), 2) if v else None for name, v in write_cpu.items()
        },
        "sink_cpu_ratio": spread(cpu_ratios) if cpu_ratios else None,
    }
    _common.write_results(args.out, results)
    print(json.dumps(results, indent=2, sort_keys=True))


if __name__ == "__main__":
    main()
