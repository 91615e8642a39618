"""Spark's own Kafka sink from PySpark keeps key order with the ordered jar (issue 27).

``df.write.format("kafka")`` with ``kafka.partitioner.class`` and
``kafka.interceptor.classes`` naming the ordered plugins, ``kafka.ordered.*`` their
settings and the jar on ``spark.jars`` beside Spark's Kafka connector (which bundles
kafka-clients 3.9). The session runs in its own process (``local[2]``): ``spark.jars``
is fixed when a JVM starts, and the test session's shared Spark has only the connector.
Batches are written while the adopted topic expands 2 -> 3 -> 4; an ``OrderedConsumer``
then reads every key in write order, nothing lost.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures import run_in_background
from helpers import wait_until
from jvm_helpers import INTERCEPTOR, PARTITIONER, ordered_jar, read_keyed
from spark_helpers import DriverProcess

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore
from ordered.consumer import OrderedConsumer
from ordered.devcluster import jars

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
KEYS = 20
PER_BATCH = 50  # records per key per batch

# The PySpark program a user would write: a batch DataFrame written with format("kafka").
# Rows of one key go to one task (repartition by key) in sequence order, so each key has
# one write order. One batch per "go" line on stdin; "WROTE n" on stdout after each.
WRITER = r"""
import json, sys
from pyspark.sql import SparkSession

cfg = json.loads(sys.argv[1])
spark = (
    SparkSession.builder.master("local[2]")
    .appName("ordered-jvm-sink")
    .config("spark.ui.enabled", "false")
    .config("spark.ui.showConsoleProgress", "false")
    .config("spark.sql.shuffle.partitions", "2")
    .config("spark.jars", cfg["jars"])
    .getOrCreate()
)
spark.sparkContext.setLogLevel("ERROR")
print("STARTED", flush=True)
batch = 0
for line in sys.stdin:
    if line.strip() != "go":
        break
    rows = [
        (f"k{k}", f"k{k}:{seq}", seq)
        for seq in range(batch * cfg["per"], (batch + 1) * cfg["per"])
        for k in range(cfg["keys"])
    ]
    (
        spark.createDataFrame(rows, "key string, value string, seq long")
        .repartition(2, "key")
        .sortWithinPartitions("seq")
        .select("key", "value")
        .write.format("kafka")
        .option("topic", cfg["topic"])
        .option("kafka.bootstrap.servers", cfg["bootstrap"])
        .option("kafka.partitioner.class", cfg["partitioner"])
        .option("kafka.interceptor.classes", cfg["interceptor"])
        .option("kafka.ordered.zookeeper.connect", cfg["zookeeper"])
        .option("kafka.ordered.zookeeper.root", cfg["root"])
        .option("kafka.client.id", "spark-sink")
        .option("kafka.linger.ms", "5")
        # A fresh view of the partitions within a second: without the plugins, Kafka's
        # own partitioner would spread the keys over the new partitions at once.
        .option("kafka.metadata.max.age.ms", "1000")
        .save()
    )
    print(f"WROTE {batch}", flush=True)
    batch += 1
spark.stop()
print("DONE", flush=True)
"""

# Spark's Kafka connector: only these of its jars (the rest ship with pyspark).
_CONNECTOR = ("spark-sql-kafka", "spark-token-provider-kafka", "kafka-clients", "commons-pool2")


def _spark_jars() -> str:
    directory = jars.resolve("spark-kafka").directory
    connector = sorted(str(p) for p in directory.glob("*.jar") if p.name.startswith(_CONNECTOR))
    assert any("kafka-clients-3.9" in j for j in connector), connector
    return ",".join([str(ordered_jar()), *connector])


class SparkWriter(DriverProcess):
    """The PySpark writer in its own process; killed at teardown."""

    def __init__(self, cfg: dict[str, Any], log: Path) -> None:
        super().__init__(WRITER, cfg, log, cwd=ROOT, what="the writer")

    def expect(self, prefix: str, timeout: float = 120.0) -> str:
        """The next line of the writer's stdout, which must be ``prefix`` exactly."""
        line = super().expect(prefix, timeout)
        assert line == prefix, f"{line!r} instead of {prefix!r}\n{self.log()}"
        return line

    def go(self) -> None:
        self.send("go")


@pytest.fixture
def writers() -> Iterator[list[SparkWriter]]:
    made: list[SparkWriter] = []
    yield made
    for writer in made:
        writer.stop()


def test_spark_kafka_sink_keeps_key_order_while_the_topic_expands(
    tmp_path: Path,
    topic_factory: Callable[..., str],
    controller: Controller,
    store: LayoutStore,
    make_consumer: Callable[..., OrderedConsumer],
    writers: list[SparkWriter],
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
) -> None:
    topic = topic_factory(2)
    controller.adopt(topic)
    cfg = {
        "jars": _spark_jars(),
        "topic": topic,
        "bootstrap": bootstrap,
        "zookeeper": zk_hosts,
        "root": zk_root,
        "partitioner": PARTITIONER,
        "interceptor": INTERCEPTOR,
        "keys": KEYS,
        "per": PER_BATCH,
    }
    writer = SparkWriter(cfg, tmp_path / "spark.log")
    writers.append(writer)
    writer.expect("STARTED", timeout=180)
    writer.go()
    writer.expect("WROTE 0")
    # Spark's cached producer stays registered between batches, as a Java producer.
    registered = wait_until(lambda: store.producers(topic), timeout=10)
    assert {r.language for r in registered.values()} == {"java"}, registered
    assert any(r.client_id.startswith("spark-sink") for r in registered.values()), registered
    batches = 1
    for to in (3, 4):
        # The next batch is written while the barrier of the expansion is up.
        expand = run_in_background(controller.expand, topic, to, timeout=60)
        writer.go()
        writer.expect(f"WROTE {batches}")
        batches += 1
        result = expand.join(60)
        assert set(registered) <= set(result.producers), (result.producers, registered)
        assert result.expired == {}, result
    writer.go()
    writer.expect(f"WROTE {batches}")
    batches += 1
    writer.stop()

    total = batches * PER_BATCH * KEYS
    consumer = make_consumer("spark-sink-" + topic)
    consumer.subscribe([topic])
    seqs, partitions = read_keyed(consumer, total, 120)
    for key, got in seqs.items():
        assert got == list(range(batches * PER_BATCH)), (key, got[:20])
    assert len(seqs) == KEYS
    # Keys did move: some key is in two partitions, so the order above crossed them.
    assert any(len(p) > 1 for p in partitions.values()), partitions
    assert [e.to_active for e in store.epochs(topic)] == [2, 3, 4]
