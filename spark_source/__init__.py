"""``ordered-kafka`` for Spark: a streaming source that keeps per-key order, and a sink.

Register once per session, then use the format name::

    import spark_source
    spark_source.register(spark)
    df = spark.readStream.format("ordered-kafka").option(...).load()

The package must be importable by Spark's Python workers (installed in their
environment, or on ``PYTHONPATH``).
"""

from __future__ import annotations

from typing import Any

__all__ = ["NAME", "register"]

NAME = "ordered-kafka"
"""The format name of the source and the sink."""


def register(spark: Any) -> None:
    """Register the ``ordered-kafka`` source and sink with ``spark`` (a SparkSession).

    Idempotent: registering again replaces the earlier registration.
    """
    from spark_source.source import OrderedKafkaDataSource

    spark.dataSource.register(OrderedKafkaDataSource)
