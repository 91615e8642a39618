"""The local development cluster: one ZooKeeper and one or three Kafka KRaft nodes.

``up`` starts ZooKeeper and Kafka (one combined broker+controller, or three combined
nodes forming the controller quorum) on loopback, waits until Kafka's metadata and
ZooKeeper answer, and records everything in ``<dir>/cluster.json``. ``down`` stops the
processes that file names, by pid and start time. A failed ``up`` stops whatever it
had started before it raises, so nothing is left running.

The state file is :mod:`coordinator.devcluster.state`. The cluster directory is owned
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
from collections.abc import Callable
from pathlib import Path

from coordinator.client.errors import ClusterError, UsageError
from coordinator.devcluster import jars, secure
from coordinator.devcluster.process import (
    HOST,
    ProcessRecord,
    check_port_free,
    find_java,
    free_ports,
    java_major_version,
    spawn,
    terminate,
)
from coordinator.devcluster.servers import (
    check_meta,
    format_storage,
    kafka_argv,
    kafka_properties,
    log4j_config,
    start_zookeeper,
    wait_kafka,
)
from coordinator.devcluster.state import (
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


def _validate_dir(directory: Path, brokers: int, secured: bool = False) -> ClusterState | None:
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


def _ports(
    directory: Path,
    previous: ClusterState | None,
    brokers: int,
    kafka_port: int | None,
    zookeeper_port: int | None,
) -> tuple[int, list[tuple[int, int]]]:
    """The ZooKeeper port and each node's ``(broker, controller)`` ports.

    A restart keeps the previous ports (clients still point at them) unless new ones
    are asked for; a fresh cluster takes free ports.
    """
    picked = iter(free_ports(2 * brokers + 1))
    old_zk = _port_of(previous.zookeeper_connect) if previous else None
    old_brokers = [_port_of(a) for a in previous.bootstrap_servers.split(",")] if previous else []
    zk_port = zookeeper_port or old_zk or next(picked)
    ports = []
    for i in range(brokers):
        if kafka_port is not None:
            broker = kafka_port + i
        elif i < len(old_brokers):
            broker = old_brokers[i]
        else:
            broker = next(picked)
        controller = _controller_port(directory, i + 1) if previous else None
        if controller is None:
            controller = next(picked)
        ports.append((broker, controller))
    return zk_port, ports


def up(
    directory: Path | None = None,
    *,
    brokers: int = 1,
    kafka_port: int | None = None,
    zookeeper_port: int | None = None,
    timeout: float = 120.0,
    progress: Progress | None = None,
    secured: bool = False,
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
        zookeeper_port: ZooKeeper client port; default: the previous port, else a free one.
        timeout: Seconds to wait for the servers to answer.
        progress: Called with a line of text per step.
        secured: Start the secure variant (SASL/SCRAM-SHA-512 with ACLs, ZooKeeper
            authentication) and write the client property files
            (:mod:`coordinator.devcluster.secure`).

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
    directory = (directory or default_dir()).resolve()
    previous = _validate_dir(directory, brokers, secured)
    alive = {p.role: p for p in previous.running()} if previous else {}
    if alive and (kafka_port is not None or zookeeper_port is not None):
        raise ClusterError(
            f"the cluster in {directory} is partly running ({', '.join(sorted(alive))}); "
            "new ports need `ordered cluster down` first"
        )
    zk_port, ports = _ports(directory, previous, brokers, kafka_port, zookeeper_port)
    if "zookeeper" not in alive:
        check_port_free(zk_port, "ZooKeeper client port")
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
        secure.write_properties(
            directory, creds, bootstrap, f"{HOST}:{zk_port}", tls.ca if tls else None
        )
    state = ClusterState(
        directory=str(directory),
        cluster_id=cluster_id,
        brokers=brokers,
        bootstrap_servers=bootstrap,
        zookeeper_connect=f"{HOST}:{zk_port}",
        kafka_version=kafka_jars.version,
        zookeeper_version=previous.zookeeper_version if previous else zk_jars.version,
        processes=tuple(alive.values()),
        secure=secured,
        client_properties=str(secure.properties_path(directory, secure.ADMIN)) if creds else "",
    )
    # Claim the directory before anything starts: a failed start leaves a stopped
    # cluster of ours that the next `up` resumes, never an unrecognised directory.
    _write_state(directory, state)
    deadline = time.monotonic() + timeout
    records: list[ProcessRecord] = []
    zk_version = state.zookeeper_version
    try:
        if "zookeeper" in alive:
            say(f"ZooKeeper on {HOST}:{zk_port} is running (pid {alive['zookeeper'].pid})")
        else:
            say(f"starting ZooKeeper {zk_jars.version} on {HOST}:{zk_port}")
            zk_version = start_zookeeper(
                directory, zk_port, zk_jars.classpath, java, deadline, records, creds, tls
            )
        to_format = []
        for node in range(1, brokers + 1):
            if f"broker-{node}" in alive:
                continue
            node_dir = directory / f"kafka-{node}"
            (node_dir / "data").mkdir(parents=True, exist_ok=True)
            props = node_dir / "server.properties"
            props.write_text(kafka_properties(node, directory, ports, brokers, creds))
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
        brokers_now = [r for r in [*alive.values(), *records] if r.role != "zookeeper"]
        wait_kafka(bootstrap, brokers, brokers_now, deadline, auth)
    except BaseException:
        terminate(records, timeout=10)
        raise
    order = {"zookeeper": 0, **{f"broker-{n}": n for n in range(1, brokers + 1)}}
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
    killed = terminate([p for p in alive if p.role != "zookeeper"], timeout=timeout)
    killed += terminate([p for p in alive if p.role == "zookeeper"], timeout=timeout)
    return state, killed
