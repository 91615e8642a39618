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
import socket
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from coordinator.devcluster import jars
from coordinator.devcluster.process import (
    HOST,
    ProcessRecord,
    check_port_free,
    find_java,
    free_ports,
    is_alive,
    java_major_version,
    spawn,
    terminate,
)
from coordinator.devcluster.state import (
    STATE_FILE,
    ClusterState,
    _write_state,
    default_dir,
    load_state,
)
from coordinator.errors import ClusterError, UsageError

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

_JVM_OPTS = ["-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]

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


def _wait_port(port: int, record: ProcessRecord, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not is_alive(record):
            raise ClusterError(f"{record.role} exited while starting:\n{_tail(record.log)}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ClusterError(
        f"{record.role} did not listen on {HOST}:{port} in time:\n{_tail(record.log)}"
    )


def _tail(log: str, lines: int = 15) -> str:
    try:
        content = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(content[-lines:])


def _four_letter(port: int, word: bytes) -> str:
    with socket.create_connection((HOST, port), timeout=2) as sock:
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def _start_zookeeper(
    directory: Path,
    port: int,
    classpath: str,
    java: str,
    deadline: float,
    records: list[ProcessRecord],
) -> str:
    """Start ZooKeeper, append its record to ``records`` at once, return its version."""
    zk_dir = directory / "zookeeper"
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    cfg = zk_dir / "zoo.cfg"
    # tickTime 500 ms lets tests ask for 1 s sessions (the minimum is 2 ticks); the
    # maximum stays at 60 s for producers that declare long timeouts.
    cfg.write_text(
        "\n".join(
            [
                "tickTime=500",
                "initLimit=10",
                "syncLimit=5",
                f"dataDir={zk_dir / 'data'}",
                f"clientPort={port}",
                f"clientPortAddress={HOST}",
                "maxClientCnxns=0",
                "minSessionTimeout=1000",
                "maxSessionTimeout=60000",
                "admin.enableServer=false",
                "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons",
                "",
            ]
        )
    )
    argv = [
        java,
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        f"-Dorg.slf4j.simpleLogger.logFile={zk_dir / 'zookeeper.log'}",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-cp",
        classpath,
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        str(cfg),
    ]
    record = spawn("zookeeper", argv, zk_dir / "zookeeper.out", directory)
    records.append(record)
    _wait_port(port, record, deadline)
    while time.monotonic() < deadline:
        try:
            reply = _four_letter(port, b"srvr")
        except OSError:
            reply = ""
        if "Zookeeper version:" in reply:
            version = reply.split("Zookeeper version:")[1].split(",")[0].strip().split("-")[0]
            return version
        if not is_alive(record):
            break
        time.sleep(0.05)
    log = zk_dir / "zookeeper.log"
    raise ClusterError(f"ZooKeeper did not answer on {HOST}:{port}:\n{_tail(str(log))}")


def _kafka_properties(
    node: int, directory: Path, ports: list[tuple[int, int]], brokers: int
) -> str:
    broker_port, controller_port = ports[node - 1]
    voters = ",".join(f"{i + 1}@{HOST}:{c}" for i, (_, c) in enumerate(ports))
    rf = min(brokers, 3)
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={node}",
            f"controller.quorum.voters={voters}",
            f"listeners=PLAINTEXT://{HOST}:{broker_port},CONTROLLER://{HOST}:{controller_port}",
            f"advertised.listeners=PLAINTEXT://{HOST}:{broker_port}",
            "controller.listener.names=CONTROLLER",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
            f"log.dirs={directory / f'kafka-{node}' / 'data'}",
            "num.partitions=1",
            f"default.replication.factor={rf}",
            f"offsets.topic.replication.factor={rf}",
            "offsets.topic.num.partitions=8",
            f"transaction.state.log.replication.factor={rf}",
            f"transaction.state.log.min.isr={1 if brokers == 1 else 2}",
            f"share.coordinator.state.topic.replication.factor={rf}",
            f"share.coordinator.state.topic.min.isr={1 if brokers == 1 else 2}",
            "group.initial.rebalance.delay.ms=0",
            "auto.create.topics.enable=false",
            "log.segment.bytes=16777216",
            "log.retention.check.interval.ms=10000",
            "",
        ]
    )


def _log4j(path: Path) -> str:
    return "\n".join(
        [
            "status = error",
            "appender.file.type = File",
            "appender.file.name = FILE",
            f"appender.file.fileName = {path}",
            "appender.file.layout.type = PatternLayout",
            "appender.file.layout.pattern = [%d] %p %m (%c)%n",
            "rootLogger.level = INFO",
            "rootLogger.appenderRef.file.ref = FILE",
            "logger.kafka.name = kafka",
            "logger.kafka.level = INFO",
            "logger.state.name = state.change.logger",
            "logger.state.level = WARN",
            "",
        ]
    )


