"""The JVM Spark source (`org.orderedkafka.spark.OrderedKafkaProvider`) keeps key order (#39).

Spark's own Kafka micro-batch stream with each batch's end capped at the gates, from
PySpark: ``spark.readStream.format("ordered-kafka-jvm")`` with the two jars of
``jvm/`` and ``jvm-spark/`` on ``spark.jars`` beside Spark's Kafka connector. The session
runs in its own process (``local[2]``): ``spark.jars`` is fixed when a JVM starts, and the
test session's shared Spark has only the connector.

An adopted topic is written by ``OrderedProducer`` while it expands 2 -> 3 -> 4 and
shrinks to 3; an ``availableNow`` query with ``maxOffsetsPerTrigger`` reads it into a
``foreachBatch`` that records (batch id, partition, key, offset). A query with a
processing-time trigger then runs on from the checkpoint while the topic expands to 5 and
shrinks to 4 under writes. Then, while no query runs, more is written and the topic
expands to 6, and an ``availableNow`` query restarts from the checkpoint. Checked: no key
from two partitions in one batch, every key in order across batches and runs, nothing
lost or read twice, the gate rule on the offsets Spark logged, the receivers held back at
their boundary at least once (so the check can fail), batches within
``maxOffsetsPerTrigger``; an unknown ``ordered.*`` option fails at ``load()``. The same
test with ``format("kafka")`` fails: Spark's own source hands Spark keys from two
partitions in its first batch.
"""

from __future__ import annotations

import json
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from jvm_helpers import ordered_jar
from spark_helpers import (
    BackgroundWriter,
    DriverProcess,
    SparkQueries,
    check_batches,
    gate_violations,
    offset_log,
    order_report,
)

from coordinator.kernel.store import LayoutStore
from ordered.devcluster import jars

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(420)]

ROOT = Path(__file__).resolve().parents[2]
SPARK_JAR = ROOT / "jvm-spark" / "target" / "ordered-kafka-spark.jar"
# Each Spark line: the source's jar (scripts/setup.sh builds both) and the cached
# connector's component (ordered/devcluster/jars.py).
LINES = {
    "4": (SPARK_JAR, "spark-kafka"),
    "3.5": (ROOT / "jvm-spark" / "target" / "ordered-kafka-spark-3.5.jar", "spark-kafka-3.5"),
}
PROVIDER = "org.orderedkafka.spark.OrderedKafkaProvider"

# The PySpark program a user would write. One availableNow query per "run <format>" line
# on stdin, from the same checkpoint; each batch's rows are appended to cfg["out"] as one
# JSON line; "RAN <batches>" on stdout when the query has ended.
READER = r"""
import json, sys
from pyspark.sql import SparkSession

cfg = json.loads(sys.argv[1])
spark = (
    SparkSession.builder.master(cfg.get("master", "local[2]"))
    .appName("ordered-jvm-source")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.jars", cfg["jars"])
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
print("STARTED " + spark.version, flush=True)


def record(frame, batch_id):
    rows = frame.selectExpr(
        "cast(key as string) as key", "cast(value as string) as value", "partition", "offset"
    ).collect()
    out = [[r.key, r.value, r.partition, r.offset] for r in rows]
    with open(cfg["out"], "a") as f:
        f.write(json.dumps({"batch": batch_id, "rows": out}) + "\n")


for line in sys.stdin:
    words = line.split()
    if words and words[0] == "bad":
        # An unknown ordered.* option must fail at load(), naming it.
        try:
            spark.readStream.format(words[1]).options(**cfg["options"]).option(
                "ordered.zookeeper.rooot", "/x"
            ).load()
            print("LOADED", flush=True)
        except Exception as exc:
            print("REFUSED " + " ".join(str(exc).split())[:400], flush=True)
        continue
    if words and words[0] == "start":
        # A query that keeps running (a trigger every 0.5 s) until "drain".
        running = (
            spark.readStream.format(words[1])
            .options(**cfg["options"])
            .load()
            .writeStream.foreachBatch(record)
            .option("checkpointLocation", cfg["checkpoint"])
            .trigger(processingTime="500 milliseconds")
            .start()
        )
        print("QUERY", flush=True)
        continue
    if words and words[0] == "drain":
        running.processAllAvailable()
        error = running.exception()
        running.stop()
        print("DRAINED" if error is None else f"FAILED {error}", flush=True)
        continue
    if words and words[0] == "sql":
        # SQL (Spark 4): a catalog table of the source, read by SELECT ... FROM STREAM.
        opts = ", ".join(f"`{k}` '{v}'" for k, v in cfg["options"].items())
        spark.sql(f"CREATE TABLE ordered_t USING `ordered-kafka-jvm` OPTIONS ({opts})")
        frame = spark.sql("SELECT key, value, partition, offset FROM STREAM ordered_t")
        out_file = cfg["out"]
        cfg["out"] = out_file + ".sql"
        query = (
            frame.writeStream.foreachBatch(record)
            .option("checkpointLocation", cfg["checkpoint"] + "-sql")
            .trigger(availableNow=True)
            .start()
        )
        ended = query.awaitTermination(180)
        cfg["out"] = out_file
        source = query.lastProgress["sources"][0]["description"] if ended else ""
        print(f"SQL {ended} {query.exception()} {source}", flush=True)
        continue
    if not words or words[0] != "run":
        break
    query = (
        spark.readStream.format(words[1])
        .options(**cfg["options"])
        .load()
        .writeStream.foreachBatch(record)
        .option("checkpointLocation", cfg["checkpoint"])
        .trigger(availableNow=True)
        .start()
    )
    try:
        ended = query.awaitTermination(180)
    except Exception:  # the query failed: reported below
        ended = True
    error = query.exception()
    if not ended or error is not None:
        query.stop()
        print(f"FAILED {ended} {error}", flush=True)
        break
    print(f"RAN {query.lastProgress and query.lastProgress['batchId']}", flush=True)
spark.stop()
"""

