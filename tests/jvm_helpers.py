"""Helpers of the JVM producer tests: the ordered jar, kafka-clients classpaths, Java drivers.

The Java drivers are single-file programs under ``tests/jvm/``, run by Java's
single-source launcher (``java -cp ... tests/jvm/<Driver>.java``): nothing to build but the
ordered jar itself (``bash scripts/setup.sh``). The verifiable reader is the jar's own
(``org.orderedkafka.tools.VerifiableReader``, which ``ordered chaos --java-readers`` runs).
kafka-clients comes from the jars cache: 4.x with Kafka's own tools
(:func:`clients_classpath` ``"4"``), 3.9 as Spark's Kafka connector bundles it (``"3.9"``).
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import shutil
import signal
import subprocess
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any

import pytest

from ordered.cli.jvm import JarNotBuiltError, jar_path
from ordered.devcluster import jars
from ordered.verify import VerifiableProducer, read_events

if TYPE_CHECKING:
    from kit import Kit

__all__ = [
    "INTERCEPTOR",
    "PARTITIONER",
    "JavaProducer",
    "JavaReader",
    "JvmProcess",
    "StreamsReader",
    "clients_classpath",
    "compile_streams_reader",
    "delivered",
    "first_out_of_order",
    "java",
    "ordered_jar",
    "plugin_properties",
    "read_keyed",
    "reader_classpath",
    "reader_properties",
    "verify_producer_config",
    "write_backlog",
    "write_properties",
    "writing",
]

ROOT = Path(__file__).resolve().parents[1]
JVM_TESTS = ROOT / "tests" / "jvm"

PARTITIONER = "org.orderedkafka.OrderedPartitioner"
INTERCEPTOR = "org.orderedkafka.OrderedProducerInterceptor"
READER = "org.orderedkafka.tools.VerifiableReader"


def java() -> str:
    """The ``java`` executable (Java 17+)."""
    found = shutil.which("java")
    if found is None:
        pytest.fail("java not found: install Java 17 (scripts/setup.sh does on Debian)")
    return found


def ordered_jar() -> Path:
    """The built jar; the test fails (not skips) when it is missing: setup builds it."""
    try:
        return jar_path()
    except JarNotBuiltError as exc:
        pytest.fail(str(exc))


def clients_classpath(line: str = "4") -> str:
    """A classpath with kafka-clients ``line`` (``"4"``: Kafka's tools; ``"3.9"``: Spark's).

    Fetched into the jars cache by Maven when missing.
    """
    component = {"4": "kafka-tools", "3.9": "spark-kafka"}[line]
    resolved = jars.resolve(component)
    found = sorted(resolved.directory.glob("kafka-clients-*.jar"))
    assert found and found[0].name.startswith(f"kafka-clients-{line}"), found
    return resolved.classpath


def plugin_properties(bootstrap: str, zk_hosts: str, zk_root: str, **extra: Any) -> dict[str, str]:
    """Producer properties with the ordered partitioner and interceptor on this test's root."""
    props = {
        "bootstrap.servers": bootstrap,
        "partitioner.class": PARTITIONER,
        "interceptor.classes": INTERCEPTOR,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
        "linger.ms": "5",
    }
    props.update({k: str(v) for k, v in extra.items()})
    return props


def write_properties(path: Path, props: dict[str, str]) -> Path:
    """Write ``props`` as a Java properties file (values here need no escaping)."""
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))
    return path


