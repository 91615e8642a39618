"""Kafka Connect sinks keep key order when wrapped: ``OrderedSinkConnector``.

A backlog is written by an ``OrderedProducer`` while the topic expands 2 -> 3 -> 4. A
standalone Connect worker (``connect-runtime`` and ``connect-file`` of the jars cache's
``kafka-connect``, the ordered jar and ``connect-file`` on its ``plugin.path``) then reads
it from the beginning with two connectors of two tasks each, side by side, each writing to
a file: ``FileStreamSinkConnector`` wrapped by ``org.orderedkafka.connect.OrderedSinkConnector``
writes every key in order and loses nothing; the same connector alone writes keys out of
order (the test can tell the two apart). Small fetches make each task read its partitions
side by side, as a consumer with a backlog of several partitions does. A wrapper without
``ordered.zookeeper.connect`` stops the worker with one error naming the key.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import IO

import pytest
from helpers import unique, wait_until
from jvm_helpers import java, ordered_jar, write_backlog
from kit import Kit

from ordered.devcluster import jars
from ordered.verify import read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEYS = [f"k{i}" for i in range(40)]
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
WRAPPER = "org.orderedkafka.connect.OrderedSinkConnector"
LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %c{1}: %m%n
logger.gates.name = org.orderedkafka.connect.SinkGates
logger.gates.level = DEBUG
"""


