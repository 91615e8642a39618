"""A session-scoped local Spark (``local[2]``) with the ``ordered-kafka`` format registered.

Spark's Python workers run this interpreter (``PYSPARK_PYTHON``), so they import the
package from the same environment as the tests.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from typing import Any

import pytest

import spark_source
from coordinator.devcluster import jars

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
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """One SparkSession for the whole test session (about 5 s to start)."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession

    warehouse = tmp_path_factory.mktemp("spark-warehouse")
    session = (
        SparkSession.builder.master("local[2]")
        .appName("ordered-kafka-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.warehouse.dir", str(warehouse))
        .config("spark.sql.streaming.stopTimeout", "30s")
        .config("spark.jars", ",".join(connector_jars()))
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    # py4j logs every callback at INFO.
    logging.getLogger("py4j").setLevel(logging.WARNING)
    spark_source.register(session)
    session.kafka_connector = bool(connector_jars())  # type: ignore[attr-defined]
    yield session
    session.stop()