# Spark's Kafka connector: only these of its jars (the rest ship with pyspark).
_CONNECTOR = ("spark-sql-kafka", "spark-token-provider-kafka", "kafka-clients", "commons-pool2")


def spark_jars(line: str = "4") -> str:
    """The ``spark.jars`` of the JVM source on Spark ``line``: its jar, the plugins' jar,
    the connector of that line."""
    source, component = LINES[line]
    if not source.is_file():
        pytest.fail(f"{source} is not built: run scripts/setup.sh")
    directory = jars.resolve(component).directory
    connector = sorted(str(p) for p in directory.glob("*.jar") if p.name.startswith(_CONNECTOR))
    return ",".join([str(source), str(ordered_jar()), *connector])


class SparkReader(DriverProcess):
    """The PySpark driver in its own process; killed at teardown."""

    def __init__(self, cfg: dict[str, Any], log: Path, python: str = sys.executable) -> None:
        super().__init__(READER, cfg, log, cwd=ROOT, python=python)

    def expect(self, prefix: str, timeout: float = 200.0) -> str:
        """The next line of the driver's stdout; it must start with ``prefix``."""
        return super().expect(prefix, timeout)

    def run(self, fmt: str) -> None:
        """Run one availableNow query to its end."""
        self.send(f"run {fmt}")
        self.expect("RAN ")

    def command(self, line: str, answer: str, timeout: float = 200.0) -> str:
        """Send one command line; wait for its answer."""
        self.send(line)
        return self.expect(answer, timeout=timeout)

    def refused(self, fmt: str) -> str:
        """The error of a ``load()`` with an unknown ``ordered.*`` option."""
        self.send(f"bad {fmt}")
        return self.expect("REFUSED ", timeout=60)


@pytest.fixture
def readers() -> Iterator[list[SparkReader]]:
    made: list[SparkReader] = []
    yield made
    for reader in made:
        reader.stop()


def read_batches(path: Path) -> dict[int, list[tuple[str, int, int, int]]]:
    """The recorded batches as ``spark_helpers`` checks them: (key, seq, partition, offset)."""
    batches: dict[int, list[tuple[str, int, int, int]]] = {}
    if not path.exists():
        return batches
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        rows = []
        for key, value, partition, offset in entry["rows"]:
            name, seq = value.split(":")
            assert name == key, (key, value)
            rows.append((key, int(seq), int(partition), int(offset)))
        rows.sort(key=lambda r: (r[2], r[3]))
        assert entry["batch"] not in batches, f"batch {entry['batch']} ran twice"
        batches[entry["batch"]] = rows
    return batches


def test_jvm_source_keeps_key_order_through_expansions_a_shrink_and_a_restart(
    queries: SparkQueries,
    store: LayoutStore,
    readers: list[SparkReader],
    tmp_path: Path,
) -> None:
    report = order_scenario(queries, store, readers, tmp_path)
    # The same topic from SQL: CREATE TABLE ... USING ordered-kafka-jvm OPTIONS (...), then
    # SELECT ... FROM STREAM (docs/spark-jvm.md): the gated stream, every record, key order kept.
    answer = readers[0].command("sql", "SQL ")
    assert answer.startswith("SQL True None OrderedMicroBatchStream["), answer
    batches = read_batches(tmp_path / "batches.jsonl.sql")
    assert sum(len(rows) for rows in batches.values()) == report["records"], answer
    check_batches(batches)


