"""The local development cluster: ZooKeeper (one server or an ensemble) and Kafka KRaft.

``up`` starts ZooKeeper (one server, or an ensemble of 3 or 5 in quorum mode:
:mod:`ordered.devcluster.ensemble`) and Kafka (one combined broker+controller, or
three combined nodes forming the controller quorum) on loopback, waits until Kafka's
metadata and ZooKeeper answer (an ensemble: a leader elected, every member serving),
and records everything in ``<dir>/cluster.json``. ``down`` stops the
processes that file names, by pid and start time. A failed ``up`` stops whatever it
had started before it raises, so nothing is left running.

The state file is :mod:`ordered.devcluster.state`. The cluster directory is owned
by one cluster: its state file carries the Kafka
cluster id that the broker storage was formatted with, and ``up`` refuses a directory
that holds another cluster's files.
"""

from __future__ import annotations

import base64
import dataclasses
import re
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

from coordinator.kernel.errors import ClusterError, UsageError
from ordered.devcluster import ensemble, jars, secure
from ordered.devcluster.ensemble import MemberPorts, is_zookeeper, member_roles
from ordered.devcluster.process import (
    HOST,
    ProcessRecord,
    check_port_free,
    find_java,
    free_ports,
    java_major_version,
    spawn,
    terminate,
)
from ordered.devcluster.servers import (
    check_meta,
    format_storage,
    kafka_argv,
    kafka_properties,
    log4j_config,
    start_zookeeper,
    wait_kafka,
)
from ordered.devcluster.state import (
    STATE_FILE,
    ClusterState,
    _write_state,
    default_dir,
    load_state,
)

__all__ = [
    "STATE_FILE",
    "ClusterState",
    "default_dir",
    "down",
    "fetch",
    "load_state",
    "status",
    "up",
]


Progress = Callable[[str], None]


def _new_cluster_id() -> str:
    # Like Kafka's Uuid.randomUuid: an id starting with "-" would be read as an option
    # by kafka-storage's argument parser.
    while True:
        cluster_id = base64.urlsafe_b64encode(uuid.uuid4().bytes).decode().rstrip("=")
        if not cluster_id.startswith("-"):
            return cluster_id


def fetch(progress: Progress | None = None) -> list[jars.ResolvedJars]:
    """Make sure the pinned Kafka and ZooKeeper jars are in the cache; return both."""
    return [jars.resolve("kafka", progress=progress), jars.resolve("zookeeper", progress=progress)]


def _validate_dir(
    directory: Path, brokers: int, secured: bool = False, zookeepers: int = 1
) -> ClusterState | None:
    """Check that ``directory`` is empty or a cluster of the same shape, not all running."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    previous = load_state(directory) if directory.exists() else None
    if previous is not None:
        alive = previous.running()
        if alive and len(alive) == len(previous.processes):
            pids = ", ".join(f"{p.role} pid {p.pid}" for p in alive)
            raise ClusterError(
                f"a cluster is already running in {directory} ({pids}); use `ordered cluster "
                "status` to see it or `ordered cluster down` to stop it"
            )
        if previous.brokers != brokers:
            raise ClusterError(
                f"{directory} holds a {previous.brokers}-broker cluster; start it with "
                f"--brokers {previous.brokers} or use another --dir"
            )
        if previous.zookeepers != zookeepers:
            raise ClusterError(
                f"{directory} holds a cluster with {previous.zookeepers} ZooKeeper server(s); "
                f"start it with --zookeepers {previous.zookeepers} or use another --dir"
            )
        if previous.secure != secured:
            kind = "secure" if previous.secure else "plain"
            raise ClusterError(
                f"{directory} holds a {kind} cluster; start it "
                + ("with" if previous.secure else "without")
                + " --secure or use another --dir"
            )
        for node in range(1, brokers + 1):
            check_meta(directory / f"kafka-{node}" / "data", previous.cluster_id, directory)
        return previous
    if directory.exists() and any(directory.iterdir()):
        raise ClusterError(
            f"{directory} is not empty and holds no {STATE_FILE}: it belongs to something "
            "else; use an empty or new --dir"
        )
    return None


def _port_of(address: str) -> int:
    return int(address.rsplit(":", 1)[1])


def _controller_port(directory: Path, node: int) -> int | None:
    """The controller port a node's ``server.properties`` names, if any."""
    try:
        text = (directory / f"kafka-{node}" / "server.properties").read_text()
    except OSError:
        return None
    found = re.search(r"CONTROLLER://[^:,]+:(\d+)", text)
    return int(found.group(1)) if found else None


