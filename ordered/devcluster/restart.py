"""Restart servers of a running dev cluster (fault injection: broker and ZooKeeper bounces).

A process is started again exactly as it ran: the command line and working directory
are read from ``/proc`` before it is stopped, so the restarted server has the same
configuration, ports and data. The cluster's state file is updated with the new
processes, so ``ordered cluster down`` still stops everything.

Roles are the state file's (``broker-2``, ``zookeeper``, ``zookeeper-3``);
``zookeeper`` names every ZooKeeper server, which for an ensemble is every member.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from coordinator.kernel.errors import ClusterError
from ordered.devcluster.ensemble import is_zookeeper
from ordered.devcluster.process import ProcessRecord, is_alive, spawn
from ordered.devcluster.state import STATE_FILE, load_state

__all__ = ["restart_node", "restart_nodes", "roles_of"]


def roles_of(directory: Path, role: str) -> list[str]:
    """The process roles ``role`` stands for: ``zookeeper`` is every ZooKeeper server.

    Raises:
        ClusterError: No cluster in ``directory``, or it has no process of that role.
    """
    state = load_state(directory)
    if state is None:
        raise ClusterError(f"no cluster in {directory}")
    known = [p.role for p in state.processes]
    found = [r for r in known if is_zookeeper(r)] if role == "zookeeper" else [role]
    if not found or any(r not in known for r in found):
        raise ClusterError(f"the cluster in {directory} has no {role} (it has {', '.join(known)})")
    return found


def restart_node(
    directory: Path,
    role: str,
    *,
    down_s: float = 0.0,
    sig: int = signal.SIGTERM,
    stop_timeout: float = 15.0,
) -> ProcessRecord:
    """Stop the server ``role`` (``zookeeper``, ``broker-2``...), wait, start it again.

    ``zookeeper`` on an ensemble stops every member at once and starts them all again
    (:func:`restart_nodes`); the first member's record is returned.

    Args:
        directory: The cluster directory.
        role: The process role, as the state file names it, or ``zookeeper``.
        down_s: Seconds to stay down between the stop and the start.
        sig: The stop signal (``SIGTERM``: a clean stop, ``SIGKILL``: a crash); a process
            still alive after ``stop_timeout`` seconds gets ``SIGKILL``.
        stop_timeout: Seconds to wait for the stop.

    Returns:
        The record of the new process.

    Raises:
        ClusterError: No running process of that role in the cluster.
    """
    roles = roles_of(directory, role)
    return restart_nodes(directory, roles, down_s=down_s, sig=sig, stop_timeout=stop_timeout)[0]


def restart_nodes(
    directory: Path,
    roles: Sequence[str],
    *,
    down_s: float = 0.0,
    sig: int = signal.SIGTERM,
    stop_timeout: float = 15.0,
) -> list[ProcessRecord]:
    """Stop the servers ``roles`` together, wait ``down_s`` seconds, start them again.

    Two members of a three-member ZooKeeper ensemble, say: the ensemble loses its
    quorum for ``down_s`` seconds. Arguments as :func:`restart_node`.

    Returns:
        The records of the new processes, in the order of ``roles``.

    Raises:
        ClusterError: One of ``roles`` has no running process (nothing was stopped).
    """
    state = load_state(directory)
    if state is None:
        raise ClusterError(f"no cluster in {directory}")
    olds = []
    for role in roles:
        found = [p for p in state.processes if p.role == role]
        if not found or not is_alive(found[0]):
            raise ClusterError(f"{role} of the cluster in {directory} is not running")
        olds.append(found[0])
    commands = []
    for old in olds:
        argv = Path(f"/proc/{old.pid}/cmdline").read_bytes().rstrip(b"\0").split(b"\0")
        commands.append((argv, Path(os.readlink(f"/proc/{old.pid}/cwd"))))
    for old in olds:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(old.pid, sig)
    deadline = time.monotonic() + stop_timeout
    while any(is_alive(old) for old in olds) and time.monotonic() < deadline:
        time.sleep(0.05)
    for old in olds:
        if is_alive(old):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(old.pid, signal.SIGKILL)
    while any(is_alive(old) for old in olds):
        time.sleep(0.05)
    time.sleep(down_s)
    news = [
        spawn(old.role, [a.decode() for a in argv], Path(old.log), cwd)
        for old, (argv, cwd) in zip(olds, commands, strict=True)
    ]
    # The state file as it is now (another restart may have rewritten it meanwhile).
    current = load_state(directory) or state
    by_role = {new.role: new for new in news}
    processes = tuple(by_role.get(p.role, p) for p in current.processes)
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.write_text(replace(current, processes=processes).to_json())
    tmp.replace(directory / STATE_FILE)
    return news
