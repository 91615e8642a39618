"""The Spark faults of a chaos run (``--spark``): an executor JVM killed, the driver killed.

* ``kill-spark-executor``: SIGKILL one executor JVM on a worker. The worker reports it
  lost, the master starts a new executor, and Spark runs the lost tasks again (on the
  other executor, or the new one): the batch's rows are the same.
* ``kill-spark-driver``: SIGKILL the driver process (its JVM follows: it reads the
  process's stdin to the end). A new driver starts 2-10 s later and restarts the query
  from its checkpoint: the batch that was running is read again (duplicates, which the
  checker allows), nothing is skipped.

A fault that finds nothing to kill (the executors are being replaced after a driver
kill, or the driver has not run a batch yet) is put off a few seconds at a time, for
at most a minute and never past the run's duration, so that it meets a running query.
"""

from __future__ import annotations

import contextlib
import os
import signal
import threading
import time
from collections.abc import Callable
from typing import Protocol

from ordered.chaos.processes import Slot, Slots
from ordered.chaos.schedule import FaultKind, ScheduledFault
from ordered.chaos.spark_reader import SLOT, SparkReader

__all__ = ["SPARK_KINDS", "SparkFaults"]

SPARK_KINDS = frozenset({FaultKind.KILL_SPARK_EXECUTOR, FaultKind.KILL_SPARK_DRIVER})
"""The fault kinds of this family."""

_RETRY_S = 3.0
_MAX_PUT_OFF_S = 60.0


class _Runner(Protocol):
    """What the faults use of the run's :class:`~ordered.chaos.faults.FaultRunner`."""

    slots: Slots
    kills: int
    t0: float
    _lock: threading.Lock

    def say(self, text: str) -> None: ...

    def _fault(self, kind: FaultKind, target: str, detail: str) -> None: ...

    def _later(self, delay: float, what: str, call: Callable[[], None]) -> None: ...

    def _restart_later(self, slot: Slot, delay: float) -> None: ...


class SparkFaults:
    """Injects the Spark faults of a schedule.

    Args:
        runner: The run's fault runner (its log, timers and process slots).
        reader: The run's Spark cluster and driver slot.
        duration: The run's seconds of faults: nothing is put off past them.
    """

    def __init__(self, runner: _Runner, reader: SparkReader, duration: float) -> None:
        self.runner, self.reader, self.duration = runner, reader, duration

    def inject(self, fault: ScheduledFault, first: float | None = None) -> None:
        """Inject ``fault`` now, or put it off while there is nothing to hit yet."""
        first = time.monotonic() if first is None else first
        late = (
            time.monotonic() - first > _MAX_PUT_OFF_S
            or time.monotonic() - self.runner.t0 + _RETRY_S > self.duration
        )
        if fault.kind is FaultKind.KILL_SPARK_EXECUTOR:
            done = self._kill_executor(fault)
        else:
            done = self._kill_driver(fault, force=late)
        if done:
            return
        if late:
            self.runner.say(f"{fault.kind.value}: nothing to kill, skipped")
            return
        self.runner._later(_RETRY_S, fault.kind.value, lambda: self.inject(fault, first))

    def _kill_executor(self, fault: ScheduledFault) -> bool:
        wanted = int(fault.target.rsplit("-", 1)[-1]) if fault.target else 0
        workers = len(self.reader.cluster.worker_pids())
        for worker in [wanted, *(w for w in range(workers) if w != wanted)]:
            pids = self.reader.cluster.executors(worker)
            if not pids:
                continue
            with contextlib.suppress(ProcessLookupError):
                os.kill(pids[0], signal.SIGKILL)
            with self.runner._lock:
                self.runner.kills += 1
            self.runner._fault(
                fault.kind,
                f"worker-{worker}",
                f"SIGKILL executor JVM pid {pids[0]}; Spark runs its tasks again",
            )
            return True
        return False

    def _kill_driver(self, fault: ScheduledFault, *, force: bool) -> bool:
        slot = self.runner.slots.slots.get(SLOT)
        if slot is None or not slot.alive:
            return False
        if not force and self.reader.batches(self.runner.slots) < 1:
            return False  # the query is still starting: a kill now tests no restart
        pid = slot.pid
        down = float(fault.params.get("down_s", 5.0))
        self.runner.slots.signal(slot, signal.SIGKILL)
        with self.runner._lock:
            self.runner.kills += 1
        self.runner._fault(
            fault.kind,
            slot.ident,
            f"SIGKILL driver pid {pid}; a new driver restarts from the checkpoint in {down} s",
        )
        self.runner._restart_later(slot, down)
        return True
