"""Helpers of the Spark tests: keyed writers, a batch collector, the checkpoint's offset log.

Records are ``value = "<key>:<seq>"`` with a sequence number per key, so per-key order
and completeness can be checked from what Spark hands to ``foreachBatch``.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

from ordered.producer import OrderedProducer
from spark_source import stoppable

__all__ = [
    "BackgroundWriter",
    "Collector",
    "KeyedWriter",
    "SparkQueries",
    "check_batches",
    "offset_log",
    "order_report",
    "source_options",
    "start",
]


def source_options(
    bootstrap: str, zk_hosts: str, zk_root: str, topic: str, **extra: Any
) -> dict[str, str]:
    """Options of an ``ordered-kafka`` read of ``topic`` from earliest."""
    options = {
        "kafka.bootstrap.servers": bootstrap,
        "subscribe": topic,
        "startingOffsets": "earliest",
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
    }
    options.update({k: str(v) for k, v in extra.items()})
    return options


def start(spark: Any, options: dict[str, str], checkpoint: Path, sink: Any, **trigger: Any) -> Any:
    """Start an ``ordered-kafka`` query into ``foreachBatch(stoppable(sink))``.

    :func:`spark_source.stoppable` turns an error that a ``stop()`` landing in a batch
    caused into one short line, which Spark recognises as a stop (a long one overflows
    the stack of Spark's own regular expression).
    """
    writer = (
        spark.readStream.format("ordered-kafka")
        .options(**options)
        .load()
        .writeStream.foreachBatch(stoppable(sink))
        .option("checkpointLocation", str(checkpoint))
    )
    if trigger:
        writer = writer.trigger(**trigger)
    return writer.start()


@dataclass
class SparkQueries:
    """One test's ``ordered-kafka`` queries: its servers, its store root, its checkpoint.

    The ``queries`` fixture (``tests/spark/conftest.py``) builds it; it is the one place
    for what the Spark tests set up around a query: an adopted topic, a keyed writer,
    the source options, a query started into a sink and stopped however the test ends.
    ``spark`` is asked for on first use, so a test that only plans (no query) starts no
    Spark.
    """

    bootstrap: str
    zk_hosts: str
    zk_root: str
    controller: Any
    topic_factory: Callable[..., str]
    directory: Path
    session: Callable[[], Any]

    @property
    def spark(self) -> Any:
        """The session-wide SparkSession (started on first use)."""
        return self.session()

    @property
    def checkpoint(self) -> Path:
        """The test's default checkpoint directory."""
        return self.directory / "checkpoint"

    def adopted_topic(self, partitions: int = 2) -> str:
        """A new topic of ``partitions``, adopted (layout epoch 0)."""
        topic = self.topic_factory(partitions)
        self.controller.adopt(topic)
        return topic

    def writer(self, **kwargs: Any) -> KeyedWriter:
        """A :class:`KeyedWriter` on this test's store root."""
        return KeyedWriter(self.bootstrap, self.zk_hosts, self.zk_root, **kwargs)

    def options(self, topic: str, **extra: Any) -> dict[str, str]:
        """The source options of a read of ``topic`` from earliest (:func:`source_options`)."""
        return source_options(self.bootstrap, self.zk_hosts, self.zk_root, topic, **extra)

    def sink_options(self, topic: str) -> dict[str, str]:
        """The options of an ``ordered-kafka`` write into ``topic``."""
        return {
            "kafka.bootstrap.servers": self.bootstrap,
            "topic": topic,
            "ordered.zookeeper.connect": self.zk_hosts,
            "ordered.zookeeper.root": self.zk_root,
        }

    @contextmanager
    def running(
        self, sink: Any, options: dict[str, str], checkpoint: Path | None = None, **trigger: Any
    ) -> Iterator[Any]:
        """A query of ``options`` into ``foreachBatch(sink)``, stopped when the block ends."""
        query = start(self.spark, options, checkpoint or self.checkpoint, sink, **trigger)
        try:
            yield query
        finally:
            query.stop()

    def run_available_now(
        self,
        sink: Any,
        options: dict[str, str],
        checkpoint: Path | None = None,
        timeout: float = 90.0,
    ) -> None:
        """Run an ``availableNow`` query to its end; fail if it fails or does not end."""
        with self.running(sink, options, checkpoint, availableNow=True) as query:
            assert query.awaitTermination(timeout), "AvailableNow did not finish"
            assert query.exception() is None, query.exception()

    def process_available(
        self, sink: Any, options: dict[str, str], checkpoint: Path | None = None
    ) -> None:
        """Run a query until it processed everything available, then stop it."""
        with self.running(sink, options, checkpoint) as query:
            query.processAllAvailable()


class KeyedWriter:
    """An ``OrderedProducer`` writing ``key:seq`` records; remembers what was delivered."""

    def __init__(
        self, bootstrap: str, zk_hosts: str, zk_root: str, keys: int = 20, amounts: bool = False
    ) -> None:
        self.keys = keys
        # amounts: the value is the amount ``seq + 1`` alone (a job sums it per key).
        self.amounts = amounts
        self.seq = [0] * keys
        self.delivered: dict[str, set[int]] = defaultdict(set)
        self.failed = 0
        self.producer = OrderedProducer(
            {
                "bootstrap.servers": bootstrap,
                "ordered.zookeeper.connect": zk_hosts,
                "ordered.zookeeper.root": zk_root,
                "linger.ms": 5,
            }
        )
        self._i = 0

    def _report(self, err: Any, msg: Any) -> None:
        if err is not None:
            self.failed += 1
            return
        if self.amounts:
            self.delivered[msg.key().decode()].add(int(msg.value()) - 1)
            return
        key, seq = msg.value().decode().split(":")
        self.delivered[key].add(int(seq))

    def write(self, topic: str, count: int) -> None:
        """Write ``count`` records round-robin over the keys (no flush)."""
        for _ in range(count):
            j = self._i % self.keys
            key = f"k{j}"
            value = f"{self.seq[j] + 1}" if self.amounts else f"{key}:{self.seq[j]}"
            while True:
                try:
                    self.producer.produce(topic, value.encode(), key, on_delivery=self._report)
                    break
                except BufferError:
                    self.producer.poll(0.02)
            self.seq[j] += 1
            self._i += 1
        self.producer.poll(0)

    def flush(self) -> int:
        """Flush; return the number of delivered records so far."""
        assert self.producer.flush(30) == 0
        assert self.failed == 0
        return sum(len(s) for s in self.delivered.values())

    def close(self) -> None:
        """Flush and close the producer."""
        self.producer.close()


class BackgroundWriter:
    """A :class:`KeyedWriter` writing small bursts in a thread until stopped."""

    def __init__(self, writer: KeyedWriter, topic: str, burst: int = 20, pause: float = 0.05):
        self.writer = writer
        self._stop = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(topic, burst, pause), daemon=True)
        self._thread.start()

    def _run(self, topic: str, burst: int, pause: float) -> None:
        try:
            while not self._stop.is_set():
                self.writer.write(topic, burst)
                time.sleep(pause)
        except BaseException as exc:
            self._error = exc

    def stop(self) -> int:
        """Stop, flush; return the number of delivered records."""
        self._stop.set()
        self._thread.join(30)
        if self._error is not None:
            raise self._error
        return self.writer.flush()


