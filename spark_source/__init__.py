"""``ordered-kafka`` for Spark: a streaming source that keeps per-key order, and a sink.

Register once per session, then use the format name::

    import spark_source
    spark_source.register(spark)
    df = spark.readStream.format("ordered-kafka").option(...).load()

The package must be importable by Spark's Python workers. When neither
``PYSPARK_PYTHON`` nor ``spark.pyspark.python`` is set, :func:`register` makes the
workers run the driver's interpreter; when one is set to an interpreter of this host
that cannot import the package, :func:`register` fails at once, naming both.

Wrap ``foreachBatch`` functions in :func:`stoppable` (classic sessions): a
``query.stop()`` during a batch then stops the query cleanly instead of killing its
thread with a ``StackOverflowError`` in Spark's own error matching
(:mod:`spark_source.stopping`).
"""

from __future__ import annotations

from typing import Any

from spark_source.stopping import BatchStoppedError, stoppable

__all__ = ["NAME", "BatchStoppedError", "register", "stoppable"]

NAME = "ordered-kafka"
"""The format name of the source and the sink."""


def register(spark: Any, *, prefer_installed_pyspark: bool = True) -> None:
    """Register the ``ordered-kafka`` source and sink with ``spark`` (a SparkSession).

    Idempotent: registering again replaces the earlier registration. Chooses the
    interpreter of Spark's Python workers first
    (:func:`spark_source.workers.choose_worker_python`).

    Args:
        spark: The session.
        prefer_installed_pyspark: The Python processes Spark starts for this source and
            sink import pyspark (and py4j) from their installed, compiled copies when
            those are the same version as the zips Spark puts first on their path,
            instead of compiling the zips' modules in every new process
            (:mod:`spark_source._startup`). Spark starts one such process per streaming
            query. Classic sessions only; ``False`` leaves Spark's path as it is.

    Raises:
        coordinator.kernel.errors.ConfigError: ``PYSPARK_PYTHON`` or ``spark.pyspark.python``
            names an interpreter of this host that cannot import this package.
    """
    from spark_source.source import OrderedKafkaDataSource
    from spark_source.workers import choose_worker_python, startup_environment

    choose_worker_python(spark)
    context = getattr(spark, "_sc", None)
    if context is None or not prefer_installed_pyspark:
        spark.dataSource.register(OrderedKafkaDataSource)
        return
    # pyspark copies the context's worker environment into the registered data source,
    # and Spark gives every process of the source that environment: swapped for the
    # call only, so UDFs registered later keep the user's.
    saved = context.environment
    context.environment = startup_environment(saved)
    try:
        spark.dataSource.register(OrderedKafkaDataSource)
    finally:
        context.environment = saved
