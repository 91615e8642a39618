"""The Java reader kind of a chaos run: main-group members that are ``OrderedKafkaConsumer``s.

``ordered chaos --java-readers N`` fills N of the main group's slots with the jar's
``org.orderedkafka.tools.VerifiableReader`` in place of the Python worker. It takes the
configuration a Python member gets (:func:`ordered.chaos.worker._run_reader`) in Kafka's
names, writes its history in the same format, and answers the run's signals the same way:
SIGKILL and SIGSTOP as any process, SIGTERM leaves the group, SIGHUP drains. Session
expiry (SIGUSR1) is the one fault it does not take: the Java consumer keeps its ZooKeeper
session to itself, so the run aims that fault at a Python member instead.
"""

from __future__ import annotations

import shutil
from typing import Any

from coordinator.kernel.errors import OrderedError
from ordered.devcluster import jars

__all__ = ["MAIN_CLASS", "java_argv", "java_command"]

MAIN_CLASS = "org.orderedkafka.tools.VerifiableReader"

# The Python member's settings (ordered/chaos/worker.py), as the Java client names them.
_PROPERTIES = {
    "ordered.zookeeper.session.timeout.ms": "6000",
    "auto.offset.reset": "earliest",
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "500",
    # The group's protocol must be one both clients speak: librdkafka's "roundrobin".
    "partition.assignment.strategy": "org.apache.kafka.clients.consumer.RoundRobinAssignor",
    "metadata.max.age.ms": "2000",
    "ordered.gate.poll.interval.ms": "100",
    "max.partition.fetch.bytes": "8192",
}


def java_command() -> list[str]:
    """``java`` with the jar and kafka-clients on its classpath, ready for a reader's arguments.

    Raises:
        OrderedError: Java is not installed, the jar is not built, or kafka-clients is
            neither cached nor fetchable; the message says which.
    """
    # Not at the top: ordered.cli imports the chaos run, which imports this module.
    from ordered.cli.jvm import jar_path

    java = shutil.which("java")
    if java is None:
        raise OrderedError(
            "--java-readers needs Java 17 or later (`java` is not on PATH); "
            "`bash scripts/setup.sh` installs it on Debian"
        )
    jar = jar_path()
    clients = jars.resolve("kafka-tools")
    # A reader starts and restarts often and reads little: a small heap, the quick JIT.
    tuning = ["-Xmx192m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC"]
    return [java, *tuning, "-cp", f"{jar}:{clients.classpath}", MAIN_CLASS]


def java_argv(command: list[str], spec: dict[str, Any]) -> list[str]:
    """The command line of the Java member a worker ``spec`` describes."""
    argv = [*command, "--topic", spec["topic"], "--group", spec["group"]]
    argv += ["--reader-id", spec["id"], "--history", spec["history"], "--stats", spec["stats"]]
    argv += ["--commit", "sync", "--idle-exit", str(float(spec.get("idle_exit", 20.0)))]
    props = {
        "bootstrap.servers": spec["bootstrap"],
        "ordered.zookeeper.connect": spec["zookeeper"],
        "ordered.zookeeper.root": spec["root"],
        **_PROPERTIES,
    }
    if spec.get("read_committed"):
        props["isolation.level"] = "read_committed"
    for key, value in props.items():
        argv += ["--property", f"{key}={value}"]
    return argv
