"""The ZooKeeper ensemble's faults of a chaos run (``ordered chaos --zookeepers 3``).

- ``kill-zookeeper-member``: SIGKILL one member (the leader, or a named one), start it
  again 2-15 s later. The other members keep the quorum (a new leader is elected when
  the leader died); clients connected to the dead member move to another one.
- ``zookeeper-quorum-loss``: SIGKILL a majority (2 of 3), start them again 5-20 s
  later. The remaining member stops serving: every client's session is suspended until
  the quorum is back (producers hold, layout changes and trims wait and retry).
- ``zookeeper-restart`` on an ensemble: SIGKILL every member, start them again 1-4 s
  later.

Each fault runs in the fault runner's cluster thread (one cluster fault at a time) and
ends when the ensemble has a leader again and every member serves; how long that took
is kept in :attr:`ZookeeperFaults.outages` for the run's result.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ordered.chaos.schedule import FaultKind, ScheduledFault, ScheduleShape
from ordered.devcluster import ensemble
from ordered.devcluster.restart import restart_nodes
from ordered.devcluster.state import load_state

__all__ = ["ZOOKEEPER_KINDS", "ZookeeperFaults"]

ZOOKEEPER_KINDS = frozenset({FaultKind.KILL_ZOOKEEPER_MEMBER, FaultKind.ZOOKEEPER_QUORUM_LOSS})
"""The fault kinds only an ensemble has."""

QUORUM_TIMEOUT = 180.0
"""Seconds a restarted ensemble gets to elect a leader with every member serving."""


class ZookeeperFaults:
    """Injects the ensemble's faults (and ``zookeeper-restart`` on an ensemble).

    Args:
        cluster_dir: The run's dev cluster directory.
        shape: The schedule's shape (``zookeepers``: the ensemble's size).
        fault: Records an injected fault: ``(kind, target, detail)``.
        say: Prints one line of the fault log.
    """

    def __init__(
        self,
        cluster_dir: Path,
        shape: ScheduleShape,
        fault: Callable[[FaultKind, str, str], None],
        say: Callable[[str], None],
    ) -> None:
        self.cluster_dir = cluster_dir
        self._fault, self._say = fault, say
        self.kinds: frozenset[FaultKind] = (
            ZOOKEEPER_KINDS | {FaultKind.ZOOKEEPER_RESTART} if shape.zookeepers > 1 else frozenset()
        )
        """The kinds :meth:`inject` handles: none with a single ZooKeeper."""
        self.kills = 0
        """ZooKeeper servers SIGKILLed."""
        self.outages: list[dict[str, Any]] = []
        """Per fault: its kind, the members killed, seconds down, seconds to a quorum."""

    def inject(self, fault: ScheduledFault) -> None:
        """SIGKILL the fault's members, start them again after ``down_s``, wait for a quorum.

        Raises:
            ClusterError: A member was not running, or no quorum formed in time.
        """
        roles = self._targets(fault)
        down = float(fault.params["down_s"])
        lost_quorum = len(roles) > len(ensemble.member_roles(self._size())) // 2
        self.kills += len(roles)
        what = "no quorum" if lost_quorum else "the others keep the quorum"
        self._fault(fault.kind, ",".join(roles), f"SIGKILL; down for {down} s ({what})")
        started = time.monotonic()
        restart_nodes(self.cluster_dir, roles, down_s=down, sig=signal.SIGKILL)
        _version, leader = ensemble.wait_cluster_quorum(self.cluster_dir, QUORUM_TIMEOUT)
        took = time.monotonic() - started
        self.outages.append(
            {
                "kind": fault.kind.value,
                "members": roles,
                "down_s": down,
                "back_s": round(took, 1),
                "quorum_lost": lost_quorum,
            }
        )
        self._say(f"{','.join(roles)} back after {took:.1f} s; {leader} leads, every member serves")

    def _size(self) -> int:
        state = load_state(self.cluster_dir)
        return state.zookeepers if state is not None else 1

    def _targets(self, fault: ScheduledFault) -> list[str]:
        if fault.kind is FaultKind.ZOOKEEPER_RESTART:
            return ensemble.member_roles(self._size())
        if fault.target == "leader":
            # The leader at the time of the fault (the schedule cannot know it); with
            # none elected (a quorum still forming), the first member.
            return [ensemble.leader(self.cluster_dir) or ensemble.member_roles(self._size())[0]]
        return fault.target.split(",")