class ConnectWorker:
    """``connect-standalone`` (``ConnectStandalone``) with ``connectors``, in its own JVM; its
    log in ``log_path``; :meth:`kill` is SIGKILL."""

    def __init__(
        self, root: Path, worker: dict[str, str], connectors: list[dict[str, str]]
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.log_path = root / "worker.log"
        resolved = jars.resolve("kafka-connect")
        # connect-file is a plugin (plugin.path), as in Kafka's distribution; the wrapper
        # loads it through the worker's plugin loaders.
        classpath = ":".join(
            str(j) for j in sorted(resolved.directory.glob("*.jar")) if "connect-file" not in j.name
        )
        plugins = root / "plugins"
        (plugins / "ordered").mkdir(parents=True, exist_ok=True)
        (plugins / "file").mkdir(exist_ok=True)
        (plugins / "ordered" / "ordered-kafka-jvm.jar").symlink_to(ordered_jar())
        for found in resolved.directory.glob("connect-file-*.jar"):
            (plugins / "file" / found.name).symlink_to(found)
        (root / "log4j2.properties").write_text(LOG4J)
        props = {
            "plugin.path": str(plugins),
            "offset.storage.file.filename": str(root / "offsets"),
            "listeners": "http://127.0.0.1:0",
            **worker,
        }
        _write(root / "worker.properties", props)
        args = [java(), "-Xmx384m", "-XX:TieredStopAtLevel=1", "-cp", classpath]
        args += [f"-Dlog4j2.configurationFile={root / 'log4j2.properties'}"]
        args += ["org.apache.kafka.connect.cli.ConnectStandalone", str(root / "worker.properties")]
        for i, connector in enumerate(connectors):
            _write(root / f"connector-{i}.properties", connector)
            args.append(str(root / f"connector-{i}.properties"))
        self._log: IO[bytes] = open(self.log_path, "wb")  # noqa: SIM115 (closed in kill)
        self.proc = subprocess.Popen(args, stdout=self._log, stderr=subprocess.STDOUT)

    def log(self) -> str:
        """The tail of the worker's log."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def kill(self) -> None:
        """SIGKILL, whatever state it is in."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, signal.SIGKILL)
        with contextlib.suppress(Exception):
            self.proc.wait(timeout=10)
        self._log.close()


def _write(path: Path, props: dict[str, str]) -> None:
    path.write_text("".join(f"{k}={v}\n" for k, v in props.items()))


def sequences(output: Path) -> list[tuple[str, int]]:
    """The (producer, sequence) of every line the file sink wrote, in file order."""
    if not output.exists():
        return []
    out = []
    for line in output.read_text(errors="replace").splitlines():
        parts = line.split("|")
        if len(parts) >= 3 and parts[1].isdigit():
            out.append((parts[0], int(parts[1])))
    return out


def keys_of(producer_history: Path) -> dict[tuple[str, int], str]:
    """(producer, sequence) -> key of every acknowledged record."""
    return {
        (e["p"], int(e["s"])): e["k"] for e in read_events([producer_history]) if e["ev"] == "ack"
    }


def out_of_order(lines: list[tuple[str, int]], keys: dict[tuple[str, int], str]) -> int:
    """First writes of a record whose sequence is below one written before for its key."""
    seen: set[tuple[str, int]] = set()
    top: dict[tuple[str, str], int] = {}
    bad = 0
    for rid in lines:
        if rid in seen or rid not in keys:
            continue
        seen.add(rid)
        key = (rid[0], keys[rid])
        if rid[1] < top.get(key, -1):
            bad += 1
        top[key] = max(top.get(key, -1), rid[1])
    return bad


def hold_seconds(log: str) -> list[float]:
    """How long each hold of the worker's log lasted (``SinkGates``' debug lines), in seconds."""
    held: dict[str, datetime] = {}
    out = []
    for line in log.splitlines():
        match = re.match(r"\[([\d-]+ [\d:,]+)\] DEBUG SinkGates: (\S+) (held at|goes on at)", line)
        if match is None:
            continue
        at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f")
        if match[3] == "held at":
            held.setdefault(match[2], at)
        elif match[2] in held:
            out.append((at - held.pop(match[2])).total_seconds())
    return out


def test_a_wrapped_file_sink_writes_every_key_in_order_and_the_bare_one_does_not(
    tmp_path: Path, kit: Kit, jvm_processes: list[ConnectWorker]
) -> None:
    started = time.monotonic()
    topic, acked = write_backlog(kit, tmp_path / "backlog", KEYS, (("expand", 3), ("expand", 4)))
    assert acked > 5000, acked
    keys = keys_of(tmp_path / "backlog" / "producer.jsonl")
    connectors = []
    outputs = {mode: tmp_path / f"{mode}.txt" for mode in ("ordered", "bare")}
    for mode, output in outputs.items():
        connector = {
            "name": unique(f"files-{mode}"),
            "connector.class": FILE_SINK,
            "tasks.max": "2",
            "topics": topic,
            "file": str(output),
        }
        if mode == "ordered":
            connector.update(
                {
                    "connector.class": WRAPPER,
                    "ordered.sink.connector.class": FILE_SINK,
                    "ordered.sink.admin.bootstrap.servers": kit.bootstrap,
                    "ordered.zookeeper.connect": kit.zk_hosts,
                    "ordered.zookeeper.root": kit.zk_root,
                    "ordered.gate.poll.interval.ms": "50",
                }
            )
        connectors.append(connector)
    # One worker runs both connectors side by side, each in its own group.
    worker = ConnectWorker(
        tmp_path / "worker",
        {
            "bootstrap.servers": kit.bootstrap,
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            # Boundaries are committed when a task asks (requestCommit), not by this clock.
            "offset.flush.interval.ms": "10000",
            # Small fetches: each fetch brings a few records of every partition, so a task
            # reads its partitions side by side.
            "consumer.max.poll.records": "50",
            "consumer.max.partition.fetch.bytes": "4096",
        },
        connectors,
    )
    jvm_processes.append(worker)
    began = time.monotonic()

    def written(mode: str) -> int:
        return len({rid for rid in sequences(outputs[mode]) if rid in keys})

    wait_until(
        lambda: all(written(mode) >= acked for mode in outputs),
        90,
        what=lambda: f"{ {m: written(m) for m in outputs} } of {acked}\n{worker.log()}",
        interval=0.5,
    )
    seconds = round(time.monotonic() - began, 1)
    worker.kill()
    figures: dict[str, int] = {}
    for mode, output in outputs.items():
        lines = sequences(output)
        figures[mode] = out_of_order(lines, keys)
        lost = set(keys) - set(lines)
        assert not lost, (mode, len(lost))
    held_for = hold_seconds(worker.log_path.read_text(errors="replace"))
    print(f"out of order: {figures}; holds (s): {held_for}; both wrote {acked} in {seconds} s")
    print(f"test took {time.monotonic() - started:.1f} s")
    assert figures["ordered"] == 0, figures
    assert figures["bare"] > 0, figures
    assert held_for, "the wrapped sink never held a partition: the test shows nothing"
    # The sources' tasks ask for their boundary commits: no hold waits for the worker's
    # 10 s commit clock.
    assert max(held_for) < 8, held_for


def test_a_misconfigured_wrapper_stops_the_worker_with_one_error_naming_the_key(
    tmp_path: Path, kit: Kit, jvm_processes: list[ConnectWorker]
) -> None:
    connector = {
        "name": unique("files-misconfigured"),
        "connector.class": WRAPPER,
        "ordered.sink.connector.class": FILE_SINK,
        "ordered.sink.admin.bootstrap.servers": kit.bootstrap,
        "topics": unique("t"),
        "file": str(tmp_path / "sink.txt"),
    }
    settings = {
        "bootstrap.servers": kit.bootstrap,
        "key.converter": "org.apache.kafka.connect.storage.StringConverter",
        "value.converter": "org.apache.kafka.connect.storage.StringConverter",
    }
    worker = ConnectWorker(tmp_path / "worker", settings, [connector])
    jvm_processes.append(worker)
    wait_until(lambda: worker.proc.poll() is not None, 90, what=worker.log, interval=0.5)
    log = worker.log_path.read_text(errors="replace")
    assert (
        "contains the following 1 error(s):\n"
        "ordered.zookeeper.connect is required (the layout store)"
    ) in log, worker.log()
