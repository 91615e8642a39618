"""A Spark standalone cluster on loopback, from the pyspark package: a master, N workers.

Each is a separate JVM started with ``bin/spark-class`` (the wheel has no
``sbin/start-master.sh``), so executors run in their own JVMs with their own Python
workers: nothing of the driver's memory reaches them except what Spark pickles. The
Spark tests and ``ordered chaos --spark`` share it. Only ``pyspark`` is needed (for
its folder); nothing here imports Spark itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import re
import signal
import socket
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

__all__ = [
    "EXECUTOR_CLASS",
    "StandaloneCluster",
    "find_in_logs",
    "spark_home",
    "standalone_logs",
]

EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
"""The main class of an executor JVM (a worker starts one per application)."""

_PR_SET_PDEATHSIG = 1


def spark_home() -> str:
    """The pyspark package folder: it is a Spark home (``bin/``, ``jars/``)."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _die_with_parent() -> None:
    # Runs in the child between fork and exec.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


def standalone_logs(directory: Path) -> list[Path]:
    """Every log of a standalone cluster started in ``directory``.

    The master's and workers' logs, and each executor's ``stdout`` and ``stderr``
    (``work-N/app-.../EXECUTOR/``).
    """
    found = sorted(directory.glob("*.log"))
    found += sorted(p for p in directory.glob("work-*/app-*/*/std*") if p.is_file())
    return found


def find_in_logs(paths: list[Path], needle: str) -> list[str]:
    """``path: line`` for every line of ``paths`` that contains ``needle``."""
    hits: list[str] = []
    for path in paths:
        try:
            with path.open(errors="replace") as handle:
                hits += [f"{path}: {line.rstrip()}" for line in handle if needle in line]
        except OSError:
            continue
    return hits


def _children(parent: int) -> list[int]:
    """The pids whose parent is ``parent`` (from ``/proc``)."""
    out: list[int] = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        with contextlib.suppress(OSError, ValueError, IndexError):
            stat = Path(f"/proc/{entry}/stat").read_text()
            # The command name may hold spaces: the fields after it start at ") ".
            if int(stat.rsplit(") ", 1)[1].split()[1]) == parent:
                out.append(int(entry))
    return out


def _cmdline(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


@dataclass
class StandaloneCluster:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url`` is the master's URL.

    Args:
        directory: Logs and the workers' ``--work-dir`` (else they write into pyspark).
        workers: How many workers.
        cores: Cores per worker.
        memory: Memory per worker (``--memory``).
        die_with_parent: Each JVM is SIGKILLed when the thread that started it ends
            (Linux ``PR_SET_PDEATHSIG``): a run that is killed leaves no cluster behind.
            Start and stop from the main thread then.
    """

    directory: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
    die_with_parent: bool = False
    url: str = ""
    _procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    _logs: list[IO[bytes]] = field(default_factory=list)

    def _spawn(self, name: str, args: list[str]) -> Path:
        log = self.directory / f"{name}.log"
        handle = log.open("wb")
        self._logs.append(handle)
        env = dict(os.environ, SPARK_HOME=spark_home(), SPARK_LOCAL_IP="127.0.0.1")
        env.setdefault("SPARK_DAEMON_MEMORY", "256m")
        self._procs.append(
            subprocess.Popen(
                [os.path.join(spark_home(), "bin", "spark-class"), *args],
                env=env,
                stdout=handle,
                stderr=subprocess.STDOUT,
                cwd=self.directory,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.die_with_parent else None,
            )
        )
        return log

    def _wait(self, log: Path, pattern: str, count: int, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while True:
            text = log.read_text(errors="replace")
            if len(re.findall(pattern, text)) >= count:
                return
            dead = [p.args for p in self._procs if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(
                    f"Spark standalone: no {pattern!r} x{count} in {log} "
                    f"(exited: {dead}):\n{text[-3000:]}"
                )
            time.sleep(0.2)

    def start(self, timeout_s: float = 120.0) -> StandaloneCluster:
        """Start the master, then the workers; return once every worker registered."""
        self.directory.mkdir(parents=True, exist_ok=True)
        port = _free_port()
        master = self._spawn(
            "master",
            [
                "org.apache.spark.deploy.master.Master",
                "--host",
                "127.0.0.1",
                "--port",
                str(port),
                "--webui-port",
                "0",
            ],
        )
        self.url = f"spark://127.0.0.1:{port}"
        self._wait(master, r"I have been elected leader", 1, timeout_s)
        for i in range(self.workers):
            work = self.directory / f"work-{i}"
            work.mkdir(exist_ok=True)
            self._spawn(
                f"worker-{i}",
                [
                    "org.apache.spark.deploy.worker.Worker",
                    "--host",
                    "127.0.0.1",
                    "--cores",
                    str(self.cores),
                    "--memory",
                    self.memory,
                    "--webui-port",
                    "0",
                    "--work-dir",
                    str(work),
                    self.url,
                ],
            )
        self._wait(master, r"Registering worker", self.workers, timeout_s)
        return self

    def worker_pids(self) -> list[int]:
        """The worker JVMs' pids, in worker order (``spark-class`` execs the JVM)."""
        return [p.pid for p in self._procs[1:]]

    def executors(self, worker: int) -> list[int]:
        """The pids of the executor JVMs that worker ``worker`` runs now."""
        pids = self.worker_pids()
        if not 0 <= worker < len(pids):
            return []
        return [c for c in _children(pids[worker]) if EXECUTOR_CLASS in _cmdline(c)]

    def logs(self) -> list[Path]:
        """Every log of this cluster (:func:`standalone_logs`)."""
        return standalone_logs(self.directory)

    def stop(self) -> None:
        """Stop the workers, then the master (SIGTERM, then SIGKILL after 15 s)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(15)
        self._procs.clear()
        for handle in self._logs:
            handle.close()
        self._logs.clear()
