"""The processes of a chaos run: producers, readers and coordinator daemons, by slot.

A *slot* is a role that a process fills (``producer-0``, ``main-1``, ``coordinator-0``);
a killed process is replaced by a new *incarnation* of its slot, with a new id in the
histories (``producer-0.2``). Every process is started in its own session (the run's
signals reach it only when the run sends them) and dies with the run (Linux
``PR_SET_PDEATHSIG``), so nothing outlives a run, even one that is killed itself.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import signal
import subprocess
import sys
import threading
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ordered.chaos.java_reader import java_argv

__all__ = ["Slot", "Slots"]

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass
class Slot:
    """One role of the run and the process that fills it now.

    Attributes:
        name: The slot (``producer-0``, ``main-1``, ``lag-0``, ``coordinator-1``).
        kind: ``producer``, ``reader``, ``pipeline`` or ``coordinator``.
        group: The consumer group of a reader, else empty.
        incarnation: How many processes this slot has had.
        proc: The current process (``None`` before the first start).
        stopped: Whether the run has SIGSTOPped it.
        wanted: Whether the slot should be filled (a member that left is not).
        signalled: Whether the run told the current process to end (an exit without
            that is a crash).
    """

    name: str
    kind: str
    group: str = ""
    incarnation: int = 0
    proc: subprocess.Popen[bytes] | None = None
    stopped: bool = False
    wanted: bool = True
    signalled: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def java(self) -> bool:
        """Whether the slot is a Java reader (:mod:`ordered.chaos.java_reader`)."""
        return bool(self.extra.get("java"))

    @property
    def ident(self) -> str:
        """The current incarnation's id in the histories."""
        return f"{self.name}.{self.incarnation}"

    @property
    def alive(self) -> bool:
        """Whether the current process runs."""
        return self.proc is not None and self.proc.poll() is None

    @property
    def pid(self) -> int:
        """The current process id (0 when none)."""
        return self.proc.pid if self.proc is not None else 0


class Slots:
    """Starts, signals and stops the run's processes.

    Args:
        workdir: Where histories (``history/``), stats (``stats/``) and logs go.
        base: The spec every worker gets (cluster, topic, store root).
        coordinator_argv: The command line of a coordinator daemon.
        zookeeper_for: A slot's own ZooKeeper connect string (its network-fault
            proxies), else every process gets the base one.
        java_command: How a Java reader starts (:func:`ordered.chaos.java_reader.java_command`);
            a reader slot added with ``java=True`` runs it instead of the Python worker.
    """

    def __init__(
        self,
        workdir: Path,
        base: dict[str, Any],
        coordinator_argv: list[str],
        zookeeper_for: Callable[[str], str] | None = None,
        java_command: list[str] | None = None,
    ) -> None:
        self.workdir = workdir
        self.java_command = java_command
        self.zookeeper_for = zookeeper_for
        self.base = base
        self.coordinator_argv = coordinator_argv
        self.slots: dict[str, Slot] = {}
        for sub in ("history", "stats", "logs"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)

    def add(self, name: str, kind: str, group: str = "", **extra: Any) -> Slot:
        """Declare a slot (not started)."""
        slot = Slot(name, kind, group, extra=dict(extra))
        self.slots[name] = slot
        return slot

    def start(self, slot: Slot) -> None:
        """Start a new incarnation of ``slot`` (the previous one must be gone).

        Only from the main thread: ``PR_SET_PDEATHSIG`` fires when the *thread* that
        started a child ends, so a child started by a worker thread would be killed
        with it.
        """
        if threading.current_thread() is not threading.main_thread():
            raise RuntimeError(f"{slot.name}: processes are started from the main thread only")
        slot.incarnation += 1
        slot.stopped = False
        slot.wanted = True
        slot.signalled = False
        log = open(self.workdir / "logs" / f"{slot.name}.log", "ab")  # noqa: SIM115
        own = {"zookeeper": self.zookeeper_for(slot.name)} if self.zookeeper_for else {}
        if slot.kind == "coordinator":
            # The last --zookeeper counts: the slot's own proxies.
            argv = self.coordinator_argv + [f"--zookeeper={z}" for z in own.values()]
        else:
            spec = {
                **self.base,
                **own,
                **slot.extra,
                "role": slot.kind,
                "id": slot.ident,
                "group": slot.group,
                "seed": zlib.crc32(slot.ident.encode()),
                "history": str(self.workdir / "history" / f"{slot.ident}.jsonl"),
                "stats": str(self.workdir / "stats" / f"{slot.ident}.json"),
            }
            if slot.java:
                if self.java_command is None:
                    raise RuntimeError(f"{slot.name}: a Java reader, but no Java command")
                argv = java_argv(self.java_command, spec)
            else:
                argv = [sys.executable, "-m", "ordered.chaos.worker", json.dumps(spec)]
        try:
            slot.proc = subprocess.Popen(
                argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent,
            )
        finally:
            log.close()

    def signal(self, slot: Slot, sig: int) -> bool:
        """Send ``sig`` to the slot's process; return whether it was running."""
        if not slot.alive or slot.proc is None:
            return False
        with contextlib.suppress(ProcessLookupError):
            os.kill(slot.proc.pid, sig)
        if sig in (signal.SIGKILL, signal.SIGTERM, signal.SIGHUP):
            slot.signalled = True
        if sig == signal.SIGSTOP:
            slot.stopped = True
        elif sig in (signal.SIGCONT, signal.SIGKILL):
            slot.stopped = False
        return True

    def wait_exit(self, slots: list[Slot], timeout: float, tick: Callable[[], None]) -> list[Slot]:
        """Wait until ``slots``' processes exit; return those still running after ``timeout``."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            left = [s for s in slots if s.alive]
            if not left:
                return []
            tick()
            time.sleep(0.5)
        return [s for s in slots if s.alive]

    def stats(self) -> dict[str, dict[str, Any]]:
        """The last stats of every incarnation, by its id."""
        out: dict[str, dict[str, Any]] = {}
        for path in (self.workdir / "stats").glob("*.json"):
            with contextlib.suppress(OSError, ValueError):
                out[path.stem] = json.loads(path.read_text())
        return out

    def kill_all(self) -> None:
        """SIGCONT then SIGKILL every process of the run, and reap them."""
        for slot in self.slots.values():
            if slot.alive and slot.proc is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(slot.proc.pid, signal.SIGCONT)
                    os.kill(slot.proc.pid, signal.SIGKILL)
        for slot in self.slots.values():
            if slot.proc is not None:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    slot.proc.wait(10)