class JvmProcess:
    """A JVM of a test (a driver of ``tests/jvm/``, a Connect worker...), its stderr in
    ``log_path``; :meth:`kill` is SIGKILL."""

    log_path: Path
    proc: subprocess.Popen[str]

    def _start(
        self,
        args: list[str],
        props: dict[str, str],
        stdin: int | None = None,
        *,
        stdout_to_log: bool = False,
    ) -> None:
        """Start ``args`` with ``props`` as ``--property key=value`` arguments; its stdout is
        a pipe (the drivers report on it) or, with ``stdout_to_log``, the log too."""
        for key, value in props.items():
            args += ["--property", f"{key}={value}"]
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 (closed in kill)
        stdout = self._log if stdout_to_log else subprocess.PIPE
        self.proc = subprocess.Popen(
            args, stdin=stdin, stdout=stdout, stderr=self._log, text=True, cwd=ROOT
        )

    def log(self) -> str:
        """The tail of the JVM's stderr."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL, whatever state it is in."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.communicate(timeout=10)
        self._log.close()


class _StoppableJvm(JvmProcess):
    """A :class:`JvmProcess` that closes and exits once its ``stop_file`` exists (:meth:`stop`)."""

    stop_file: Path

    def stop(self, timeout: float = 60.0) -> None:
        """Ask it to close its client and exit; it must exit cleanly."""
        self.stop_file.touch()
        try:
            self.proc.wait(timeout)
        finally:
            self.kill()
        assert self.proc.returncode == 0, f"rc {self.proc.returncode}\n{self.log()}"


class JavaProducer(JvmProcess):
    """``tests/jvm/VerifiableProducer.java`` in its own JVM; killed in :meth:`kill`.

    Its history (``history``) is in the format of :mod:`ordered.verify`; stderr goes to
    ``history`` with the suffix ``.log``.
    """

    def __init__(
        self,
        producer_id: str,
        topic: str,
        history: Path,
        props: dict[str, str],
        *,
        keys: int = 20,
        rate: float = 300.0,
        seed: int = 0,
        line: str = "4",
    ) -> None:
        self.producer_id = producer_id
        self.history = history
        history.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = history.with_suffix(".log")
        classpath = f"{ordered_jar()}:{clients_classpath(line)}"
        args = [
            java(),
            "-Xmx256m",
            "-cp",
            classpath,
            str(JVM_TESTS / "VerifiableProducer.java"),
            "--topic",
            topic,
            "--producer-id",
            producer_id,
            "--history",
            str(history),
            "--keys",
            str(keys),
            "--rate",
            str(rate),
            "--seed",
            str(seed),
        ]
        self._start(args, props, stdin=subprocess.PIPE)

    def _line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.2)
            if ready:
                return self.proc.stdout.readline().strip()
            if self.proc.poll() is not None:
                return ""
        return ""

    def ready(self, timeout: float = 60.0) -> None:
        """Wait until its first record went to ``send()`` (JVM start, compile, configure)."""
        line = self._line(timeout)
        assert line == "READY", f"{self.producer_id}: {line!r}\n{self.log()}"

    def finish(self, timeout: float = 60.0) -> dict[str, int]:
        """Ask it to stop; return its counts once every record is flushed and it closed."""
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("stop\n")
        self.proc.stdin.close()
        self.proc.wait(timeout)
        out = self.proc.stdout.read()
        done = [line for line in out.splitlines() if line.startswith("DONE ")]
        assert self.proc.returncode == 0 and done, (
            f"{self.producer_id}: rc {self.proc.returncode}\n{out}\n{self.log()}"
        )
        self._log.close()
        counts: dict[str, int] = json.loads(done[-1][5:])
        return counts

    def freeze(self) -> None:
        """SIGSTOP: it neither sends nor acks until killed."""
        os.kill(self.proc.pid, signal.SIGSTOP)


def read_keyed(
    consumer: Any, total: int, seconds: float
) -> tuple[dict[str, list[int]], dict[str, set[int]]]:
    """Read ``total`` records of values ``"key:seq"`` (keyed by ``key``) from a subscribed
    consumer within ``seconds``: each key's sequence numbers in the order read, and the
    partitions it was read from. Error events are skipped; a value whose key is not the
    record's key fails the test."""
    seqs: dict[str, list[int]] = defaultdict(list)
    partitions: dict[str, set[int]] = defaultdict(set)
    deadline = time.monotonic() + seconds
    count = 0
    while count < total:
        assert time.monotonic() < deadline, f"read {count} of {total}"
        for msg in consumer.consume(1000, timeout=0.5):
            if msg.error() is not None:
                continue
            key, seq = msg.value().decode().split(":")
            assert msg.key().decode() == key
            seqs[key].append(int(seq))
            partitions[key].add(msg.partition())
            count += 1
    assert count == total, (count, total)
    return seqs, partitions


