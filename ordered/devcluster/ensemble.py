"""The ZooKeeper servers of the dev cluster: one standalone server or an ensemble.

``ordered cluster up`` starts one ZooKeeper (role and directory ``zookeeper``, as it
always did); ``--zookeepers 3`` (or 5) starts an ensemble in quorum mode: members
``zookeeper-1`` ... ``zookeeper-N``, each in its own directory with its ``myid``, its
client port and a ``zoo.cfg`` that lists every member as
``server.i=127.0.0.1:PEER:ELECTION``. ``up`` returns once a leader is elected and every
member serves (the ``srvr`` four-letter word says ``Mode: leader`` or ``follower``).

A restarted cluster keeps every port: the client ports are in the state file's connect
string, the peer and election ports in each member's ``zoo.cfg``.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from coordinator.kernel.errors import ClusterError, UsageError
from ordered.devcluster.process import HOST, ProcessRecord, is_alive
from ordered.devcluster.servers import _four_letter, tail
from ordered.devcluster.state import ClusterState, load_state

__all__ = [
    "SIZES",
    "MemberPorts",
    "check_size",
    "is_zookeeper",
    "leader",
    "member_roles",
    "modes",
    "previous_ports",
    "quorum_lines",
    "serving_mode",
    "wait_cluster_quorum",
    "wait_quorum",
]

SIZES: Final = (1, 3, 5)
"""The ZooKeeper server counts ``up`` accepts: one, or an odd ensemble that outlives
the loss of one (3) or two (5) members."""

STANDALONE: Final = "zookeeper"
"""The role (and directory) of the single ZooKeeper of a one-server cluster."""


@dataclass(frozen=True)
class MemberPorts:
    """The ports of one ZooKeeper server: clients, followers to the leader, elections.

    A standalone server has only a client port (``peer`` and ``election`` are 0).
    """

    client: int
    peer: int = 0
    election: int = 0


def check_size(count: int) -> None:
    """Refuse a ZooKeeper count other than :data:`SIZES`.

    Raises:
        UsageError: ``count`` is not 1, 3 or 5.
    """
    if count not in SIZES:
        raise UsageError(
            f"--zookeepers must be 1, 3 or 5, not {count}: an ensemble needs an odd number "
            "of servers so that a majority survives the loss of a minority"
        )


def member_roles(count: int) -> list[str]:
    """The process roles of ``count`` ZooKeeper servers (``zookeeper``, or ``zookeeper-i``)."""
    return [STANDALONE] if count == 1 else [f"{STANDALONE}-{i}" for i in range(1, count + 1)]


def is_zookeeper(role: str) -> bool:
    """Whether ``role`` names a ZooKeeper server (standalone or a member)."""
    return role == STANDALONE or re.fullmatch(rf"{STANDALONE}-\d+", role) is not None


def quorum_lines(ports: Sequence[MemberPorts]) -> list[str]:
    """The ``zoo.cfg`` lines of a member of the ensemble ``ports`` (none when standalone)."""
    if len(ports) == 1:
        return []
    return [f"server.{i}={HOST}:{p.peer}:{p.election}" for i, p in enumerate(ports, start=1)]


def previous_ports(directory: Path, count: int) -> list[MemberPorts | None]:
    """Each member's ports as its ``zoo.cfg`` names them (None: no config yet)."""
    out: list[MemberPorts | None] = []
    for i, role in enumerate(member_roles(count), start=1):
        try:
            text = (directory / role / "zoo.cfg").read_text()
        except OSError:
            out.append(None)
            continue
        client = re.search(r"^clientPort=(\d+)$", text, re.M)
        peers = re.search(rf"^server\.{i}=[^:]+:(\d+):(\d+)$", text, re.M)
        if client is None:
            out.append(None)
        elif peers is None:
            out.append(MemberPorts(int(client.group(1))))
        else:
            out.append(MemberPorts(int(client.group(1)), int(peers[1]), int(peers[2])))
    return out


