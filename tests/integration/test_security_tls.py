"""ZooKeeper over TLS in the secure cluster: every client, and nothing in clear.

``ordered cluster up --secure`` runs ZooKeeper with a ``secureClientPort`` only. No
packet capture here: "nothing in clear" is shown by the server's configuration (no
``clientPort``), by the ZooKeeper process listening on no other port, by a plain
ZooKeeper request and a plain 4-letter word getting no answer, and by a plain client
failing with a message that says why (within its connect timeout, not a hang).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import ssl
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from helpers import run_cli, unique, wait_until
from secure_fixtures import Secure

from coordinator.control.controller import Controller
from coordinator.kernel.errors import ConfigError, StoreUnavailableError
from coordinator.kernel.kafka_security import client_config
from coordinator.kernel.zk import make_client, start_client
from coordinator.kernel.zk_tls import CA, ENABLE
from ordered import OrderedConsumer, OrderedProducer
from ordered.devcluster import secure as devsecure

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

ROOT = Path(__file__).resolve().parents[2]


def _zk_port(secure: Secure) -> int:
    return int(secure.zk_hosts.rsplit(":", 1)[1])


def _zk_pid(secure: Secure) -> int:
    return next(p.pid for p in secure.state.processes if p.role == "zookeeper")


def _listening_ports(pid: int) -> set[int]:
    """The TCP ports process ``pid`` listens on (from /proc: its sockets' inodes)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[3] == "0A" and fields[9] in inodes:  # 0A: LISTEN
                ports.add(int(fields[1].rsplit(":", 1)[1], 16))
    return ports


def _plain_reply(port: int, payload: bytes) -> bytes:
    """What the server sends back, in clear, to ``payload`` sent in clear."""
    with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
        sock.sendall(payload)
        chunks = []
        try:
            while chunk := sock.recv(4096):
                chunks.append(chunk)
        except (TimeoutError, ConnectionResetError):
            pass
    return b"".join(chunks)


def _connect_request() -> bytes:
    """A ZooKeeper ConnectRequest (protocol 0, no session), as a plain client sends it."""
    body = struct.pack(">iqiq", 0, 0, 10_000, 0) + struct.pack(">i", 16) + bytes(16)
    return struct.pack(">i", len(body)) + body


def test_zookeeper_serves_tls_only(secure: Secure) -> None:
    port = _zk_port(secure)
    cfg = (Path(secure.state.directory) / "zookeeper" / "zoo.cfg").read_text().splitlines()
    assert f"secureClientPort={port}" in cfg
    assert not any(line.startswith("clientPort") for line in cfg)
    assert "admin.enableServer=false" in cfg
    # The ZooKeeper process listens on the secure port and on nothing else.
    assert _listening_ports(_zk_pid(secure)) == {port}
    # Requests in clear get no ZooKeeper answer: not a session, not a 4-letter word.
    assert _plain_reply(port, _connect_request()) == b""
    assert b"Zookeeper version" not in _plain_reply(port, b"srvr")
    # Over TLS, trusting the cluster's CA, the same word is answered.
    ctx = ssl.create_default_context(cafile=secure.zk_tls.ca_location)
    with (
        socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
        ctx.wrap_socket(raw, server_hostname="127.0.0.1") as tls,
    ):
        tls.sendall(b"srvr")
        assert b"Zookeeper version" in tls.recv(4096)
        assert tls.version() in ("TLSv1.2", "TLSv1.3")


def test_a_client_without_the_tls_settings_fails_clearly(secure: Secure, secure_root: str) -> None:
    config = secure.producer_config(secure_root)
    for key in (ENABLE, CA):
        del config[key]
    started = time.monotonic()
    with pytest.raises(StoreUnavailableError) as refused:
        OrderedProducer(config)
    assert time.monotonic() - started < 30  # its connect timeout (10 s), not a hang
    assert "speaks TLS and drops plain clients" in str(refused.value)
    assert ENABLE in str(refused.value)
    # A client that does not trust the cluster's CA is refused by its own handshake.
    untrusting = make_client(secure.zk_hosts, tls=type(secure.zk_tls).of(True))
    with pytest.raises(StoreUnavailableError, match="TLS handshake failed"):
        start_client(untrusting, 3.0)
    # The CLI, with a command config that lacks them: exit 1, the same reason.
    props = Path(secure.state.directory) / "plain.properties"
    kept = [
        line
        for line in secure.properties("reader").read_text().splitlines()
        if not line.startswith("ordered.zookeeper.ssl.")
    ]
    props.write_text("\n".join(kept) + "\n")
    props.chmod(0o600)
    cli = run_cli(
        "list", "--root", secure_root, "--command-config", str(props),
        "--connect-timeout", "3", timeout=60,
    )  # fmt: skip
    assert cli.returncode == 1
    assert "speaks TLS and drops plain clients" in cli.stderr and "Traceback" not in cli.stderr


def test_a_missing_ca_file_is_refused_at_the_door(secure: Secure, secure_root: str) -> None:
    for client in (OrderedProducer, OrderedConsumer):
        config = secure.producer_config(secure_root, **{CA: "/nonexistent/ca.pem"})
        if client is OrderedConsumer:
            config["group.id"] = unique("g")
        started = time.monotonic()
        with pytest.raises(ConfigError, match=f"{CA}: no such file"):
            client(config)
        assert time.monotonic() - started < 2  # checked before any connection


def test_producer_and_consumer_over_tls(secure: Secure, secure_root: str) -> None:
    topic = secure.topic(2)
    Controller(secure.store("coordinator", secure_root), secure.admin("coordinator")).adopt(topic)
    # The producer's configuration is the properties file the cluster wrote: TLS included.
    config = {**client_config(secure.properties("producer")), "ordered.zookeeper.root": secure_root}
    assert config[ENABLE] == "true" and Path(config[CA]) == devsecure.ca_path(
        Path(secure.state.directory)
    )
    producer = OrderedProducer(config)
    try:
        assert producer.zookeeper.use_ssl and producer.zookeeper.check_hostname
        for i in range(20):
            producer.produce(topic, f"v{i}".encode(), f"k{i % 5}".encode())
        assert producer.flush(30) == 0
    finally:
        producer.close()
    consumer: Any = OrderedConsumer(
        {
            **client_config(secure.properties("consumer")),
            "ordered.zookeeper.root": secure_root,
            "group.id": unique("g"),
            "auto.offset.reset": "earliest",
        }
    )
    got: list[bytes] = []
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while len(got) < 20 and time.monotonic() < deadline:
            msg = consumer.poll(0.5)
            if msg is not None and msg.error() is None:
                got.append(msg.value())
    finally:
        consumer.close()
    assert sorted(got) == sorted(f"v{i}".encode() for i in range(20))


def _client_certificate(secure: Secure, tmp: Path, signed: bool) -> tuple[str, str]:
    """A PEM client key and certificate: signed by the cluster's CA, or self-signed."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl makes the client key here (keytool cannot export one)")
    key, cert = tmp / "client.key", tmp / "client.pem"
    subject = ["-subj", "/CN=ordered-test-client", "-nodes", "-keyout", str(key)]
    new_key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1"]
    if not signed:
        subprocess.run(
            ["openssl", "req", "-x509", *new_key, *subject, "-out", str(cert), "-days", "2"],
            check=True, capture_output=True,
        )  # fmt: skip
        return str(cert), str(key)
    request = subprocess.run(
        ["openssl", "req", "-new", *new_key, *subject], check=True, capture_output=True
    ).stdout
    tls_dir = devsecure.ca_path(Path(secure.state.directory)).parent
    password = (tls_dir / "password").read_text().strip()
    keytool = Path(os.path.realpath(shutil.which("java") or "java")).parent / "keytool"
    signed_pem = subprocess.run(
        [str(keytool), "-gencert", "-alias", "ca", "-keystore", str(tls_dir / "ca.p12"),
         "-storetype", "PKCS12", "-storepass", password, "-rfc", "-validity", "2",
         "-ext", "eku=clientAuth"],
        input=request, check=True, capture_output=True,
    ).stdout  # fmt: skip
    cert.write_bytes(signed_pem)
    return str(cert), str(key)


def test_a_client_certificate(secure: Secure, secure_root: str, tmp_path: Path) -> None:
    """The server asks for a certificate (``ssl.clientAuth=want``): one signed by the
    cluster's CA is taken, a self-signed one is refused in the handshake."""
    for signed in (True, False):
        where = tmp_path / str(signed)
        where.mkdir()
        cert, key = _client_certificate(secure, where, signed)
        config = secure.producer_config(
            secure_root, **{"ordered.zookeeper.ssl.certificate.location": cert,
                            "ordered.zookeeper.ssl.key.location": key},
        )  # fmt: skip
        if signed:
            producer = OrderedProducer(config)
            try:
                assert producer.zookeeper.certfile == cert and producer.zookeeper.keyfile == key
                assert producer.zookeeper.exists("/") is not None
            finally:
                producer.close()
        else:
            with pytest.raises(StoreUnavailableError, match="TLS handshake failed"):
                OrderedProducer(config)


def test_cli_and_daemon_over_tls(secure: Secure, secure_root: str) -> None:
    topic = secure.topic(2)

    def cli(user: str, *args: str) -> Any:
        config = str(secure.properties(user))
        return run_cli(*args, "--root", secure_root, "--command-config", config, timeout=90)

    adopted = cli("coordinator", "adopt", topic, "--json")
    assert adopted.returncode == 0, adopted.stderr
    daemon = subprocess.Popen(
        [sys.executable, "-m", "ordered.cli", "coordinator", "--root", secure_root,
         "--command-config", str(secure.properties("coordinator"))],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    try:
        # The daemon stands in the election in ZooKeeper: it has a session, over TLS.
        admin = secure.client("admin")
        election = f"{secure_root}/coordinator/election"
        wait_until(
            lambda: bool(admin.exists(election) and admin.get_children(election)),
            timeout=60,
            what="the daemon joining the election over TLS",
        )
        reader = secure.store("reader", secure_root)
        expand = cli("coordinator", "expand", topic, "--to", "3")
        assert expand.returncode == 0, expand.stderr
        described = cli("reader", "describe", topic, "--json")
        assert described.returncode == 0, described.stderr
    finally:
        daemon.send_signal(signal.SIGTERM)
        _out, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, err
    assert "Traceback" not in err
    assert reader.get_topic(topic).active == 3  # type: ignore[union-attr]


def _jvm_props(secure: Secure, root: str, tls: bool) -> dict[str, str]:
    from jvm_helpers import plugin_properties

    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    password = secure.password("producer")
    return plugin_properties(
        secure.bootstrap,
        secure.zk_hosts,
        root,
        **{
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.jaas.config": f'{scram} required username="producer" password="{password}";',
            "ordered.zookeeper.auth": secure.zk_auth("producer"),
            "ordered.zookeeper.session.timeout.ms": "4000",
            **(secure.zk_tls_settings() if tls else {}),
        },
    )


def test_the_jvm_partitioner_over_tls(secure: Secure, secure_root: str, tmp_path: Path) -> None:
    from jvm_helpers import JavaProducer

    topic = secure.topic(2)
    controller = Controller(secure.store("coordinator", secure_root), secure.admin("coordinator"))
    controller.adopt(topic)
    java = JavaProducer(
        "jvm-tls", topic, tmp_path / "jvm.jsonl", _jvm_props(secure, secure_root, True)
    )
    try:
        java.ready()
        # The barrier waits for the JVM producer's ack: written to ZooKeeper over TLS.
        result = controller.expand(topic, 3, timeout=60)
        assert len(result.producers) == 1 and not result.expired, result  # the JVM one
        counts = java.finish()
    finally:
        java.kill()
    assert counts["acked"] > 0 and counts["nacked"] == 0 and counts["refused"] == 0, counts
    # Without the TLS settings the JVM producer's configure() fails, saying why.
    plain = JavaProducer(
        "jvm-plain", topic, tmp_path / "plain.jsonl", _jvm_props(secure, secure_root, False)
    )
    try:
        plain.proc.wait(90)
        assert plain.proc.returncode != 0
        assert "takes connections but gave no session" in plain.log()
        assert "drops plain clients; then set ordered.zookeeper.ssl.client.enable" in plain.log()
    finally:
        plain.kill()
