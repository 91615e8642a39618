"""What the JVM benchmarks share (``bench_jvm.py``, ``bench_jvm_consumer.py``).

Their run (the ordered jar, Kafka's tools, the servers, a scratch store root and a
folder for the compiled drivers), the JDK's tools, the ordered producer plugins, the
facts of the JVM in the result file and the summaries of the rounds.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import scratch_root, servers
from kazoo.client import KazooClient

from ordered.cli.jvm import jar_path
from ordered.devcluster import jars

__all__ = [
    "ORDERED_PRODUCER_PLUGINS",
    "JvmRun",
    "cpu_summary",
    "java_tool",
    "javac",
    "jvm_facts",
    "jvm_run",
    "quartiles",
    "rate_summary",
    "ratio_summary",
]

ORDERED_PRODUCER_PLUGINS = {
    "partitioner.class": "org.orderedkafka.OrderedPartitioner",
    "interceptor.classes": "org.orderedkafka.OrderedProducerInterceptor",
}
"""A ``KafkaProducer``'s properties that make it an ordered one (with ``ordered.zookeeper.*``)."""


def java_tool(name: str) -> str:
    """The JDK's ``name`` (``java``, ``javac``); exits when there is none."""
    found = shutil.which(name)
    if found is None:
        raise SystemExit(f"{name} not found: install Java 17 (a JDK)")
    return found


def javac(into: Path, classpath: str, sources: list[Path], *options: str) -> None:
    """Compile the drivers ``sources`` into ``into`` once (a single-source launch would
    compile them again in every JVM); ``options`` come first (``-nowarn``)."""
    subprocess.run(
        [java_tool("javac"), *options, "-d", str(into), "-cp", classpath, *map(str, sources)],
        check=True,
        capture_output=True,
        text=True,
    )


@dataclass(frozen=True)
class JvmRun:
    """One JVM benchmark's run: what :func:`jvm_run` found and started."""

    jar: Path
    """The ordered jar."""
    tools: jars.ResolvedJars
    """Kafka's tools (kafka-clients 4.x) in the jars cache."""
    load_start: tuple[float, float, float]
    """The load averages before the servers started."""
    bootstrap: str
    zookeeper: str
    kz: KazooClient
    """A started kazoo client (closed when the run ends)."""
    root: str
    """A fresh store root (deleted when the run ends)."""
    classes: Path
    """A folder for the compiled drivers (deleted when the run ends)."""


@contextlib.contextmanager
def jvm_run(args: argparse.Namespace, name: str) -> Iterator[JvmRun]:
    """Find the jar and Kafka's tools, then yield the run on the servers of ``args``
    (:func:`_common.servers`) with a scratch root and a temporary ``bench-<name>-`` folder."""
    jar = jar_path()
    tools = jars.resolve("kafka-tools")
    load_start = os.getloadavg()
    with (
        servers(args, name) as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (kz, root),
        tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp,
    ):
        classes = Path(tmp) / "classes"
        yield JvmRun(jar, tools, load_start, bootstrap, zookeeper, kz, root, classes)


def jvm_facts(run: JvmRun) -> dict[str, Any]:
    """The result file's facts of the JVM side: ``java -version``, kafka-clients, the jar."""
    kafka_clients = sorted(p.name for p in run.tools.directory.glob("kafka-clients-*.jar"))
    return {
        "java": subprocess.run(
            [java_tool("java"), "-version"], capture_output=True, text=True, check=False
        ).stderr.splitlines()[0],
        "kafka_clients": kafka_clients[0] if kafka_clients else None,
        "jar": run.jar.name,
    }


def quartiles(values: list[float]) -> tuple[float, float]:
    """The first and third quartiles (the one value twice when there is one)."""
    if len(values) < 2:
        return values[0], values[0]
    q = statistics.quantiles(values, n=4, method="inclusive")
    return q[0], q[2]


def rate_summary(values: list[float]) -> dict[str, Any]:
    """One side's records/s over the rounds: median, min, max and each round, whole."""
    return {
        "median": round(statistics.median(values)),
        "min": round(min(values)),
        "max": round(max(values)),
        "rounds": [round(x) for x in values],
    }


def ratio_summary(values: list[float]) -> dict[str, Any]:
    """Per-round ratios: median, quartiles, min, max and each round, to 3 places."""
    low, high = quartiles(values)
    return {
        "median": round(statistics.median(values), 3),
        "q1": round(low, 3),
        "q3": round(high, 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
        "rounds": [round(x, 3) for x in values],
    }


def cpu_summary(values: list[float]) -> dict[str, Any]:
    """CPU figures over the rounds: median and each round, to 3 places."""
    return {"median": round(statistics.median(values), 3), "rounds": [round(x, 3) for x in values]}
