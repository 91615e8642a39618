"""``ordered jvm-jar``: where the JVM producers' jar is, for ``--jars``, ``CLASSPATH``.

JVM producers (plain ``KafkaProducer``, Spark's Kafka sink, Connect, Streams, Flink)
join the layout barrier through ``org.orderedkafka.OrderedPartitioner`` and
``org.orderedkafka.OrderedProducerInterceptor`` (``docs/jvm.md``). Both live in one
shaded jar that ``bash scripts/setup.sh`` builds with Maven from ``jvm/`` into
``jvm/target/ordered-kafka-jvm.jar``; this command prints its absolute path, so that
``spark.jars``, ``CLASSPATH`` or ``plugin.path`` can take it without guessing.

``--spark 3.5`` or ``--spark 4`` prints instead the jar of the JVM Spark source
(``format("ordered-kafka-jvm")``, ``docs/spark-jvm.md``) built for that Spark line:
``jvm-spark/target/ordered-kafka-spark-3.5.jar`` (Spark 3.5, Scala 2.12) or
``jvm-spark/target/ordered-kafka-spark.jar`` (Spark 4, Scala 2.13). It goes on
``spark.jars`` beside the plugins' jar and Spark's Kafka connector.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from coordinator.kernel.errors import JarNotBuiltError
from ordered.cli.output import emit

__all__ = ["JAR_ENV", "SPARK_LINES", "JarNotBuiltError", "add_parser", "jar_path", "spark_jar_path"]

JAR_ENV = "ORDERED_JVM_JAR"
"""An environment variable naming the jar, for a jar kept outside the checkout."""

_JAR_NAME = "ordered-kafka-jvm.jar"

SPARK_LINES = {"3.5": "ordered-kafka-spark-3.5.jar", "4": "ordered-kafka-spark.jar"}
"""The JVM Spark source's jar in ``jvm-spark/target/`` for each Spark line."""

_PROVIDER = "org.orderedkafka.spark.OrderedKafkaProvider"


def _checkout() -> Path:
    # ordered/cli/jvm.py -> the repository root (the package is installed editable).
    return Path(__file__).resolve().parents[2]


def jar_path() -> Path:
    """The absolute path of the shaded jar of ``OrderedPartitioner`` and its interceptor.

    ``$ORDERED_JVM_JAR`` when set, else ``jvm/target/ordered-kafka-jvm.jar`` of the
    checkout this package runs from.

    Raises:
        JarNotBuiltError: no file is there; the message says how to build it.
    """
    named = os.environ.get(JAR_ENV)
    path = (
        Path(named).expanduser().resolve() if named else _checkout() / "jvm" / "target" / _JAR_NAME
    )
    if not path.is_file():
        where = f"${JAR_ENV} names {path}, which" if named else str(path)
        raise JarNotBuiltError(
            f"the JVM jar is not built: {where} does not exist; build it with "
            "`bash scripts/setup.sh` (needs Java 17 and Maven)"
        )
    return path


def spark_jar_path(line: str) -> Path:
    """The absolute path of the JVM Spark source's jar for Spark ``line`` (``3.5`` or ``4``).

    Raises:
        ValueError: ``line`` is not a key of :data:`SPARK_LINES`.
        JarNotBuiltError: the jar is not built; the message says how to build it.
    """
    try:
        name = SPARK_LINES[line]
    except KeyError:
        raise ValueError(
            f"the Spark line must be one of {sorted(SPARK_LINES)}, not {line!r}"
        ) from None
    path = _checkout() / "jvm-spark" / "target" / name
    if not path.is_file():
        raise JarNotBuiltError(
            f"the JVM Spark source's jar for Spark {line} is not built: {path} does not exist; "
            "build it with `bash scripts/setup.sh` (needs Java 17 and Maven)"
        )
    return path


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``jvm-jar``."""
    command = sub.add_parser(
        "jvm-jar",
        help="print the absolute path of the JVM producers' jar (OrderedPartitioner and "
        "OrderedProducerInterceptor) for spark.jars, CLASSPATH or plugin.path",
    )
    command.add_argument("--json", action="store_true", help="print JSON")
    command.add_argument(
        "--spark",
        choices=sorted(SPARK_LINES),
        help="print instead the JVM Spark source's jar (format ordered-kafka-jvm) built for "
        "this Spark line: 3.5 (Scala 2.12) or 4 (Scala 2.13)",
    )
    command.set_defaults(func=_jvm_jar)


def _jvm_jar(args: argparse.Namespace) -> int:
    if args.spark:
        source = spark_jar_path(args.spark)
        emit(
            {
                "jar": str(source),
                "spark": args.spark,
                "provider": _PROVIDER,
                "format": "ordered-kafka-jvm",
            },
            str(source),
            args.json,
        )
        return 0
    path = jar_path()
    emit(
        {
            "jar": str(path),
            "partitioner": "org.orderedkafka.OrderedPartitioner",
            "interceptor": "org.orderedkafka.OrderedProducerInterceptor",
        },
        str(path),
        args.json,
    )
    return 0
