"""Start, find and stop the server JVMs of the dev cluster, and pick loopback ports.

A started process is remembered as a :class:`ProcessRecord`: its pid *and* its start
time from ``/proc``, so a later ``down`` never signals a recycled pid that now belongs
to some other program.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from coordinator.kernel.errors import ClusterError

__all__ = [
    "HOST",
    "ProcessRecord",
    "check_port_free",
    "find_java",
    "free_ports",
    "is_alive",
    "java_major_version",
    "kill",
    "spawn",
    "terminate",
]

HOST = "127.0.0.1"


@dataclass(frozen=True, slots=True)
class ProcessRecord:
    """A process the dev cluster started.

    Attributes:
        role: What it is (``zookeeper``, ``broker-1``, ...).
        pid: Its process id.
        start_ticks: Its start time in clock ticks since boot (``/proc/PID/stat`` field 22).
        log: The file its standard output and error go to.
    """

    role: str
    pid: int
    start_ticks: int
    log: str

    def to_dict(self) -> dict[str, Any]:
        """Return the record as a JSON-ready dict."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ProcessRecord:
        """Build a record from :meth:`to_dict` output."""
        return cls(str(data["role"]), int(data["pid"]), int(data["start_ticks"]), str(data["log"]))


def _stat(pid: int) -> tuple[str, int] | None:
    """Return (state, start ticks) of ``pid``, or None when there is no such process."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError, PermissionError):
        return None
    # The command name (field 2) may hold spaces and parentheses: split after the last ')'.
    fields = raw[raw.rindex(")") + 2 :].split()
    return fields[0], int(fields[19])


# Children started by this process, kept so their exit status can be collected.
_children: dict[int, subprocess.Popen[bytes]] = {}


def _reap(pid: int) -> None:
    # A JVM started by this very process stays a zombie until waited for.
    child = _children.pop(pid, None)
    if child is not None:
        child.poll()


def is_alive(record: ProcessRecord) -> bool:
    """Return whether the process of ``record`` still runs (the same process, not a reused pid)."""
    stat = _stat(record.pid)
    if stat is None or stat[1] != record.start_ticks:
        return False
    if stat[0] in ("Z", "X"):
        _reap(record.pid)
        return False
    return True


def find_java() -> str:
    """Return the ``java`` executable: ``$JAVA_HOME/bin/java``, else ``java`` on ``PATH``.

    Raises:
        ClusterError: no Java runtime was found.
    """
    home = os.environ.get("JAVA_HOME")
    if home and os.access(Path(home) / "bin" / "java", os.X_OK):
        return str(Path(home) / "bin" / "java")
    found = shutil.which("java")
    if found is None:
        raise ClusterError(
            "java was not found on PATH and JAVA_HOME is not set: Kafka needs Java 17 or "
            "newer (apt-get install openjdk-17-jre-headless)"
        )
    return found


def java_major_version(java: str) -> int:
    """Return the major version of the ``java`` executable (``17`` for 17.0.15).

    Raises:
        ClusterError: it does not run or does not print a version.
    """
    try:
        out = subprocess.run(
            [java, "-version"], capture_output=True, text=True, timeout=30, check=False
        )
    except OSError as exc:
        raise ClusterError(f"{java} does not run: {exc}") from exc
    for token in (out.stderr + out.stdout).split():
        token = token.strip('"')
        if token[:1].isdigit():
            head = token.split(".")[0]
            if head.isdigit():
                return int(head)
    raise ClusterError(f"{java} -version printed no version: {out.stderr.strip()[:200]}")


def free_ports(count: int) -> list[int]:
    """Return ``count`` distinct TCP ports that are free on the loopback address now."""
    sockets: list[socket.socket] = []
    try:
        for _ in range(count):
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.bind((HOST, 0))
            sockets.append(sock)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for sock in sockets:
            sock.close()


def check_port_free(port: int, what: str) -> None:
    """Raise a :class:`ClusterError` naming ``what`` when ``port`` is taken on loopback."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((HOST, port))
        except OSError:
            raise ClusterError(
                f"port {port} on {HOST} ({what}) is already in use; free it or choose another port"
            ) from None


def spawn(role: str, argv: list[str], log: Path, cwd: Path) -> ProcessRecord:
    """Start ``argv`` detached (its own session), output appended to ``log``.

    The child outlives the CLI that started it; :func:`terminate` stops it by its record.
    """
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "ab") as out:
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=cwd,
            start_new_session=True,
        )
    _children[proc.pid] = proc
    stat = _stat(proc.pid)
    ticks = stat[1] if stat else 0
    return ProcessRecord(role, proc.pid, ticks, str(log))


def terminate(records: list[ProcessRecord], timeout: float = 15.0) -> list[str]:
    """Stop every process of ``records``: SIGTERM all, wait, then SIGKILL the rest.

    Returns:
        The roles that had to be killed with SIGKILL.
    """
    alive = [r for r in records if is_alive(r)]
    for rec in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rec.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        alive = [r for r in alive if is_alive(r)]
        if not alive:
            return []
        time.sleep(0.05)
    killed = []
    for rec in alive:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(rec.pid, signal.SIGKILL)
        killed.append(rec.role)
    deadline = time.monotonic() + 5.0
    while any(is_alive(r) for r in alive) and time.monotonic() < deadline:
        time.sleep(0.05)
    return killed


def kill(record: ProcessRecord, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` to the process of ``record`` if it is still the same process."""
    if is_alive(record):
        with contextlib.suppress(ProcessLookupError):
            os.kill(record.pid, sig)