def test_an_unreachable_zookeeper_fails_the_query_at_its_first_trigger(
    queries: SparkQueries, readers: list[SparkReader], tmp_path: Path
) -> None:
    # The stream opens its ZooKeeper session in the background when Spark makes it: the
    # opening's error must still end the query, at the first trigger, naming ZooKeeper.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]  # free once closed: nothing listens there
    topic = queries.adopted_topic(2)
    options = {**queries.options(topic), "ordered.zookeeper.connect": f"127.0.0.1:{port}"}
    cfg = {
        "jars": spark_jars(),
        "options": options,
        "checkpoint": str(tmp_path / "checkpoint"),
        "out": str(tmp_path / "batches.jsonl"),
    }
    reader = SparkReader(cfg, tmp_path / "spark.log")
    readers.append(reader)
    reader.expect("STARTED")
    reader.send(f"run {PROVIDER}")
    answer = reader.expect("FAILED ", timeout=120)
    assert "ZooKeeper could not be reached" in answer, answer
    assert not (tmp_path / "batches.jsonl").exists()


def order_scenario(
    queries: SparkQueries,
    store: LayoutStore,
    readers: list[SparkReader],
    tmp_path: Path,
    *,
    line: str = "4",
    python: str = sys.executable,
    master: str = "local[2]",
) -> dict[str, Any]:
    """The scenario of this module's docstring with the PySpark driver ``python`` on Spark
    ``line`` and ``master``; returns the order report and the driver's Spark version."""
    controller = queries.controller
    topic = queries.adopted_topic(2)
    checkpoint = tmp_path / "checkpoint"
    out = tmp_path / "batches.jsonl"
    cfg = {
        "jars": spark_jars(line),
        "options": queries.options(topic, maxOffsetsPerTrigger=250),
        "checkpoint": str(checkpoint),
        "out": str(out),
        "master": master,
    }
    reader = SparkReader(cfg, tmp_path / "spark.log", python)
    readers.append(reader)

    writer = queries.writer()
    writer.write(topic, 300)
    writer.flush()
    background = BackgroundWriter(writer, topic)
    try:
        for step, to in (("expand", 3), ("expand", 4), ("shrink", 3)):
            time.sleep(0.5)
            getattr(controller, step)(topic, to, timeout=30)
        time.sleep(0.5)
    finally:
        first_written = background.stop()
    version = reader.expect("STARTED").split()[-1]
    reader.run(PROVIDER)
    first = read_batches(out)
    assert sum(len(rows) for rows in first.values()) == first_written, (
        sum(len(rows) for rows in first.values()),
        first_written,
    )
    check_batches(first)

    # A running query (short name, from the checkpoint) while the topic expands to 5 and
    # shrinks to 4 under writes: the planner meets pending epochs and fresh seals.
    reader.command("start ordered-kafka-jvm", "QUERY")
    background = BackgroundWriter(writer, topic)
    try:
        for step, to in (("expand", 5), ("shrink", 4)):
            time.sleep(1.0)
            getattr(controller, step)(topic, to, timeout=30)
        time.sleep(1.0)
    finally:
        background.stop()
    reader.command("drain", "DRAINED")
    second = read_batches(out)
    assert min(set(second) - set(first)) == max(first) + 1, sorted(second)

    # Down: more is written while the topic expands again; the query restarts from its
    # checkpoint.
    writer.write(topic, 200)
    background = BackgroundWriter(writer, topic)
    try:
        controller.expand(topic, 6, timeout=30)
        time.sleep(0.5)
    finally:
        background.stop()
    writer.write(topic, 100)
    written = writer.flush()
    writer.close()
    reader.run("ordered-kafka-jvm")
    assert "ordered.zookeeper.rooot" in reader.refused("ordered-kafka-jvm")

    batches = read_batches(out)
    assert min(set(batches) - set(second)) == max(second) + 1, sorted(batches)
    # maxOffsetsPerTrigger=250: Spark's split rounds a share below 1 up to 1 per partition.
    assert all(len(rows) <= 250 + 6 for rows in batches.values()), [
        len(rows) for rows in batches.values()
    ]
    report = order_report(batches, writer.delivered)
    print(f"[jvm spark source, Spark {line}, {master}] {report}")
    assert report["records"] == written and report["batches"] > 2, report
    assert (
        report["out_of_order"]
        == report["lost"]
        == report["split_batches"]
        == report["duplicated"]
        == 0
    ), report
    per_key = check_batches(batches)
    for key, seqs in writer.delivered.items():
        assert per_key.get(key) == sorted(seqs), key

    epochs = store.epochs(topic)
    assert [e.to_active for e in epochs] == [2, 3, 4, 3, 5, 4, 6]
    assert all(e.sealed for e in epochs)
    log = offset_log(checkpoint)
    assert sorted(log) == sorted(batches)
    assert gate_violations(log, topic, epochs[1:], {}) == []
    # The receivers were held back at their boundary at least once (the check can fail).
    assert any(
        log[i].get(topic, {}).get(b, 0) == e.boundaries[b]
        for i in log
        for e in epochs[1:]
        for _a, b in e.edges
    ), log
    return {**report, "spark": version}
