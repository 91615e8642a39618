"""Kafka Connect sinks keep key order when wrapped: ``OrderedSinkConnector``.

A backlog is written by an ``OrderedProducer`` while the topic expands 2 -> 3 -> 4. A
standalone Connect worker (``connect-runtime`` and ``connect-file`` of the jars cache's
``kafka-connect``, the ordered jar and ``connect-file`` on its ``plugin.path``) then reads
it from the beginning with two connectors of two tasks each, side by side, each writing to
a file: ``FileStreamSinkConnector`` wrapped by ``org.orderedkafka.connect.OrderedSinkConnector``
and the same connector alone. While the worker reads, a second producer writes and the
topic expands to 5; the worker is killed (SIGKILL) while the wrapper holds a partition,
and started again to finish. The wrapped file has every key in order and loses nothing,
and no offset the wrapper's group committed passes a partition's first held record: not
in Kafka at the kill, nor in any commit the worker logged. The bare file has keys out of
order (the test can tell the two apart). Small fetches make each task read its partitions
side by side, as a consumer with a backlog of several partitions does. A wrapper without
``ordered.zookeeper.connect`` stops the worker with one error naming the key.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from helpers import unique, wait_until
from jvm_helpers import (
    JvmProcess,
    java,
    ordered_jar,
    write_backlog,
    write_properties,
    writing,
)
from kit import Kit

from coordinator.kernel.kafka_admin import KafkaAdmin
from ordered.devcluster import jars
from ordered.verify import read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEYS = [f"k{i}" for i in range(40)]
FILE_SINK = "org.apache.kafka.connect.file.FileStreamSinkConnector"
WRAPPER = "org.orderedkafka.connect.OrderedSinkConnector"
# The connector and task of each line (Connect's MDC), the wrapper's holds (SinkGates) and
# every commit the worker's sink tasks send (WorkerSinkTask), both at DEBUG.
LOG4J = """\
rootLogger.level = WARN
rootLogger.appenderRef.stderr.ref = STDERR
appender.stderr.type = Console
appender.stderr.name = STDERR
appender.stderr.target = SYSTEM_ERR
appender.stderr.layout.type = PatternLayout
appender.stderr.layout.pattern = [%d] %p %c{1}: %X{connector.context}%m%n
logger.gates.name = org.orderedkafka.connect.SinkGates
logger.gates.level = DEBUG
logger.commits.name = org.apache.kafka.connect.runtime.WorkerSinkTask
logger.commits.level = DEBUG
"""


class ConnectWorker(JvmProcess):
    """``connect-standalone`` (``ConnectStandalone``) with ``connectors``, in its own JVM;
    :meth:`kill` is SIGKILL, :meth:`restart` starts it again with the same settings and a
    new log (``worker-1.log``, ``worker-2.log``... in ``root``)."""

    def __init__(
        self, root: Path, worker: dict[str, str], connectors: list[dict[str, str]]
    ) -> None:
        root.mkdir(parents=True, exist_ok=True)
        self.root = root
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
        self._worker = {
            "plugin.path": str(plugins),
            "offset.storage.file.filename": str(root / "offsets"),
            "listeners": "http://127.0.0.1:0",
            **worker,
        }
        self._args = [java(), "-Xmx384m", "-XX:TieredStopAtLevel=1", "-cp", classpath]
        self._args += [f"-Dlog4j2.configurationFile={root / 'log4j2.properties'}"]
        self._args += [
            "org.apache.kafka.connect.cli.ConnectStandalone",
            str(root / "worker.properties"),
        ]
        for i, connector in enumerate(connectors):
            self._args.append(str(write_properties(root / f"connector-{i}.properties", connector)))
        self.logs: list[Path] = []
        self.restart()

    def restart(self, **worker: str) -> None:
        """Start the worker (again: after :meth:`kill`), with ``worker`` over its settings,
        logging to a new file."""
        self._worker.update(worker)
        write_properties(self.root / "worker.properties", self._worker)
        self.log_path = self.root / f"worker-{len(self.logs) + 1}.log"
        self.logs.append(self.log_path)
        self._start(list(self._args), {}, stdout_to_log=True)


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


def keys_of(*producer_histories: Path) -> dict[tuple[str, int], str]:
    """(producer, sequence) -> key of every acknowledged record."""
    return {
        (e["p"], int(e["s"])): e["k"]
        for e in read_events(list(producer_histories))
        if e["ev"] == "ack"
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


# "[name|task-0] " is Connect's MDC: absent on lines of no task thread.
HOLD_LINE = re.compile(
    r"\[([\d-]+ [\d:,]+)\] DEBUG SinkGates: (?:\[[^\]]*\] )?(\S+) "
    r"(held at|goes on at|no longer held at) offset (\d+)"
)
COMMITTED = re.compile(r"([\w.-]+-\d+)=OffsetAndMetadata\{offset=(\d+)")


@dataclass
class GateLog:
    """What one worker log tells of the wrapper's holds and of its group's commits."""

    holds: list[float] = field(default_factory=list)
    """How long each hold that ended with its gate opening lasted, in seconds."""
    held: dict[str, int] = field(default_factory=dict)
    """Partition (``topic-p``) -> its first held record, at the log's end."""
    commits: int = 0
    """Offsets the connector's tasks sent in commits while the partition was held."""
    passed: list[str] = field(default_factory=list)
    """Those of them past the partition's first held record."""