def _nth_port(i: int, asked: int | None, previous: list[int], picked: Iterator[int]) -> int:
    """Server ``i``'s port: ``asked + i``, else the previous run's, else the next free one."""
    if asked is not None:
        return asked + i
    if i < len(previous):
        return previous[i]
    return next(picked)


def _ports(
    directory: Path,
    previous: ClusterState | None,
    brokers: int,
    kafka_port: int | None,
    zookeeper_port: int | None,
    zookeepers: int = 1,
) -> tuple[list[MemberPorts], list[tuple[int, int]]]:
    """Each ZooKeeper server's ports and each Kafka node's ``(broker, controller)`` ports.

    A restart keeps the previous ports (clients still point at them) unless new ones
    are asked for; a fresh cluster takes free ports.
    """
    picked = iter(free_ports(2 * brokers + 3 * zookeepers))
    old_zk = [_port_of(a) for a in previous.zookeeper_connect.split(",")] if previous else []
    old_peers = ensemble.previous_ports(directory, zookeepers) if previous else []
    old_brokers = [_port_of(a) for a in previous.bootstrap_servers.split(",")] if previous else []
    zk_ports = []
    for i in range(zookeepers):
        client = _nth_port(i, zookeeper_port, old_zk, picked)
        old = old_peers[i] if i < len(old_peers) else None
        if zookeepers == 1:
            zk_ports.append(MemberPorts(client))
        elif old is not None and old.peer:
            zk_ports.append(MemberPorts(client, old.peer, old.election))
        else:
            zk_ports.append(MemberPorts(client, next(picked), next(picked)))
    ports = []
    for i in range(brokers):
        broker = _nth_port(i, kafka_port, old_brokers, picked)
        controller = _controller_port(directory, i + 1) if previous else None
        if controller is None:
            controller = next(picked)
        ports.append((broker, controller))
    return zk_ports, ports


