"""The server processes of the dev cluster: configuration, start-up and readiness.

ZooKeeper gets a ``zoo.cfg`` and a 4-letter-word readiness check; each Kafka node a
``server.properties`` (one combined broker+controller per node, KRaft) and a log4j2
configuration, its storage formatted once per cluster id. Every wait ends at a deadline
with the tail of the server's log in the error.
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Final

from coordinator.kernel.errors import ClusterError
from ordered.devcluster import secure
from ordered.devcluster.process import HOST, ProcessRecord, is_alive, spawn

__all__ = [
    "JVM_OPTS",
    "check_meta",
    "format_storage",
    "kafka_argv",
    "kafka_properties",
    "log4j_config",
    "start_zookeeper",
    "tail",
    "wait_kafka",
    "wait_port",
]

JVM_OPTS: Final = ["-Xms128m", "-Xmx768m", "-XX:+UseSerialGC", "-Djava.awt.headless=true"]


def kafka_argv(java: str, classpath: str, node_dir: Path) -> list[str]:
    """The command line of one Kafka node whose files are in ``node_dir``."""
    return [
        java,
        *JVM_OPTS,
        f"-Dlog4j2.configurationFile={node_dir / 'log4j2.properties'}",
        f"-Dkafka.logs.dir={node_dir}",
        "-cp",
        classpath,
        "kafka.Kafka",
        str(node_dir / "server.properties"),
    ]


def wait_port(port: int, record: ProcessRecord, deadline: float) -> None:
    while time.monotonic() < deadline:
        if not is_alive(record):
            raise ClusterError(f"{record.role} exited while starting:\n{tail(record.log)}")
        try:
            with socket.create_connection((HOST, port), timeout=0.5):
                return
        except OSError:
            time.sleep(0.05)
    raise ClusterError(
        f"{record.role} did not listen on {HOST}:{port} in time:\n{tail(record.log)}"
    )


def tail(log: str, lines: int = 15) -> str:
    try:
        content = Path(log).read_text(errors="replace").splitlines()
    except OSError:
        return "(no log)"
    return "\n".join(content[-lines:])


def _four_letter(port: int, word: bytes, ca: Path | None = None) -> str:
    """Send a 4-letter word; over TLS (trusting ``ca``) to a secure-only ZooKeeper."""
    with socket.create_connection((HOST, port), timeout=2) as raw:
        sock = raw
        if ca is not None:
            sock = ssl.create_default_context(cafile=str(ca)).wrap_socket(raw, server_hostname=HOST)
        sock.sendall(word)
        chunks = []
        while chunk := sock.recv(4096):
            chunks.append(chunk)
    return b"".join(chunks).decode(errors="replace")


def start_zookeeper(
    directory: Path,
    port: int,
    classpath: str,
    java: str,
    deadline: float,
    records: list[ProcessRecord],
    creds: secure.Credentials | None = None,
    tls: secure.TlsFiles | None = None,
    member: int = 0,
    quorum: Sequence[str] = (),
) -> str:
    """Start ZooKeeper, append its record to ``records`` at once, return its version.

    With ``creds`` and ``tls`` (``up --secure``) it serves TLS only on ``port`` and
    requires authentication (digest or SASL). A ``member`` (1...N) of an ensemble runs
    in ``zookeeper-<member>/`` with its ``myid`` and the ``quorum`` lines
    (``server.i=...``); it is not waited for beyond its client port (it serves once the
    ensemble elects a leader), and "" is returned.
    """
    if (creds is None) != (tls is None):
        raise ClusterError("a secure ZooKeeper needs both its credentials and its TLS files")
    zk_dir = directory / (f"zookeeper-{member}" if member else "zookeeper")
    (zk_dir / "data").mkdir(parents=True, exist_ok=True)
    if member:
        (zk_dir / "data" / "myid").write_text(f"{member}\n")
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
                *([] if tls else [f"clientPort={port}", f"clientPortAddress={HOST}"]),
                "maxClientCnxns=0",
                "minSessionTimeout=1000",
                "maxSessionTimeout=60000",
                "admin.enableServer=false",
                "4lw.commands.whitelist=srvr,ruok,stat,mntr,cons",
                *(secure.zookeeper_lines(tls, port, HOST) if tls else []),
                *quorum,
                "",
            ]
        )
    )
    cfg.chmod(0o600)  # a secure one holds its key store's password
    argv = [
        java,
        "-Xms64m",
        "-Xmx256m",
        "-XX:+UseSerialGC",
        *(secure.zookeeper_jvm_flags(creds, zk_dir) if creds else []),
        f"-Dorg.slf4j.simpleLogger.logFile={zk_dir / 'zookeeper.log'}",
        "-Dorg.slf4j.simpleLogger.showDateTime=true",
        "-cp",
        classpath,
        "org.apache.zookeeper.server.quorum.QuorumPeerMain",
        str(cfg),
    ]
    record = spawn(zk_dir.name, argv, zk_dir / "zookeeper.out", directory)
    records.append(record)
    wait_port(port, record, deadline)
    if member:
        return ""
    while time.monotonic() < deadline:
        try:
            reply = _four_letter(port, b"srvr", tls.ca if tls else None)
        except OSError:
            reply = ""
        if "Zookeeper version:" in reply:
            version = reply.split("Zookeeper version:")[1].split(",")[0].strip().split("-")[0]
            return version
        if not is_alive(record):
            break
        time.sleep(0.05)
    log = zk_dir / "zookeeper.log"
    raise ClusterError(f"ZooKeeper did not answer on {HOST}:{port}:\n{tail(str(log))}")


def kafka_properties(
    node: int,
    directory: Path,
    ports: list[tuple[int, int]],
    brokers: int,
    creds: secure.Credentials | None = None,
    client_listener: tuple[int, int] | None = None,
) -> str:
    """One node's ``server.properties``.

    ``client_listener`` ``(port, advertised_port)`` adds a plaintext listener ``CLIENT``
    for clients whose advertised port is another's (a fault proxy in front of it);
    inter-broker and controller traffic stay on the direct listeners.
    """
    broker_port, controller_port = ports[node - 1]
    voters = ",".join(f"{i + 1}@{HOST}:{c}" for i, (_, c) in enumerate(ports))
    rf = min(brokers, 3)
    listeners = (
        secure.kafka_security_lines(creds, broker_port, controller_port)
        if creds
        else [
            f"listeners=PLAINTEXT://{HOST}:{broker_port},CONTROLLER://{HOST}:{controller_port}",
            f"advertised.listeners=PLAINTEXT://{HOST}:{broker_port}",
            "listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT",
            "inter.broker.listener.name=PLAINTEXT",
        ]
    )
    if client_listener is not None:
        extra = {
            "listeners=": f",CLIENT://{HOST}:{client_listener[0]}",
            "advertised.listeners=": f",CLIENT://{HOST}:{client_listener[1]}",
            "listener.security.protocol.map=": ",CLIENT:PLAINTEXT",
        }
        listeners = [line + extra.get(line.split("=")[0] + "=", "") for line in listeners]
    return "\n".join(
        [
            "process.roles=broker,controller",
            f"node.id={node}",
            f"controller.quorum.voters={voters}",
            "controller.listener.names=CONTROLLER",
            *listeners,
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


def log4j_config(path: Path) -> str:
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


def check_meta(data_dir: Path, cluster_id: str, directory: Path) -> bool:
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


def wait_kafka(
    bootstrap: str,
    brokers: int,
    records: list[ProcessRecord],
    deadline: float,
    auth: dict[str, str] | None = None,
) -> None:
    from coordinator.kernel.kafka_admin import KafkaAdmin

    # Quiet: librdkafka logs every refused connection while the broker is starting.
    admin = KafkaAdmin(bootstrap, config={"log_level": 0, **(auth or {})})
    while time.monotonic() < deadline:
        for rec in records:
            if not is_alive(rec):
                raise ClusterError(f"{rec.role} exited while starting:\n{tail(rec.log)}")
        try:
            if admin.broker_count(timeout=1.0) >= brokers:
                break
        except Exception:
            pass
        time.sleep(0.1)
    else:
        raise ClusterError(
            f"Kafka metadata did not list {brokers} broker(s) in time:\n{tail(records[0].log)}"
        )
    _wait_group_coordinator(bootstrap, deadline, records, auth)


def _wait_group_coordinator(
    bootstrap: str,
    deadline: float,
    records: list[ProcessRecord],
    auth: dict[str, str] | None = None,
) -> None:
    """Have the broker create ``__consumer_offsets`` and answer an OffsetFetch.

    A consumer that ``assign()``s first on a fresh cluster gets NOT_COORDINATOR while
    the offsets topic is created, and librdkafka (2.16) then does not fetch that
    partition for tens of seconds; one group request here spares every first user that.
    """
    from confluent_kafka import Consumer, TopicPartition

    probe = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "ordered-devcluster-warmup",
            "log_level": 0,
            **(auth or {}),
        }
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
    raise ClusterError(f"Kafka's group coordinator did not answer in time:\n{tail(records[0].log)}")


def format_storage(
    java: str,
    classpath: str,
    cluster_id: str,
    nodes: list[tuple[int, Path]],
    directory: Path,
    extra: list[str] | None = None,
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
            *(extra or []),
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