def read_gate_log(log: str, connector: str) -> GateLog:
    """``SinkGates``' hold lines and the worker's commit lines of ``connector``, in log order
    (a task logs its holds and its commits from one thread, so the order is theirs)."""
    out = GateLog()
    since: dict[str, datetime] = {}
    commit = f"WorkerSinkTask{{id={connector}-"
    for line in log.splitlines():
        match = HOLD_LINE.match(line)
        if match is not None:
            at = datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f")
            tp, what = match[2], match[3]
            if what == "held at":
                out.held.setdefault(tp, int(match[4]))
                since.setdefault(tp, at)
            elif what == "goes on at" and tp in since:
                out.holds.append((at - since.pop(tp)).total_seconds())
                out.held.pop(tp, None)
            else:
                since.pop(tp, None)
                out.held.pop(tp, None)
        elif commit in line and "Committing offsets" in line:
            for tp, offset in COMMITTED.findall(line):
                if tp in out.held:
                    out.commits += 1
                    if int(offset) > out.held[tp]:
                        out.passed.append(f"{tp} committed {offset}, held at {out.held[tp]}")
    return out


def test_a_wrapped_file_sink_keeps_key_order_through_expansions_and_a_kill_the_bare_one_not(
    tmp_path: Path, kit: Kit, jvm_processes: list[ConnectWorker]
) -> None:
    started = time.monotonic()
    topic, acked = write_backlog(kit, tmp_path / "backlog", KEYS, (("expand", 3), ("expand", 4)))
    assert acked > 5000, acked
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
    wrapped = connectors[0]["name"]
    # While the worker reads, a second producer writes, from before the worker starts: the
    # worker reads behind it all along.
    with writing(kit, topic, tmp_path / "live.jsonl", KEYS, producer_id="live", rate=1000) as live:
        # One worker runs both connectors side by side, each in its own group.
        worker = ConnectWorker(
            tmp_path / "worker",
            {
                "bootstrap.servers": kit.bootstrap,
                "key.converter": "org.apache.kafka.connect.storage.StringConverter",
                "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                # A commit at every poll: one right after a batch with held records too,
                # before the worker rewinds their partitions (the guarded case).
                "offset.flush.interval.ms": "0",
                # Small fetches: each fetch brings a few records of every partition, so a task
                # reads its partitions side by side.
                "consumer.max.poll.records": "50",
                "consumer.max.partition.fetch.bytes": "4096",
                # The expansion's partition is read within a second of its creation, and the
                # killed worker's members leave the groups 6 s after the kill.
                "consumer.metadata.max.age.ms": "500",
                "consumer.session.timeout.ms": "6000",
                "consumer.heartbeat.interval.ms": "1000",
            },
            connectors,
        )
        jvm_processes.append(worker)
        began = time.monotonic()
        wait_until(lambda: sequences(outputs["ordered"]), 90, what=worker.log, interval=0.2)
        # The topic expands to 5 while the worker reads: the new partition's first records
        # come while its source partition still has a backlog before its boundary, so they
        # are held until the group commits that boundary.
        kit.controller.expand(topic, 5, timeout=60)
        new_partition = f"{topic}-4"

        def gates() -> GateLog:
            return read_gate_log(worker.log_path.read_text(errors="replace"), wrapped)

        def held() -> dict[str, int]:
            return gates().held

        # Killed while the new partition is held, once the worker has committed while a
        # partition was held (a commit at every poll, but on a loaded machine the kill could
        # come first): the group's last commit before the kill is what the restarted worker
        # starts from.
        wait_until(
            lambda: new_partition in held() and gates().commits > 0,
            60,
            what=worker.log,
            interval=0.02,
        )
        worker.kill()
        admin = KafkaAdmin(kit.bootstrap)
        try:
            committed = admin.committed_offsets(f"connect-{wrapped}", topic, range(5))
        finally:
            admin.close()
        at_kill = held()
        time.sleep(1)  # records written while no worker runs
    # No held partition's committed offset passes its first held record: the restarted
    # worker starts there, and the wrapped task was never given what lies past it.
    against = {tp: (committed.get(int(tp.rsplit("-", 1)[1])), at) for tp, at in at_kill.items()}
    print(f"at the kill, partition: (committed, first held): {against}")
    assert at_kill, "nothing held at the kill: the test shows nothing"
    assert all(c is None or c <= at for c, at in against.values()), against
    total = acked + int(live.acked)
    keys = keys_of(tmp_path / "backlog" / "producer.jsonl", tmp_path / "live.jsonl")
    assert len(keys) == total, (len(keys), total)

    # Boundaries are committed when a task asks (requestCommit), not by this clock.
    worker.restart(**{"offset.flush.interval.ms": "10000"})

    def written(mode: str) -> int:
        return len({rid for rid in sequences(outputs[mode]) if rid in keys})

    wait_until(
        lambda: all(written(mode) >= total for mode in outputs),
        120,
        what=lambda: f"{ {m: written(m) for m in outputs} } of {total}\n{worker.log()}",
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
    logs = [read_gate_log(log.read_text(errors="replace"), wrapped) for log in worker.logs]
    held_for = logs[-1].holds
    print(f"out of order: {figures}; holds (s): {held_for}; both wrote {total} in {seconds} s")
    print(f"offsets committed while held: {[log.commits for log in logs]}, past a hold: ", end="")
    print([p for log in logs for p in log.passed])
    print(f"test took {time.monotonic() - started:.1f} s")
    assert figures["ordered"] == 0, figures
    assert figures["bare"] > 0, figures
    assert not [p for log in logs for p in log.passed]
    assert logs[0].commits, "no commit while a partition was held: the test shows nothing"
    assert held_for, "the restarted worker held no partition: the test shows nothing"
    # The sources' tasks ask for their boundary commits: no hold of the restarted worker
    # waits for its 10 s commit clock.
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