def serving_mode(port: int) -> str:
    """What the ZooKeeper on ``port`` says it is: ``leader``, ``follower``, ``standalone``,
    ``not serving`` (up, but in no quorum) or ``down`` (no answer)."""
    try:
        reply = _four_letter(port, b"srvr")
    except OSError:
        return "down"
    found = re.search(r"^Mode: (\S+)", reply, re.M)
    return found.group(1) if found else "not serving"


def modes(connect: str, roles: Sequence[str]) -> dict[str, str]:
    """Each server's :func:`serving_mode`, by role, for the connect string ``connect``."""
    ports = [int(part.rsplit(":", 1)[1]) for part in connect.split("/")[0].split(",")]
    return {role: serving_mode(port) for role, port in zip(roles, ports, strict=False)}


def _version(port: int) -> str:
    try:
        reply = _four_letter(port, b"srvr")
    except OSError:
        return ""
    if "Zookeeper version:" not in reply:
        return ""
    return reply.split("Zookeeper version:")[1].split(",")[0].strip().split("-")[0]


def wait_quorum(
    members: Sequence[tuple[str, int]],
    records: Sequence[ProcessRecord],
    deadline: float,
    say: Callable[[str], None] | None = None,
) -> tuple[str, str]:
    """Wait until a leader is elected and every member serves; return (version, leader role).

    Args:
        members: ``(role, client port)`` of every member.
        records: The members' processes (one that exits fails the wait at once).
        deadline: ``time.monotonic()`` value to give up at.
        say: Called with a progress line when the quorum's state changes.

    Raises:
        ClusterError: A member exited, or the quorum did not form by the deadline.
    """
    started = time.monotonic()
    last = ""
    while True:
        for rec in records:
            if not is_alive(rec):
                raise ClusterError(f"{rec.role} exited while starting:\n{_log_tail(rec)}")
        now = {role: serving_mode(port) for role, port in members}
        leaders = [role for role, mode in now.items() if mode == "leader"]
        serving = [role for role, mode in now.items() if mode in ("leader", "follower")]
        line = (
            f"ZooKeeper quorum: {leaders[0]} leads, {len(serving)} of {len(members)} serving"
            if leaders
            else f"ZooKeeper quorum: no leader yet, {len(serving)} of {len(members)} serving"
        )
        if line != last and say is not None:
            say(f"{line} ({time.monotonic() - started:.1f} s)")
        last = line
        if leaders and len(serving) == len(members):
            return _version(members[0][1]), leaders[0]
        if time.monotonic() >= deadline:
            states = ", ".join(f"{role} {mode}" for role, mode in now.items())
            logs = "\n".join(_log_tail(rec, 5) for rec in records)
            raise ClusterError(
                f"the ZooKeeper ensemble elected no leader in time ({states}):\n{logs}"
            )
        time.sleep(0.2)


def _log_tail(record: ProcessRecord, lines: int = 15) -> str:
    log = Path(record.log).parent / "zookeeper.log"
    return f"{record.role}: " + tail(str(log if log.is_file() else record.log), lines)


def _members(state: ClusterState) -> list[tuple[str, int]]:
    ports = [int(part.rsplit(":", 1)[1]) for part in state.zookeeper_connect.split(",")]
    return list(zip(member_roles(state.zookeepers), ports, strict=True))


def wait_cluster_quorum(
    directory: Path, timeout: float, say: Callable[[str], None] | None = None
) -> tuple[str, str]:
    """:func:`wait_quorum` for the ensemble of the cluster in ``directory``, as its state
    file records it now (after a restart of some members, say).

    Raises:
        ClusterError: No cluster there, it has a single ZooKeeper, or no quorum in time.
    """
    state = load_state(directory)
    if state is None or state.zookeepers == 1:
        raise ClusterError(f"no ZooKeeper ensemble in {directory}")
    records = [p for p in state.processes if is_zookeeper(p.role)]
    return wait_quorum(_members(state), records, time.monotonic() + timeout, say)


def leader(directory: Path) -> str | None:
    """The role of the member that leads the ensemble in ``directory`` now, if any."""
    state = load_state(directory)
    if state is None:
        return None
    found = [role for role, port in _members(state) if serving_mode(port) == "leader"]
    return found[0] if found else None
