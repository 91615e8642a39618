"""Restart one server of a running dev cluster (fault injection: broker and ZooKeeper bounces).

The process is started again exactly as it ran: the command line and working directory
are read from ``/proc`` before it is stopped, so the restarted server has the same
configuration, ports and data. The cluster's state file is updated with the new
process, so ``ordered cluster down`` still stops everything.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import replace
from pathlib import Path

from coordinator.client.errors import ClusterError
from coordinator.devcluster.process import ProcessRecord, is_alive, spawn
from coordinator.devcluster.state import STATE_FILE, load_state

__all__ = ["restart_node"]


def restart_node(
    directory: Path,
    role: str,
    *,
    down_s: float = 0.0,
    sig: int = signal.SIGTERM,
    stop_timeout: float = 15.0,
) -> ProcessRecord:
    """Stop the server ``role`` (``zookeeper``, ``broker-2``...), wait, start it again.

    Args:
        directory: The cluster directory.
        role: The process role, as the state file names it.
        down_s: Seconds to stay down between the stop and the start.
        sig: The stop signal (``SIGTERM``: a clean stop, ``SIGKILL``: a crash); a process
            still alive after ``stop_timeout`` seconds gets ``SIGKILL``.
        stop_timeout: Seconds to wait for the stop.

    Returns:
        The record of the new process.

    Raises:
        ClusterError: No running process of that role in the cluster.
    """
    state = load_state(directory)
    if state is None:
        raise ClusterError(f"no cluster in {directory}")
    found = [p for p in state.processes if p.role == role]
    if not found or not is_alive(found[0]):
        raise ClusterError(f"{role} of the cluster in {directory} is not running")
    old = found[0]
    argv = Path(f"/proc/{old.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
    cwd = Path(os.readlink(f"/proc/{old.pid}/cwd"))
    with contextlib.suppress(ProcessLookupError):
        os.killpg(old.pid, sig)
    deadline = time.monotonic() + stop_timeout
    while is_alive(old) and time.monotonic() < deadline:
        time.sleep(0.05)
    if is_alive(old):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old.pid, signal.SIGKILL)
        while is_alive(old):
            time.sleep(0.05)
    time.sleep(down_s)
    new = spawn(role, [a.decode() for a in argv], Path(old.log), cwd)
    # The state file as it is now (another restart may have rewritten it meanwhile).
    current = load_state(directory) or state
    processes = tuple(new if p.role == role else p for p in current.processes)
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.write_text(replace(current, processes=processes).to_json())
    tmp.replace(directory / STATE_FILE)
    return new
