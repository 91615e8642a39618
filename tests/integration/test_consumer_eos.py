"""An exactly-once read-process-write pipeline under kills, across expansions and shrinks
of its input topic (``docs/consumer.md``, "Commit modes and exactly-once pipelines").

The pipeline runs in a subprocess: an ``OrderedConsumer`` (``read_committed``,
``enable.auto.commit=false``) feeds a transactional ``OrderedProducer``; each
transaction spans many polls and commits the processed input offsets with
``send_offsets_to_transaction``. The test grows and shrinks the input while records
flow, and SIGKILLs the pipeline mid-transaction, right after it announced a boundary
(``on_partition_key_maybe_revoked``) and at other moments; each time a new process
takes over (same ``transactional.id``). Read with
``read_committed``, the output must hold every input record exactly once, in each
key's order.

With ``ordered.commit.mode=application`` it does. With ``auto`` (the consumer commits a
source's boundary itself) the same run loses records: the boundary commit covers input
whose output was still in the transaction the kill aborted. That run shows the test can
fail.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from fixtures import consumer_config
from helpers import kill_process, unique, wait_until
from kit import Kit

from ordered.producer import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

ROOT = Path(__file__).resolve().parents[2]
KEYS = 30

# The pipeline: one transaction over many polls (every `interval` seconds), the
# processed offsets tracked by the application. It assigns itself every partition of
# the input (no rebalance waits for a killed member's session to expire; the
# transactional.id fences a killed incarnation). Prints READY, REVOKED
# (maybe_revoked), COMMITTED and, on SIGTERM, DONE.
PIPELINE = r"""
import json, signal, sys, time
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from ordered.consumer import OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener
from ordered.producer import OrderedProducer

cfg = json.loads(sys.argv[1])
stop = False


def on_term(*_):
    global stop
    stop = True


signal.signal(signal.SIGTERM, on_term)
debug = []
signal.signal(signal.SIGUSR2, lambda *_: debug.append(1))


class Listener(PartitionKeyRebalanceListener):
    def on_partition_key_maybe_revoked(self, partitions):
        print("REVOKED " + " ".join(f"{tp.partition}@{tp.offset}" for tp in partitions), flush=True)

    def on_partition_key_assigned(self, partitions):
        pass


consumer = OrderedConsumer(cfg["consumer"])
producer = OrderedProducer(cfg["producer"])
producer.init_transactions(60)
done = {}
state = {"open": False, "began": 0.0}


def commit():
    if not state["open"]:
        return
    offsets = [TopicPartition(t, p, o) for (t, p), o in done.items()]
    if offsets:
        producer.send_offsets_to_transaction(offsets, consumer.consumer_group_metadata(), 60)
    producer.commit_transaction(60)
    done.clear()
    state["open"] = False
    print("COMMITTED", flush=True)


consumer.key_listener = Listener()
assigned = set()


def grow():
    # Every partition of the input, new ones as expansions add them (a partition is
    # never removed: a shrink retires it).
    found = consumer.list_topics(cfg["input"], timeout=10).topics[cfg["input"]].partitions
    new = [TopicPartition(cfg["input"], p) for p in sorted(found) if p not in assigned]
    if new:
        consumer.incremental_assign(new)
        assigned.update(tp.partition for tp in new)
    return time.monotonic()


grown = grow()
print("READY", flush=True)
transient = {
    KafkaError.NOT_COORDINATOR,
    KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
    KafkaError.COORDINATOR_NOT_AVAILABLE,
}
while not stop:
    if debug:
        debug.clear()
        status = (consumer.assignment(), consumer.gate_status(), consumer.metrics)
        print("STATUS", *status, file=sys.stderr, flush=True)
    for m in consumer.consume(200, 0.05):
        if m.error() is not None:
            if m.error().code() in transient:
                continue
            raise KafkaException(m.error())
        if not state["open"]:
            producer.begin_transaction()
            state.update(open=True, began=time.monotonic())
        producer.produce(cfg["output"], key=m.key(), value=m.value())
        done[(m.topic(), m.partition())] = m.offset() + 1
    if state["open"] and time.monotonic() - state["began"] >= cfg["interval"]:
        commit()
    if time.monotonic() - grown >= 1.0:
        grown = grow()
