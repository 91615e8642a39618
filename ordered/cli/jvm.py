"""``ordered jvm-jar``: where the JVM producers' jar is, for ``--jars``, ``CLASSPATH``.

JVM producers (plain ``KafkaProducer``, Spark's Kafka sink, Connect, Streams, Flink)
join the layout barrier through ``org.orderedkafka.OrderedPartitioner`` and
``org.orderedkafka.OrderedProducerInterceptor`` (``docs/jvm.md``). Both live in one
shaded jar that ``bash scripts/setup.sh`` builds with Maven from ``jvm/`` into
``jvm/target/ordered-kafka-jvm.jar``; this command prints its absolute path, so that
``spark.jars``, ``CLASSPATH`` or ``plugin.path`` can take it without guessing.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from coordinator.client.errors import JarNotBuiltError
from ordered.cli.output import emit

__all__ = ["JAR_ENV", "JarNotBuiltError", "add_parser", "jar_path"]

JAR_ENV = "ORDERED_JVM_JAR"
"""An environment variable naming the jar, for a jar kept outside the checkout."""

_JAR_NAME = "ordered-kafka-jvm.jar"


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


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``jvm-jar``."""
    command = sub.add_parser(
        "jvm-jar",
        help="print the absolute path of the JVM producers' jar (OrderedPartitioner and "
        "OrderedProducerInterceptor) for spark.jars, CLASSPATH or plugin.path",
    )
    command.add_argument("--json", action="store_true", help="print JSON")
    command.set_defaults(func=_jvm_jar)


def _jvm_jar(args: argparse.Namespace) -> int:
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