@dataclass
class Collector:
    """A ``foreachBatch`` function that keeps every batch's rows (driver side)."""

    batches: dict[int, list[tuple[str, int, int, int]]] = field(default_factory=dict)
    runs: list[int] = field(default_factory=list)
    changed: list[int] = field(default_factory=list)
    fail_at: int | None = None
    on_batch: Any = None

    def __call__(self, frame: Any, batch_id: int) -> None:
        rows = frame.select("key", "value", "partition", "offset").collect()
        got = []
        for row in rows:
            key, seq = bytes(row.value).decode().split(":")
            assert bytes(row.key).decode() == key
            got.append((key, int(seq), int(row.partition), int(row.offset)))
        got.sort(key=lambda r: (r[2], r[3]))
        if batch_id in self.batches and self.batches[batch_id] != got:
            # A batch Spark runs again must return exactly the same rows.
            self.changed.append(batch_id)
        self.batches[batch_id] = got
        self.runs.append(batch_id)
        if self.on_batch is not None:
            self.on_batch(batch_id)
        if self.fail_at is not None and batch_id == self.fail_at:
            self.fail_at = None
            raise RuntimeError(f"crash injected in batch {batch_id}")

    def total(self) -> int:
        """Rows over all distinct batches."""
        return sum(len(rows) for rows in self.batches.values())


def check_batches(batches: dict[int, list[tuple[str, int, int, int]]]) -> dict[str, list[int]]:
    """Check the order guarantee; return each key's sequence numbers in delivery order.

    Within a batch every key comes from one partition; ordered by (batch, partition,
    offset), each key's sequence numbers strictly increase.
    """
    per_key: dict[str, list[int]] = defaultdict(list)
    for batch_id in sorted(batches):
        partitions: dict[str, set[int]] = defaultdict(set)
        for key, seq, partition, _offset in batches[batch_id]:
            partitions[key].add(partition)
            per_key[key].append(seq)
        split = {k: sorted(p) for k, p in partitions.items() if len(p) > 1}
        assert not split, f"batch {batch_id}: keys from two partitions: {split}"
    for key, seqs in per_key.items():
        assert seqs == sorted(seqs) and len(set(seqs)) == len(seqs), (key, seqs[:50])
    return dict(per_key)