commit()
consumer.close()
producer.close()
print("DONE", flush=True)
"""


class Pipeline:
    """The pipeline process; a reader thread collects its output lines."""

    def __init__(self, config: dict[str, Any], logs: Path) -> None:
        self.config = config
        self.logs = logs
        self.lines: list[str] = []
        self.kills = 0
        self.proc: subprocess.Popen[str] | None = None
        self.start()

    def start(self) -> None:
        env = dict(os.environ, PYTHONPATH=str(ROOT))
        with self.log().open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", PIPELINE, json.dumps(self.config)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=env,
                cwd=ROOT,
            )
        lines = self.lines
        first = len(lines)
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(
            target=lambda: lines.extend(iter(stdout.readline, "")), daemon=True
        ).start()
        wait_until(lambda: "READY\n" in lines[first:] or self.proc_dead(), timeout=60, what="READY")
        assert not self.proc_dead(), self.stderr()

    def proc_dead(self) -> bool:
        return self.proc is not None and self.proc.poll() is not None

    def log(self) -> Path:
        """The stderr file of the current incarnation."""
        return self.logs / f"pipeline-{self.kills}.err"

    def stderr(self) -> str:
        return self.log().read_text()[-3000:]

    def status(self) -> str:
        """What the running pipeline's consumer says about its assignment and gates."""
        assert self.proc is not None
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGUSR2)
            time.sleep(1.0)
        return self.stderr()

    def seen(self, prefix: str, since: int) -> bool:
        return any(line.startswith(prefix) for line in self.lines[since:])

    def kill_and_restart(self) -> None:
        """SIGKILL the running process (its open transaction is aborted by the next)."""
        assert self.proc is not None
        assert not self.proc_dead(), self.stderr()
        kill_process(self.proc.pid)
        self.kills += 1
        self.start()

    def finish(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGTERM)
        assert self.proc.wait(timeout=60) == 0, self.stderr()
        wait_until(lambda: "DONE\n" in self.lines, timeout=10, what="DONE")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            kill_process(self.proc.pid)


class Input:
    """An OrderedProducer writing ``key:seq`` records until stopped, in a thread."""

    def __init__(self, producer: OrderedProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.seq: dict[str, int] = defaultdict(int)
        self.failures: list[BaseException] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            i = 0
            while not self._stop.is_set():
                key = f"k{i % KEYS}"
                self.producer.produce(self.topic, key=key, value=f"{key}:{self.seq[key]}".encode())
                self.seq[key] += 1
                i += 1
                if i % 10 == 0:
                    self.producer.poll(0)
                    time.sleep(0.01)
            assert self.producer.flush(60) == 0
        except BaseException as exc:
            self.failures.append(exc)

    def stop(self) -> dict[str, int]:
        self._stop.set()
        self._thread.join(90)
        assert not self.failures, self.failures
        return dict(self.seq)


def read_output(bootstrap: str, topic: str, expected: int) -> list[Any]:
    """Everything committed in ``topic`` (``read_committed``), until it stops growing."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": unique("reader"),
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        partitions = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in partitions])
        out: list[Any] = []
        idle_since = [time.monotonic()]

        def quiet() -> bool:
            batch = consumer.consume(1000, 0.2)
            for m in batch:
                assert m.error() is None, m.error()
            if batch:
                out.extend(batch)
                idle_since[0] = time.monotonic()
            # Past the expected count, a little longer: duplicates would come after it.
            return time.monotonic() - idle_since[0] >= (2.0 if len(out) >= expected else 5.0)

        wait_until(
            quiet, 90, what=lambda: f"the output quiet (read {len(out)} of {expected})", interval=0
        )
        return out
    finally:
        consumer.close()


def committed_everything(bootstrap: str, group: str, topic: str) -> bool:
    """The group's committed offsets reached the end of every partition of ``topic``."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = probe.list_topics(topic, timeout=10).topics[topic].partitions
        tps = [TopicPartition(topic, p) for p in partitions]
        committed = {tp.partition: tp.offset for tp in probe.committed(tps, timeout=10)}
        for p in partitions:
            _low, high = probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10)
            if high > 0 and committed.get(p, -1) < high:
                return False
        return True
    finally:
        probe.close()


