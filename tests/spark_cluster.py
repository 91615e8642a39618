"""A Spark standalone cluster on loopback, from the pyspark package: a master, N workers.

Each is a separate JVM started with ``bin/spark-class`` (the wheel has no
``sbin/start-master.sh``), so executors run in their own JVMs with their own Python
workers: nothing of the driver's memory reaches them except what Spark pickles.
"""

from __future__ import annotations

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
    "StandaloneCluster",
    "driver_log",
    "find_in_logs",
    "run_logs",
    "spark_home",
    "standalone_logs",
]


def spark_home() -> str:
    """The pyspark package folder: it is a Spark home (``bin/``, ``jars/``)."""
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def driver_log(spark: object) -> Path | None:
    """The driver JVM's stderr as a file, or ``None`` when it is a terminal or a pipe.

    The JVM inherits the stderr of the Python process that started it: pytest's
    capture file, or the file a run's output is redirected to. A dying thread's stack
    (``Exception in thread ...``) goes there, not to log4j.
    """
    proc = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    proc = getattr(proc, "proc", None)
    if proc is None:
        return None
    path = Path(f"/proc/{proc.pid}/fd/2")
    try:
        return path if path.is_file() else None  # a pipe or a terminal is no file
    except OSError:
        return None


def standalone_logs(directory: Path) -> list[Path]:
    """Every log of a standalone cluster started in ``directory``.

    The master's and workers' logs, and each executor's ``stdout`` and ``stderr``
    (``work-N/app-.../EXECUTOR/``).
    """
    found = sorted(directory.glob("*.log"))
    found += sorted(p for p in directory.glob("work-*/app-*/*/std*") if p.is_file())
    return found


def run_logs(spark: object, base: Path) -> tuple[Path | None, list[Path]]:
    """The driver's stderr (:func:`driver_log`) and the logs of every standalone cluster
    started under ``base`` (a pytest base temp: ``spark-standalone*`` folders)."""
    found: list[Path] = []
    for directory in sorted(base.glob("spark-standalone*")):
        found += standalone_logs(directory)
    return driver_log(spark), found


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


@dataclass
class StandaloneCluster:
    """Start with :meth:`start`, stop with :meth:`stop`; ``url`` is the master's URL.

    Args:
        directory: Logs and the workers' ``--work-dir`` (else they write into pyspark).
        workers: How many workers.
        cores: Cores per worker.
        memory: Memory per worker (``--memory``).
    """

    directory: Path
    workers: int = 2
    cores: int = 1
    memory: str = "1g"
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

    def stop(self) -> None:
        """Stop the workers, then the master (SIGTERM, then SIGKILL after 15 s)."""
        for proc in reversed(self._procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in reversed(self._procs):
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(15)
        self._procs.clear()
        for handle in self._logs:
            handle.close()
        self._logs.clear()