def _check_meta(data_dir: Path, cluster_id: str, directory: Path) -> bool:
    """Return whether ``data_dir`` is formatted; raise when for another cluster."""
    meta = data_dir / "meta.properties"
    if not meta.is_file():
        return False
    for line in meta.read_text().splitlines():
        if line.startswith("cluster.id="):
            found = line.split("=", 1)[1].strip()
            if found != cluster_id:
                raise ClusterError(
                    f"{directory} belongs to another cluster: {data_dir} was formatted for "
                    f"cluster {found}, the state file says {cluster_id}; use another --dir"
                )
    return True


def _wait_kafka(
    bootstrap: str, brokers: int, records: list[ProcessRecord], deadline: float
) -> None:
    from confluent_kafka.admin import AdminClient

    # Quiet: librdkafka logs every refused connection while the broker is starting.
    admin = AdminClient({"bootstrap.servers": bootstrap, "log_level": 0})
    while time.monotonic() < deadline:
        for rec in records:
            if not is_alive(rec):
                raise ClusterError(f"{rec.role} exited while starting:\n{_tail(rec.log)}")
        try:
            md = admin.list_topics(timeout=1.0)
            if len(md.brokers) >= brokers:
                break
        except Exception:
            pass
        time.sleep(0.1)
    else:
        raise ClusterError(
            f"Kafka metadata did not list {brokers} broker(s) in time:\n{_tail(records[0].log)}"
        )
    _wait_group_coordinator(bootstrap, deadline, records)


def _wait_group_coordinator(bootstrap: str, deadline: float, records: list[ProcessRecord]) -> None:
    """Have the broker create ``__consumer_offsets`` and answer an OffsetFetch.

    A consumer that ``assign()``s first on a fresh cluster gets NOT_COORDINATOR while
    the offsets topic is created, and librdkafka (2.16) then does not fetch that
    partition for tens of seconds; one group request here spares every first user that.
    """
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "ordered-devcluster-warmup", "log_level": 0}
    )
    try:
        while time.monotonic() < deadline:
            try:
                probe.committed([TopicPartition("ordered-devcluster-warmup", 0)], timeout=5)
                return
            except Exception:
                time.sleep(0.1)
    finally:
        probe.close()
    raise ClusterError(
        f"Kafka's group coordinator did not answer in time:\n{_tail(records[0].log)}"
    )


def _validate_dir(directory: Path, brokers: int) -> ClusterState | None:
    """Check that ``directory`` is empty or a stopped cluster of the same shape."""
    if directory.exists() and not directory.is_dir():
        raise UsageError(f"{directory} exists and is not a directory")
    previous = load_state(directory) if directory.exists() else None
    if previous is not None:
        alive = previous.running()
        if alive:
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
        for node in range(1, brokers + 1):
            _check_meta(directory / f"kafka-{node}" / "data", previous.cluster_id, directory)
        return previous
    if directory.exists() and any(directory.iterdir()):
        raise ClusterError(
            f"{directory} is not empty and holds no {STATE_FILE}: it belongs to something "
            "else; use an empty or new --dir"
        )
    return None