def order_report(
    batches: dict[int, list[tuple[str, int, int, int]]], delivered: dict[str, set[int]]
) -> dict[str, int]:
    """Count what went wrong, without asserting: the figures a test prints and checks.

    ``out_of_order``: per key, sequence numbers not above the one before (in batch,
    partition, offset order); ``lost``: delivered but never read; ``duplicated``: read
    twice; ``split_batches``: batches in which some key came from two partitions.
    """
    per_key: dict[str, list[int]] = defaultdict(list)
    split_batches = 0
    for batch_id in sorted(batches):
        partitions: dict[str, set[int]] = defaultdict(set)
        for key, seq, partition, _offset in batches[batch_id]:
            partitions[key].add(partition)
            per_key[key].append(seq)
        split_batches += any(len(p) > 1 for p in partitions.values())
    out_of_order = sum(1 for seqs in per_key.values() for a, b in pairwise(seqs) if b <= a)
    lost = sum(len(seqs - set(per_key.get(key, []))) for key, seqs in delivered.items())
    duplicated = sum(len(seqs) - len(set(seqs)) for seqs in per_key.values())
    return {
        "batches": len(batches),
        "records": sum(len(rows) for rows in batches.values()),
        "out_of_order": out_of_order,
        "lost": lost,
        "duplicated": duplicated,
        "split_batches": split_batches,
    }


def offset_log(checkpoint: Path | str) -> dict[int, dict[str, dict[int, int]]]:
    """The source offsets of every batch in ``checkpoint/offsets`` (one source)."""
    out: dict[int, dict[str, dict[int, int]]] = {}
    directory = Path(checkpoint) / "offsets"
    for path in directory.iterdir():
        if not path.name.isdigit():
            continue
        lines = path.read_text().splitlines()
        # v1, the batch metadata, then one line per source.
        offsets = json.loads(lines[2])
        out[int(path.name)] = {t: {int(p): o for p, o in ps.items()} for t, ps in offsets.items()}
    return dict(sorted(out.items()))


def gate_violations(
    log: dict[int, dict[str, dict[int, int]]],
    topic: str,
    epochs: Iterable[Any],
    first: dict[int, int],
) -> list[str]:
    """Batches that read a receiving partition ``b`` past ``B_b(e)`` before its sources.

    For every sealed epoch ``e`` with edge ``a -> b``: a batch whose end has ``b`` past
    ``B_b(e)`` must start (the previous batch's end) with ``a`` at ``B_a(e)`` or more.
    """
    problems: list[str] = []
    previous = dict(first)
    for batch_id, offsets in log.items():
        end = offsets.get(topic, {})
        for epoch in epochs:
            for a, b in epoch.edges:
                if end.get(b, 0) > epoch.boundaries[b] and previous.get(a, 0) < epoch.boundaries[a]:
                    problems.append(
                        f"batch {batch_id}: {b} read to {end[b]} past B_{b}({epoch.epoch}) = "
                        f"{epoch.boundaries[b]} while {a} started at {previous.get(a, 0)} < "
                        f"B_{a}({epoch.epoch}) = {epoch.boundaries[a]}"
                    )
        previous = dict(end)
    return problems


class DriverProcess:
    """A PySpark program in its own process, driven by lines on its stdin and stdout.

    Args:
        script: The program (``python -c``); it gets ``cfg`` as JSON in ``argv[1]``.
        cfg: Its configuration.
        log: Where its stderr goes (the tail is shown when an expectation fails).
        cwd: Its working directory.
        python: The interpreter; another environment's pyspark runs its own Spark.
        what: How failures name it.
    """

    def __init__(
        self,
        script: str,
        cfg: dict[str, Any],
        log: Path,
        *,
        cwd: Path,
        python: str = sys.executable,
        what: str = "the driver",
    ) -> None:
        env = dict(os.environ, PYSPARK_PYTHON=python, SPARK_LOCAL_IP="127.0.0.1")
        if python != sys.executable:
            for name in ("SPARK_HOME", "PYSPARK_DRIVER_PYTHON", "PYTHONPATH"):
                env.pop(name, None)
        self.what = what
        self.log_path = log
        self._log = open(log, "wb")  # noqa: SIM115 (closed in stop)
        self.proc = subprocess.Popen(
            [python, "-c", script, json.dumps(cfg)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            text=True,
            cwd=cwd,
            env=env,
        )

    def expect(self, prefix: str, timeout: float) -> str:
        """The next line of its stdout; it must start with ``prefix``."""
        assert self.proc.stdout is not None
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.proc.stdout], [], [], 0.5)
            if ready:
                line = self.proc.stdout.readline().strip()
                assert line.startswith(prefix), f"{line!r} instead of {prefix!r}\n{self.log()}"
                return line
            assert self.proc.poll() is None, f"{self.what} exited\n{self.log()}"
        raise AssertionError(f"no {prefix!r} within {timeout} s\n{self.log()}")

    def send(self, line: str) -> None:
        """Write one line to its stdin."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(line + "\n")
        self.proc.stdin.flush()

    def log(self) -> str:
        """The tail of its stderr."""
        return self.log_path.read_text(errors="replace")[-4000:]

    def stop(self) -> None:
        """Close its stdin (it ends), or kill it after 30 s."""
        if self.proc.poll() is None:
            with contextlib.suppress(Exception):
                assert self.proc.stdin is not None
                self.proc.stdin.close()
                self.proc.wait(30)
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        self._log.close()
