"""A session-scoped SparkSession on a real Spark standalone cluster, ``ordered-kafka`` registered.

By default the session starts a standalone master and two workers as separate JVMs on
loopback (:mod:`spark_cluster`): executors in their own JVMs, with their own Python
workers. ``ORDERED_TEST_SPARK_MASTER`` overrides it: ``local[2]`` for a quicker
in-process run, or ``spark://host:port`` for a running cluster.

Spark's Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
package from the same environment as the tests.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import wait_until
from spark_cluster import StandaloneCluster
from spark_helpers import SparkQueries

import spark_source
from ordered.devcluster import jars
from ordered.verify.spark_query import session_builder

# Spark's own Kafka connector (scripts/setup.sh fetches it): only these of its jars;
# the rest ship with pyspark.
_CONNECTOR_JARS = (
    "spark-sql-kafka",
    "spark-token-provider-kafka",
    "kafka-clients",
    "commons-pool2",
)


def connector_jars() -> list[str]:
    """The cached jars of Spark's Kafka connector, empty when not fetched."""
    directory = jars.cache_dir() / f"spark-kafka-{jars.pinned_version('spark-kafka')}"
    if not (directory / ".complete").is_file():
        return []
    return sorted(str(p) for p in directory.glob("*.jar") if p.name.startswith(_CONNECTOR_JARS))


@pytest.fixture(scope="session")
def spark_master(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """The master URL: a standalone master and two workers started for the session.

    About 15 s to start; 1 core and 1 GB per worker.
    """
    wanted = os.environ.get("ORDERED_TEST_SPARK_MASTER", "")
    if wanted:
        yield wanted
        return
    started = time.monotonic()
    standalone = StandaloneCluster(tmp_path_factory.mktemp("spark-standalone"), workers=2)
    standalone.start()
    print(
        f"[spark] standalone master {standalone.url} and 2 workers up in "
        f"{time.monotonic() - started:.1f} s",
        file=sys.stderr,
    )
    try:
        yield standalone.url
    finally:
        standalone.stop()


@pytest.fixture(scope="session")
def spark(spark_master: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession for the whole test session."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        session_builder(spark_master, "ordered-kafka-tests")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.jars", ",".join(connector_jars()))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # py4j logs every callback at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark_source.register(session)
    session.kafka_connector = bool(connector_jars())  # type: ignore[attr-defined]
    if not os.environ.get("ORDERED_TEST_SPARK_MASTER"):
        # Both executors registered before the first test (else tasks queue on one).
        # The driver + 2 executors. Past the timeout the tests still run (slower).
        with contextlib.suppress(AssertionError):
            wait_until(
                lambda: session.sparkContext._jsc.sc().getExecutorMemoryStatus().size() >= 3,
                120,
                what="both executors registered",
                interval=0.2,
            )
    yield session
    session.stop()


@pytest.fixture
def queries(
    request: pytest.FixtureRequest,
    topic_factory: Callable[..., str],
    controller: Any,
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
    tmp_path: Path,
) -> SparkQueries:
    """This test's :class:`SparkQueries`; the Spark session starts only if a query runs."""
    return SparkQueries(
        bootstrap=bootstrap,
        zk_hosts=zk_hosts,
        zk_root=zk_root,
        controller=controller,
        topic_factory=topic_factory,
        directory=tmp_path,
        session=lambda: request.getfixturevalue("spark"),
    )
