"""The Spark reader kind of a chaos run (``--spark``): a standalone cluster and a driver.

The run starts a Spark standalone master and two one-core workers
(:mod:`~ordered.chaos.spark_cluster`) and one driver slot, ``spark-0``: a reader of
group ``spark`` whose process runs ``python -m ordered.verify.spark_query`` (the worker
execs it; ``ordered`` never imports ``spark_source``). Its streaming query reads the
run's topic with the ``ordered-kafka`` source on the standalone cluster, keeps its
checkpoint in the run's directory (a driver that replaces a killed one goes on from
there), writes every row of every batch to its history as a delivery of group
``spark`` (the checker's usual rules: per key in order, nothing lost, duplicates
after a restart allowed), and commits its progress to the Kafka group ``chaos-spark``
after each batch, so that trims wait for it.

After the run, the driver's log and the cluster's logs are searched for
``StackOverflowError`` and for the stack of a dead stream thread: both counts go into
the run's result (0 expected).
"""

from __future__ import annotations

import itertools
import json
import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from ordered.chaos.processes import Slot, Slots
from ordered.chaos.spark_cluster import StandaloneCluster, find_in_logs

__all__ = [
    "COMMIT_GROUP",
    "GROUP",
    "SLOT",
    "SparkReader",
    "dead_stream_threads",
    "driver_argv",
    "exec_driver",
]

GROUP = "spark"
"""The reader group of the Spark driver in the histories."""

SLOT = "spark-0"
"""The driver's slot."""

COMMIT_GROUP = "chaos-spark"
"""The Kafka group the driver commits its progress to (trims respect it)."""

MAX_OFFSETS = 5000
"""Records per micro-batch at most: a driver that starts behind (or replaces a killed
one) completes batches soon, so a kill meets a query with a checkpointed batch."""

_DEAD_THREAD = 'Exception in thread "stream execution thread'

_SHUTDOWN_CAUSE = "RpcEnvStoppedException"
"""The cause of a stream thread's death while its driver's JVM shuts down (its Python
driver was killed): the thread dies reporting the query's end to an RPC system already
stopped. Not a query that died in a running driver."""


def dead_stream_threads(paths: list[Path]) -> list[str]:
    """``path: line`` of each stream thread that died in a running driver.

    A death whose stack (the lines up to the next one that is not part of it) names
    :data:`_SHUTDOWN_CAUSE` is its driver's shutdown, and is left out.
    """
    dead: list[str] = []
    for path in paths:
        try:
            lines = path.read_text(errors="replace").splitlines()
        except OSError:
            continue
        for i, line in enumerate(lines):
            if _DEAD_THREAD not in line:
                continue
            stack = itertools.takewhile(_in_stack, lines[i + 1 :])
            if not any(_SHUTDOWN_CAUSE in frame for frame in stack):
                dead.append(f"{path}: {line.rstrip()}")
    return dead


def _in_stack(line: str) -> bool:
    # Frames and causes; the same thread's death may be printed twice in a row.
    return line.startswith(("\t", "Caused by:", "Exception in thread"))


def driver_argv(spec: dict[str, Any]) -> list[str]:
    """The driver's command line, from a worker spec of the ``spark-0`` slot."""
    return [
        sys.executable,
        "-m",
        "ordered.verify.spark_query",
        *["--topic", str(spec["topic"]), "--bootstrap", str(spec["bootstrap"])],
        *["--zookeeper", str(spec["zookeeper"]), "--root", str(spec["root"])],
        *["--history", str(spec["history"]), "--stats", str(spec["stats"])],
        *["--group", str(spec["group"]), "--reader", str(spec["id"])],
        *["--commit-group", str(spec["commit_group"]), "--master", str(spec["master"])],
        *["--checkpoint", str(spec["checkpoint"]), "--idle-exit", str(spec.get("idle_exit", 20))],
        *["--max-offsets", str(spec.get("max_offsets", MAX_OFFSETS))],
    ]


def exec_driver(spec: dict[str, Any]) -> NoReturn:
    """Replace this worker process with the Spark driver (same pid: the run's signals reach it).

    The driver JVM that pyspark starts exits when this process dies (it reads its stdin
    until the end).
    """
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    sys.stdout.flush()
    sys.stderr.flush()
    argv = driver_argv(spec)
    os.execv(argv[0], argv)


class SparkReader:
    """The standalone cluster and the driver slot of one run.

    Args:
        workdir: The run's directory (``spark/`` holds the cluster's logs, its work
            folders and the query's checkpoint).
        say: Prints one line of the run's log.
    """

    def __init__(self, workdir: Path, say: Callable[[str], None]) -> None:
        self.directory = workdir / "spark"
        self.say = say
        self.cluster = StandaloneCluster(
            self.directory / "standalone", workers=2, cores=1, memory="1g", die_with_parent=True
        )
        self.workdir = workdir
        self._started = False

    def start(self) -> None:
        """Start the master and the workers (from the main thread: they die with it)."""
        began = time.monotonic()
        self.cluster.start()
        self._started = True
        self.say(
            f"Spark standalone master {self.cluster.url} and 2 workers up in "
            f"{time.monotonic() - began:.1f} s"
        )

    def add_slot(self, slots: Slots) -> Slot:
        """Declare the driver's slot (a reader of group ``spark``)."""
        return slots.add(
            SLOT,
            "reader",
            GROUP,
            spark=True,
            master=self.cluster.url,
            checkpoint=str(self.directory / "checkpoint"),
            commit_group=COMMIT_GROUP,
        )

    def batches(self, slots: Slots) -> int:
        """Micro-batches the current driver has completed (0 before its first)."""
        slot = slots.slots.get(SLOT)
        if slot is None:
            return 0
        stats = slots.stats().get(slot.ident, {})
        return int(stats.get("batches", 0))

    def wait_ready(self, slots: Slots, stop: threading.Event, timeout: float = 150.0) -> bool:
        """Wait until the driver's query has completed a batch, so faults meet a running query."""
        began = time.monotonic()
        while time.monotonic() - began < timeout and not stop.is_set():
            if self.batches(slots) >= 1:
                self.say(f"the Spark query runs ({time.monotonic() - began:.1f} s after start)")
                return True
            slot = slots.slots.get(SLOT)
            if slot is not None and slot.proc is not None and slot.proc.poll() is not None:
                break
            stop.wait(1.0)
        self.say("the Spark query did not complete a batch in time; faults start anyway")
        return False

    def log_problems(self) -> dict[str, Any]:
        """``StackOverflowError`` lines and dead stream threads' stacks in every log of Spark,
        and the executors the drivers lost."""
        logs = [self.workdir / "logs" / f"{SLOT}.log", *self.cluster.logs()]
        overflow = find_in_logs(logs, "StackOverflowError")
        dead = dead_stream_threads(logs)
        return {
            "stack_overflow_errors": len(overflow),
            "dead_stream_threads": len(dead),
            # The drivers' scheduler logs each executor it lost (at ERROR, which it keeps).
            "lost_executors": len(find_in_logs(logs[:1], "Lost executor")),
            "samples": [line[:300] for line in (overflow + dead)[:5]],
        }

    def driver_stats(self) -> dict[str, Any]:
        """What each driver incarnation wrote last (rows, batches, an error)."""
        out: dict[str, Any] = {}
        for path in sorted((self.workdir / "stats").glob(f"{SLOT}.*.json")):
            try:
                out[path.stem] = json.loads(path.read_text())
            except (OSError, ValueError):
                continue
        return out

    def stop(self) -> None:
        """Stop the workers and the master (idempotent)."""
        if self._started:
            self._started = False
            self.cluster.stop()