def up(
    directory: Path | None = None,
    *,
    brokers: int = 1,
    kafka_port: int | None = None,
    zookeeper_port: int | None = None,
    timeout: float = 120.0,
    progress: Progress | None = None,
) -> ClusterState:
    """Start ZooKeeper and Kafka and return their state (also written to the state file).

    Args:
        directory: Cluster directory (default :func:`default_dir`); data, logs, state.
        brokers: 1 (combined broker+controller) or 3 (three combined nodes, a quorum).
        kafka_port: First broker port (the others follow); default: free ports.
        zookeeper_port: ZooKeeper client port; default: a free port.
        timeout: Seconds to wait for the servers to answer.
        progress: Called with a line of text per step.

    Raises:
        UsageError: bad arguments.
        ClusterError: a port is taken, Java or the jars are missing, the directory belongs
            to another cluster, or a server failed to start. Nothing is left running.
    """
    say = progress or (lambda _msg: None)
    started = time.monotonic()
    if brokers not in (1, 3):
        raise UsageError(f"--brokers must be 1 or 3, not {brokers}")
    directory = (directory or default_dir()).resolve()
    previous = _validate_dir(directory, brokers)

    # Ports: a requested port that is taken is an error; free ones are picked otherwise.
    picked = free_ports(2 * brokers + 1)
    zk_port = zookeeper_port if zookeeper_port is not None else picked[0]
    if kafka_port is not None:
        ports = [(kafka_port + i, picked[1 + i]) for i in range(brokers)]
    else:
        ports = [(picked[1 + 2 * i], picked[2 + 2 * i]) for i in range(brokers)]
    check_port_free(zk_port, "ZooKeeper client port")
    for i, (bp, cp) in enumerate(ports):
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
    state = ClusterState(
        directory=str(directory),
        cluster_id=cluster_id,
        brokers=brokers,
        bootstrap_servers=bootstrap,
        zookeeper_connect=f"{HOST}:{zk_port}",
        kafka_version=kafka_jars.version,
        zookeeper_version=zk_jars.version,
    )
    # Claim the directory before anything starts: a failed start leaves a stopped
    # cluster of ours that the next `up` resumes, never an unrecognised directory.
    _write_state(directory, state)
    deadline = time.monotonic() + timeout
    records: list[ProcessRecord] = []
    try:
        say(f"starting ZooKeeper {zk_jars.version} on {HOST}:{zk_port}")
        zk_version = _start_zookeeper(
            directory, zk_port, zk_jars.classpath, java, deadline, records
        )
        to_format = []
        for node in range(1, brokers + 1):
            node_dir = directory / f"kafka-{node}"
            (node_dir / "data").mkdir(parents=True, exist_ok=True)
            props = node_dir / "server.properties"
            props.write_text(_kafka_properties(node, directory, ports, brokers))
            (node_dir / "log4j2.properties").write_text(_log4j(node_dir / "server.log"))
            if not _check_meta(node_dir / "data", cluster_id, directory):
                to_format.append((node, props))
        if to_format:
            say(f"formatting storage of {len(to_format)} Kafka node(s), cluster id {cluster_id}")
            _format_storage(java, kafka_jars.classpath, cluster_id, to_format, directory)
        for node in range(1, brokers + 1):
            node_dir = directory / f"kafka-{node}"
            say(f"starting Kafka {kafka_jars.version} node {node} on {HOST}:{ports[node - 1][0]}")
            argv = [
                java,
                *_JVM_OPTS,
                f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}",
                f"-Dkafka.logs.dir={node_dir}",
                "-cp",
                kafka_jars.classpath,
                "kafka.Kafka",
                str(node_dir / "server.properties"),
            ]
            records.append(spawn(f"broker-{node}", argv, node_dir / "kafka.out", directory))
        say("waiting for Kafka metadata")
        _wait_kafka(bootstrap, brokers, records[1:], deadline)
    except BaseException:
        terminate(records, timeout=10)
        raise
    state = dataclasses.replace(
        state,
        zookeeper_version=zk_version,
        processes=tuple(records),
        started_at=time.time(),
        start_seconds=time.monotonic() - started,
    )
    _write_state(directory, state)
    return state


def _format_storage(
    java: str,
    classpath: str,
    cluster_id: str,
    nodes: list[tuple[int, Path]],
    directory: Path,
) -> None:
    import subprocess

    # One JVM per node, in parallel: each format is mostly JVM start-up.
    procs = []
    for node, props in nodes:
        argv = [
            java,
            "-Xmx256m",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            f"-Dlog4j2.configurationFile={props.parent / 'log4j2.properties'}",
            "-cp",
            classpath,
            "kafka.tools.StorageTool",
            "format",
            "-t",
            cluster_id,
            "-c",
            str(props),
            "--ignore-formatted",
        ]
        procs.append(
            (node, subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
        )
    for node, proc in procs:
        out, _ = proc.communicate(timeout=120)
        if proc.returncode != 0:
            raise ClusterError(
                f"formatting Kafka node {node} storage in {directory} failed:\n"
                + out.decode(errors="replace")[-1500:]
            )


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

    Returns:
        The state and the roles that needed SIGKILL. Data stays for a warm restart.

    Raises:
        ClusterError: there is no cluster in ``directory``.
    """
    state = status(directory)
    alive = state.running()
    if not alive:
        raise ClusterError(f"the cluster in {state.directory} is not running; nothing to stop")
    # Brokers first, ZooKeeper last: nothing of Kafka needs ZooKeeper, but clients of the
    # layer may be connected to both and see a cleaner shutdown this way.
    killed = terminate([p for p in alive if p.role != "zookeeper"], timeout=timeout)
    killed += terminate([p for p in alive if p.role == "zookeeper"], timeout=timeout)
    return state, killed