def progress(bootstrap: str, group: str, topic: str) -> Any:
    """Committed offset and watermarks of every partition (printed when the drain fails)."""
    probe = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        partitions = probe.list_topics(topic, timeout=10).topics[topic].partitions
        tps = [TopicPartition(topic, p) for p in partitions]
        committed = {tp.partition: tp.offset for tp in probe.committed(tps, timeout=10)}
        return {
            p: (committed.get(p), probe.get_watermark_offsets(TopicPartition(topic, p), timeout=10))
            for p in partitions
        }
    finally:
        probe.close()


@pytest.fixture
def pipelines() -> Iterator[list[Pipeline]]:
    made: list[Pipeline] = []
    yield made
    for pipeline in made:
        pipeline.stop()


@pytest.mark.parametrize("mode", ["application", "auto"])
def test_read_process_write_is_exactly_once_and_in_order_under_kills(
    kit: Kit, mode: str, pipelines: list[Pipeline], tmp_path: Path
) -> None:
    source = kit.topic_factory(2, prefix="in")
    kit.controller.adopt(source)
    sink = kit.topic_factory(3, prefix="out")
    group = kit.group_factory()
    config = {
        "input": source,
        "output": sink,
        "interval": 1.5,
        "consumer": consumer_config(
            kit.bootstrap,
            kit.zk_hosts,
            kit.zk_root,
            group,
            **{
                "isolation.level": "read_committed",
                "ordered.commit.mode": mode,
            },
        ),
        "producer": {
            "bootstrap.servers": kit.bootstrap,
            "transactional.id": unique("pipeline"),
            "ordered.zookeeper.connect": kit.zk_hosts,
            "ordered.zookeeper.root": kit.zk_root,
        },
    }
    pipeline = Pipeline(config, tmp_path)
    pipelines.append(pipeline)
    writer = Input(kit.make_producer(), source)
    rng = random.Random(19)
    try:
        wait_until(lambda: pipeline.seen("COMMITTED", 0), timeout=30, what="a first commit")
        for kind, to in (("expand", 3), ("expand", 4), ("shrink", 3), ("shrink", 2)):
            since = len(pipeline.lines)
            getattr(kit.controller, kind)(source, to, timeout=60)
            # Kill mid-transaction right after the boundary's maybe_revoked (and, in
            # auto mode, the consumer's own boundary commit)...
            with contextlib.suppress(AssertionError):
                wait_until(
                    lambda since=since: pipeline.seen("REVOKED", since),
                    timeout=20,
                    what="REVOKED",
                )
            time.sleep(0.3)
            pipeline.kill_and_restart()
            # ... and once more at a random moment.
            time.sleep(rng.uniform(0.5, 2.0))
            pipeline.kill_and_restart()
    finally:
        produced = writer.stop()
    total = sum(produced.values())
    try:
        wait_until(
            lambda: committed_everything(kit.bootstrap, group, source),
            timeout=120,
            interval=1.0,
            what="the pipeline to commit all input",
        )
    except AssertionError:
        print("committed, watermarks:", progress(kit.bootstrap, group, source))
        print("pipeline:", pipeline.lines[-20:], pipeline.status())
        raise
    pipeline.finish()
    revoked = sum(1 for line in pipeline.lines if line.startswith("REVOKED"))
    out = read_output(kit.bootstrap, sink, total)
    per_key: dict[str, list[int]] = defaultdict(list)
    for m in out:
        key, seq = m.value().decode().split(":")
        assert m.key().decode() == key
        per_key[key].append(int(seq))
    delivered = {(k, s) for k, seqs in per_key.items() for s in seqs}
    lost = total - len(delivered)
    duplicates = len(out) - len(delivered)
    disorder = sum(1 for seqs in per_key.values() for a, b in itertools.pairwise(seqs) if b <= a)
    print(
        f"mode {mode}: {total} input records, {len(out)} output, lost {lost}, "
        f"duplicates {duplicates}, out of order {disorder}, kills {pipeline.kills}, "
        f"maybe_revoked {revoked}"
    )
    assert pipeline.kills == 8 and revoked >= 2
    if mode == "application":
        assert (lost, duplicates, disorder) == (0, 0, 0)
        assert per_key == {k: list(range(n)) for k, n in produced.items()}
    else:
        assert lost > 0, "the consumer's own boundary commits lost nothing"