def up(
    directory: Path | None = None,
    *,
    brokers: int = 1,
    kafka_port: int | None = None,
    zookeeper_port: int | None = None,
    timeout: float = 120.0,
    progress: Progress | None = None,
    secured: bool = False,
    zookeepers: int | None = None,
    client_listeners: list[tuple[int, int]] | None = None,
) -> ClusterState:
    """Start ZooKeeper and Kafka and return their state (also written to the state file).

    A stopped cluster starts again on the ports it had (unless ``kafka_port`` or
    ``zookeeper_port`` choose new ones), so clients that knew it find it again. A
    partly running cluster (say, the broker died) gets its dead processes started
    again on their ports; the running ones are left alone.

    Args:
        directory: Cluster directory (default :func:`default_dir`); data, logs, state.
        brokers: 1 (combined broker+controller) or 3 (three combined nodes, a quorum).
        kafka_port: First broker port (the others follow); default: the previous ports,
            else free ports.
        zookeeper_port: ZooKeeper client port (of an ensemble: the first member's, the
            others follow); default: the previous ports, else free ones.
        timeout: Seconds to wait for the servers to answer.
        progress: Called with a line of text per step.
        secured: Start the secure variant (SASL/SCRAM-SHA-512 with ACLs, ZooKeeper
            authentication) and write the client property files
            (:mod:`ordered.devcluster.secure`).
        zookeepers: 1 (a standalone ZooKeeper), or 3 or 5 (an ensemble in quorum mode,
            members ``zookeeper-1``...; ``up`` returns once a leader is elected and every
            member serves). Default: as many as the directory's cluster has, else 1.
        client_listeners: Per node, ``(port, advertised_port)`` of an extra plaintext
            listener for clients advertised at another port (``ordered chaos
            --network-faults`` puts its fault proxies there). Written to this start's
            ``server.properties`` only; not with ``secured``.

    Raises:
        UsageError: bad arguments.
        ClusterError: every process runs already, a port is taken, Java or the jars
            are missing, the directory belongs to another cluster, or a server failed
            to start. What this call started is stopped again.
    """
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    if brokers not in (1, 3):
        raise UsageError(f"--brokers must be 1 or 3, not {brokers}")
    if client_listeners is not None and (secured or len(client_listeners) != brokers):
        raise UsageError("client listeners: one per broker, and not with a secure cluster")
    directory = (directory or default_dir()).resolve()
    if zookeepers is None:
        known = load_state(directory) if (directory / STATE_FILE).is_file() else None
        zookeepers = known.zookeepers if known is not None else 1
    ensemble.check_size(zookeepers)
    if secured and zookeepers > 1:
        # The ensemble's readiness checks and its members' quorum traffic are plain;
        # a secure cluster's one ZooKeeper serves TLS only.
        raise UsageError("--secure runs one ZooKeeper server (TLS only); not with --zookeepers")
    previous = _validate_dir(directory, brokers, secured, zookeepers)
    alive = {p.role: p for p in previous.running()} if previous else {}
    if alive and (kafka_port is not None or zookeeper_port is not None):
        raise ClusterError(
            f"the cluster in {directory} is partly running ({', '.join(sorted(alive))}); "
            "new ports need `ordered cluster down` first"
        )
    zk_ports, ports = _ports(directory, previous, brokers, kafka_port, zookeeper_port, zookeepers)
    zk_roles = member_roles(zookeepers)
    for role, zp in zip(zk_roles, zk_ports, strict=True):
        if role not in alive:
            for port, what in ((zp.client, "client"), (zp.peer, "peer"), (zp.election, "election")):
                if port:
                    name = "ZooKeeper" if zookeepers == 1 else f"ZooKeeper {role}"
                    check_port_free(port, f"{name} {what} port")
    for i, (bp, cp) in enumerate(ports):
        if f"broker-{i + 1}" not in alive:
            check_port_free(bp, f"Kafka broker {i + 1}")
            check_port_free(cp, f"Kafka controller {i + 1}")

    java = find_java()
    major = java_major_version(java)
    if major < 17:
        raise ClusterError(
            f"{java} is Java {major}; Kafka {jars.pinned_version('kafka')} needs 17+"
        )
    kafka_jars, zk_jars = fetch(say)

    directory.mkdir(parents=True, exist_ok=True)
    cluster_id = previous.cluster_id if previous else _new_cluster_id()
    bootstrap = ",".join(f"{HOST}:{bp}" for bp, _ in ports)
    zk_connect = ",".join(f"{HOST}:{zp.client}" for zp in zk_ports)
    creds = secure.make_credentials(directory) if secured else None
    tls = secure.make_tls(directory, java, HOST) if secured else None
    auth: dict[str, str] = {}
    if creds is not None:
        auth = {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": secure.ADMIN,
            "sasl.password": creds.password(secure.ADMIN),
        }
        secure.write_properties(directory, creds, bootstrap, zk_connect, tls.ca if tls else None)
    state = ClusterState(
        directory=str(directory),
        cluster_id=cluster_id,
        brokers=brokers,
        bootstrap_servers=bootstrap,
        zookeeper_connect=zk_connect,
        kafka_version=kafka_jars.version,
        zookeeper_version=previous.zookeeper_version if previous else zk_jars.version,
        processes=tuple(alive.values()),
        secure=secured,
        client_properties=str(secure.properties_path(directory, secure.ADMIN)) if creds else "",
        zookeepers=zookeepers,
    )
    # Claim the directory before anything starts: a failed start leaves a stopped
    # cluster of ours that the next `up` resumes, never an unrecognised directory.
    _write_state(directory, state)
    deadline = time.monotonic() + timeout
    records: list[ProcessRecord] = []
    zk_version = state.zookeeper_version
    try:
        quorum = ensemble.quorum_lines(zk_ports)
        for member, (role, zp) in enumerate(zip(zk_roles, zk_ports, strict=True), start=1):
            name = "ZooKeeper" if zookeepers == 1 else f"ZooKeeper {role}"
            if role in alive:
                say(f"{name} on {HOST}:{zp.client} is running (pid {alive[role].pid})")
                continue
            say(f"starting {name} {zk_jars.version} on {HOST}:{zp.client}")
            found = start_zookeeper(
                directory,
                zp.client,
                zk_jars.classpath,
                java,
                deadline,
                records,
                creds,
                tls,
                member=member if zookeepers > 1 else 0,
                quorum=quorum,
            )
            zk_version = found or zk_version
        if zookeepers > 1:
            say(f"waiting for a ZooKeeper quorum ({zookeepers} members)")
            members = [r for r in [*alive.values(), *records] if is_zookeeper(r.role)]
            zk_version, _leader = ensemble.wait_quorum(
                [(role, zp.client) for role, zp in zip(zk_roles, zk_ports, strict=True)],
                members,
                deadline,
                say,
            )
        to_format = []
        for node in range(1, brokers + 1):
            if f"broker-{node}" in alive:
                continue
            node_dir = directory / f"kafka-{node}"
            (node_dir / "data").mkdir(parents=True, exist_ok=True)
            props = node_dir / "server.properties"
            client = client_listeners[node - 1] if client_listeners else None
            props.write_text(kafka_properties(node, directory, ports, brokers, creds, client))
            (node_dir / "log4j2.properties").write_text(log4j_config(node_dir / "server.log"))
            if not check_meta(node_dir / "data", cluster_id, directory):
                to_format.append((node, props))
        if to_format:
            say(f"formatting storage of {len(to_format)} Kafka node(s), cluster id {cluster_id}")
            format_storage(
                java,
                kafka_jars.classpath,
                cluster_id,
                to_format,
                directory,
                secure.format_scram_args(creds) if creds else [],
            )
        for node in range(1, brokers + 1):
            role = f"broker-{node}"
            if role in alive:
                say(f"Kafka node {node} is running (pid {alive[role].pid})")
                continue
            node_dir = directory / f"kafka-{node}"
            say(f"starting Kafka {kafka_jars.version} node {node} on {HOST}:{ports[node - 1][0]}")
            argv = kafka_argv(java, kafka_jars.classpath, node_dir)
            records.append(spawn(role, argv, node_dir / "kafka.out", directory))
        say("waiting for Kafka metadata")
        brokers_now = [r for r in [*alive.values(), *records] if not is_zookeeper(r.role)]
        wait_kafka(bootstrap, brokers, brokers_now, deadline, auth)
    except BaseException:
        terminate(records, timeout=10)
        raise
    roles = [*zk_roles, *(f"broker-{n}" for n in range(1, brokers + 1))]
    order = {role: i for i, role in enumerate(roles)}
    state = dataclasses.replace(
        state,
        zookeeper_version=zk_version,
        processes=tuple(sorted([*alive.values(), *records], key=lambda r: order[r.role])),
        started_at=time.time(),
        start_seconds=time.monotonic() - started,
    )
    _write_state(directory, state)
    return state


def status(directory: Path | None = None) -> ClusterState:
    """Return the recorded state of the cluster in ``directory``.

    Raises:
        ClusterError: no cluster was ever started there.
    """
    directory = (directory or default_dir()).resolve()
    state = load_state(directory)
    if state is None:
        raise ClusterError(f"no cluster in {directory}: start one with `ordered cluster up`")
    return state


def down(directory: Path | None = None, timeout: float = 15.0) -> tuple[ClusterState, list[str]]:
    """Stop every process the cluster in ``directory`` started, and nothing else.

    Idempotent: a cluster that is not running (or only partly) is left stopped.

    Returns:
        The state and the roles that needed SIGKILL. Data stays for a warm restart.

    Raises:
        ClusterError: there is no cluster in ``directory``.
    """
    state = status(directory)
    alive = state.running()
    # Brokers first, ZooKeeper last: nothing of Kafka needs ZooKeeper, but clients of the
    # layer may be connected to both and see a cleaner shutdown this way.
    killed = terminate([p for p in alive if not is_zookeeper(p.role)], timeout=timeout)
    killed += terminate([p for p in alive if is_zookeeper(p.role)], timeout=timeout)
    return state, killed