def reader_classpath(line: str = "4") -> str:
    """The classpath of the jar's verifiable reader: the jar and kafka-clients ``line``."""
    return f"{ordered_jar()}:{clients_classpath(line)}"


def _compile(source: str, into: Path, classpath: str) -> str:
    """Compile ``tests/jvm/<source>`` against ``classpath`` into ``into``; the classpath to
    run it."""
    javac = shutil.which("javac")
    assert javac, "javac not found (Java 17 JDK)"
    into.mkdir(parents=True, exist_ok=True)
    subprocess.run(
        [javac, "-nowarn", "-cp", classpath, "-d", str(into), str(JVM_TESTS / source)],
        check=True,
        capture_output=True,
    )
    return f"{into}:{classpath}"


class JavaReader(_StoppableJvm):
    """The jar's ``VerifiableReader`` in its own JVM: reads ``topic`` in group ``group``
    with ``impl`` (``ordered``: ``OrderedKafkaConsumer``; ``kafka``: ``KafkaConsumer``) and
    writes its deliveries to ``history``; :meth:`stop` closes it, :meth:`kill` is SIGKILL."""

    def __init__(
        self,
        classpath: str,
        impl: str,
        topic: str,
        group: str,
        reader_id: str,
        history: Path,
        props: dict[str, str],
        *,
        commit: str = "auto",
        delay_ms: int = 0,
    ) -> None:
        self.history = history
        history.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = history.with_suffix(".log")
        self.stop_file = history.with_suffix(".stop")
        args = [
            java(),
            "-Xmx128m",
            "-XX:TieredStopAtLevel=1",
            "-cp",
            classpath,
            READER,
            "--impl",
            impl,
            "--topic",
            topic,
            "--group",
            group,
            "--reader-id",
            reader_id,
            "--history",
            str(history),
            "--commit",
            commit,
            "--stop-file",
            str(self.stop_file),
            "--delay-ms",
            str(delay_ms),
        ]
        self._start(args, props)


def compile_streams_reader(into: Path) -> str:
    """Compile ``tests/jvm/StreamsReader.java`` once into ``into`` against Kafka Streams (the
    jars cache's ``kafka-streams``); the classpath to run it."""
    classpath = f"{ordered_jar()}:{jars.resolve('kafka-streams').classpath}"
    return _compile("StreamsReader.java", into, classpath)


class StreamsReader(_StoppableJvm):
    """``tests/jvm/StreamsReader.java`` in its own JVM: a stateless Kafka Streams application
    (``supplier``: ``ordered``, with ``OrderedKafkaClientSupplier``; ``kafka``: without) that
    writes what it processes to ``history``; :meth:`stop` closes it, :meth:`kill` is SIGKILL."""

    def __init__(
        self,
        classpath: str,
        supplier: str,
        topic: str,
        application_id: str,
        reader_id: str,
        history: Path,
        props: dict[str, str],
        *,
        delay_ms: int = 0,
    ) -> None:
        history.parent.mkdir(parents=True, exist_ok=True)
        self.log_path = history.with_suffix(".log")
        self.stop_file = history.with_suffix(".stop")
        args = [java(), "-Xmx256m", "-XX:TieredStopAtLevel=1", "-cp", classpath, "StreamsReader"]
        args += ["--supplier", supplier, "--topic", topic, "--application-id", application_id]
        args += ["--reader-id", reader_id, "--history", str(history)]
        args += ["--stop-file", str(self.stop_file), "--delay-ms", str(delay_ms)]
        self._start(args, props)


