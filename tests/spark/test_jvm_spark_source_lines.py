"""The JVM Spark source's order scenario on the other Spark it supports (#39).

The scenario of ``test_jvm_spark_source.py`` (an adopted topic grows 2 -> 3 -> 4, shrinks
to 3, grows to 5 and shrinks to 4 under a running query, grows to 6 while no query runs;
the query restarts from its checkpoint; no key from two partitions in one batch, every key
in order, nothing lost or read twice, the gate rule on Spark's offset log), twice more:

* on Spark 3.5 (Scala 2.12): the PySpark driver runs with ``.venv-spark35/bin/python``
  (pyspark 3.5, made by ``scripts/setup.sh``) and ``jvm-spark/target/ordered-kafka-spark-3.5.jar``
  beside Spark 3.5's Kafka connector; the topic is written from this environment
  (``OrderedProducer``), the batches come back as a JSON file;
* on Spark 4 with a standalone master and a worker of its own: the executors, in the
  worker's JVM, fetch the jars from ``spark.jars`` and read Kafka there.

With ``format("kafka")`` instead, or with the caps taken out, the Spark 3.5 run fails:
keys from two partitions in the first batch.
"""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
from spark_cluster import StandaloneCluster
from spark_helpers import SparkQueries
from test_jvm_spark_source import ROOT, SparkReader, order_scenario, readers

from coordinator.kernel.store import LayoutStore

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(540)]

__all__ = ["readers"]  # the fixture, shared with test_jvm_spark_source.py

SPARK35_PYTHON = ROOT / ".venv-spark35" / "bin" / "python"


def test_jvm_source_keeps_key_order_on_spark_3_5(
    queries: SparkQueries,
    store: LayoutStore,
    readers: list[SparkReader],
    tmp_path: Path,
) -> None:
    if not SPARK35_PYTHON.is_file():
        pytest.fail(f"{SPARK35_PYTHON} is missing: run scripts/setup.sh (pyspark 3.5)")
    report = order_scenario(
        queries, store, readers, tmp_path, line="3.5", python=str(SPARK35_PYTHON)
    )
    assert report["spark"].startswith("3.5."), report  # the driver really ran Spark 3.5


def test_jvm_source_keeps_key_order_on_a_standalone_cluster(
    queries: SparkQueries,
    store: LayoutStore,
    readers: list[SparkReader],
    tmp_path: Path,
) -> None:
    # A master and a worker of this test's own: the session's cluster (conftest.py) is
    # held by the session's SparkSession. Executors run in the worker's JVM.
    standalone = StandaloneCluster(
        tmp_path / "standalone", workers=1, cores=2, die_with_parent=True
    )
    standalone.start()
    try:
        report = order_scenario(
            queries, store, readers, tmp_path, python=sys.executable, master=standalone.url
        )
        # The worker's executor fetched the source's jar from spark.jars (it read there).
        fetched = sorted(
            p.name for p in (tmp_path / "standalone").glob("work-0/app-*/*/ordered-kafka-*.jar")
        )
        assert "ordered-kafka-spark.jar" in fetched, fetched
        assert report["spark"].startswith("4."), report
    finally:
        for reader in readers:
            reader.stop()
        standalone.stop()
