"""The record of a development cluster: ``<dir>/cluster.json`` and where the directory is.

:class:`ClusterState` is what ``up`` started (schema version 1, JSON with sorted keys);
:mod:`ordered.devcluster.cluster` writes it and re-exports these names.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from coordinator.kernel.errors import ClusterError
from ordered.devcluster.process import (
    ProcessRecord,
    is_alive,
)

__all__ = ["STATE_FILE", "STATE_VERSION", "ClusterState", "default_dir", "load_state"]

STATE_FILE = "cluster.json"
"""The state file's name in the cluster directory."""
STATE_VERSION = 1
"""The schema version of the state file."""


def default_dir() -> Path:
    """Return the cluster directory: ``$ORDERED_CLUSTER_DIR`` or ``~/.local/state/ordered/cluster``.

    The default lives outside any checkout so every shell finds the same cluster.
    """
    env = os.environ.get("ORDERED_CLUSTER_DIR")
    return Path(env) if env else Path.home() / ".local" / "state" / "ordered" / "cluster"


@dataclass(frozen=True)
class ClusterState:
    """What ``up`` started, as stored in ``<dir>/cluster.json`` (schema version 1).

    Attributes:
        directory: The cluster directory.
        cluster_id: The Kafka cluster id its storage was formatted with.
        brokers: Number of Kafka nodes (1 or 3).
        bootstrap_servers: Kafka's ``bootstrap.servers``.
        zookeeper_connect: ZooKeeper's connect string (``host:port``, or every member's
            ``host:port`` of an ensemble, comma-separated).
        kafka_version: The Kafka version the nodes run.
        zookeeper_version: The ZooKeeper version, as the server reports it.
        processes: Every process started.
        started_at: Unix time of the last successful ``up``.
        start_seconds: How long the last ``up`` took.
        secure: Whether Kafka asks for SASL/SCRAM with ACLs and ZooKeeper for
            authentication (``up --secure``; :mod:`ordered.devcluster.secure`).
        client_properties: The admin's Java client properties file (secure only).
        zookeepers: Number of ZooKeeper servers: 1 (role ``zookeeper``) or an ensemble
            of 3 or 5 (roles ``zookeeper-1``...; :mod:`ordered.devcluster.ensemble`).
            A state file written before ensembles existed has 1.
    """

    directory: str
    cluster_id: str
    brokers: int
    bootstrap_servers: str
    zookeeper_connect: str
    kafka_version: str
    zookeeper_version: str
    processes: tuple[ProcessRecord, ...] = field(default_factory=tuple)
    started_at: float = 0.0
    start_seconds: float = 0.0
    secure: bool = False
    client_properties: str = ""
    zookeepers: int = 1

    def to_json(self) -> str:
        """Serialise to JSON with sorted keys, with the schema version."""
        data: dict[str, Any] = {
            "version": STATE_VERSION,
            "directory": self.directory,
            "cluster_id": self.cluster_id,
            "brokers": self.brokers,
            "bootstrap_servers": self.bootstrap_servers,
            "zookeeper_connect": self.zookeeper_connect,
            "kafka_version": self.kafka_version,
            "zookeeper_version": self.zookeeper_version,
            "processes": [p.to_dict() for p in self.processes],
            "started_at": self.started_at,
            "start_seconds": self.start_seconds,
            "secure": self.secure,
            "client_properties": self.client_properties,
            "zookeepers": self.zookeepers,
        }
        return json.dumps(data, sort_keys=True, indent=2)

    @classmethod
    def from_json(cls, text: str, source: str = STATE_FILE) -> ClusterState:
        """Parse :meth:`to_json` output.

        Raises:
            ClusterError: the text is not a state record of a known version.
        """
        try:
            data = json.loads(text)
            if data.get("version") != STATE_VERSION:
                raise ClusterError(
                    f"{source} has schema version {data.get('version')!r}; this ordered "
                    f"reads version {STATE_VERSION}"
                )
            return cls(
                directory=str(data["directory"]),
                cluster_id=str(data["cluster_id"]),
                brokers=int(data["brokers"]),
                bootstrap_servers=str(data["bootstrap_servers"]),
                zookeeper_connect=str(data["zookeeper_connect"]),
                kafka_version=str(data["kafka_version"]),
                zookeeper_version=str(data["zookeeper_version"]),
                processes=tuple(ProcessRecord.from_dict(p) for p in data["processes"]),
                started_at=float(data["started_at"]),
                start_seconds=float(data["start_seconds"]),
                secure=bool(data.get("secure", False)),
                client_properties=str(data.get("client_properties", "")),
                zookeepers=int(data.get("zookeepers", 1)),
            )
        except (ValueError, KeyError, TypeError, AttributeError) as exc:
            raise ClusterError(f"{source} is not a valid cluster state file: {exc}") from exc

    def running(self) -> list[ProcessRecord]:
        """Return the processes of this cluster that are still alive."""
        return [p for p in self.processes if is_alive(p)]

    def to_settings(self) -> dict[str, Any]:
        """Return the connection settings and status as a JSON-ready dict."""
        alive = {p.role for p in self.running()}
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "zookeeper.connect": self.zookeeper_connect,
            "kafka.version": self.kafka_version,
            "zookeeper.version": self.zookeeper_version,
            "brokers": self.brokers,
            "zookeepers": self.zookeepers,
            "cluster.id": self.cluster_id,
            "directory": self.directory,
            "start.seconds": round(self.start_seconds, 2),
            "secure": self.secure,
            **({"command.config": self.client_properties} if self.secure else {}),
            "processes": [
                {"role": p.role, "pid": p.pid, "alive": p.role in alive, "log": p.log}
                for p in self.processes
            ],
        }


def load_state(directory: Path) -> ClusterState | None:
    """Return the state recorded in ``directory``, or None when it holds none."""
    path = directory / STATE_FILE
    if not path.is_file():
        return None
    return ClusterState.from_json(path.read_text(), str(path))


def _write_state(directory: Path, state: ClusterState) -> None:
    tmp = directory / (STATE_FILE + ".tmp")
    tmp.write_text(state.to_json())
    tmp.replace(directory / STATE_FILE)