def verify_producer_config(kit: Kit) -> dict[str, Any]:
    """The readers' tests' ``OrderedProducer`` configuration: this test's cluster and store
    root, ``linger.ms`` 5."""
    return {
        "bootstrap.servers": kit.bootstrap,
        "ordered.zookeeper.connect": kit.zk_hosts,
        "ordered.zookeeper.root": kit.zk_root,
        "linger.ms": 5,
    }


def reader_properties(kit: Kit, extra: dict[str, str]) -> dict[str, str]:
    """A Java reader's properties: this test's cluster and store root, gates polled every
    50 ms, then ``extra``."""
    return {
        "bootstrap.servers": kit.bootstrap,
        "ordered.zookeeper.connect": kit.zk_hosts,
        "ordered.zookeeper.root": kit.zk_root,
        "ordered.gate.poll.interval.ms": "50",
        **extra,
    }


def write_backlog(
    kit: Kit, history: Path, keys: list[str], steps: Sequence[tuple[str, int]]
) -> tuple[str, int]:
    """A topic of 2 partitions, adopted, into which a ``VerifiableProducer`` writes ``keys``
    (80 bytes of padding, 2,500 records a second; its history ``history/producer.jsonl``)
    while the controller takes ``steps`` (``("expand", 3)``...: a method and a partition
    count) 1.5 s apart; the topic and the records acked (none nacked)."""
    topic = kit.adopted_topic(2)
    with writing(kit, topic, history / "producer.jsonl", keys) as producer:
        time.sleep(1.5)
        for step, to in steps:
            getattr(kit.controller, step)(topic, to, timeout=60)
            time.sleep(1.5)
    assert [e.to_active for e in kit.store.epochs(topic)] == [2, *(to for _, to in steps)]
    return topic, int(producer.acked)


@contextlib.contextmanager
def writing(
    kit: Kit,
    topic: str,
    history: Path,
    keys: list[str],
    *,
    producer_id: str = "py",
    rate: float = 2500.0,
) -> Iterator[VerifiableProducer]:
    """A ``VerifiableProducer`` (``producer_id``, its history ``history``) writes ``keys`` to
    ``topic`` (80 bytes of padding, ``rate`` records a second) in a thread while the block
    runs; at its end every record is flushed, and none may be nacked."""
    producer = VerifiableProducer(
        verify_producer_config(kit), producer_id, topic, history, keys, padding=80
    )
    stop = False
    writer = threading.Thread(target=lambda: producer.run(rate, stop=lambda: stop))
    writer.start()
    try:
        yield producer
    finally:
        stop = True
        writer.join(60)
        producer.close()
    assert producer.nacked == 0, producer.nacked


def delivered(history: Path, group: str | None = None) -> int:
    """The records (producer, sequence) delivered in ``history``'s ``*.jsonl`` (to ``group``,
    or to any group)."""
    return len(
        {
            (e["p"], e["s"])
            for e in read_events(sorted(history.glob("*.jsonl")))
            if e["ev"] == "dlv" and (group is None or e["g"] == group)
        }
    )


def first_out_of_order(events: list[dict[str, Any]], group: str) -> int:
    """First deliveries to ``group`` whose sequence is below one delivered before for the key."""
    seen: set[tuple[str, int]] = set()
    top: dict[tuple[str, str], int] = {}
    bad = 0
    dlv = (e for e in events if e["ev"] == "dlv" and e["g"] == group)
    for ev in sorted(dlv, key=lambda e: e["ts"]):
        rid = (ev["p"], int(ev["s"]))
        if rid in seen:
            continue
        seen.add(rid)
        key = (ev["p"], ev["k"])
        if int(ev["s"]) < top.get(key, -1):
            bad += 1
        top[key] = max(top.get(key, -1), int(ev["s"]))
    return bad
