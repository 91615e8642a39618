"""``ordered-kafka`` for Spark: a streaming source that keeps per-key order, and a sink.

Register once per session, then use the format name::

    import spark_source
    spark_source.register(spark)
    df = spark.readStream.format("ordered-kafka").option(...).load()

The package must be importable by Spark's Python workers. When neither
``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` is set, :func:`register` makes the
workers run the driver's interpreter; when one is set to an interpreter of this host
that cannot import the package, :func:`register` fails at once, naming both.
"""

from __future__ import annotations

from typing import Any

__all__ = ["NAME", "register"]

NAME = "ordered-kafka"
"""The format name of the source and the sink."""


def register(spark: Any) -> None:
    """Register the ``ordered-kafka`` source and sink with ``spark`` (a SparkSession).

    Idempotent: registering again replaces the earlier registration. Chooses the
    interpreter of Spark's Python workers first
    (:func:`spark_source.workers.choose_worker_python`).

    Raises:
        coordinator.errors.ConfigError: ``PYSPARK_PYTHON`` or ``spark.pyspark.python``
            names an interpreter of this host that cannot import this package.
    """
    from spark_source.source import OrderedKafkaDataSource
    from spark_source.workers import choose_worker_python

    choose_worker_python(spark)

    spark.dataSource.register(OrderedKafkaDataSource)
