"""The secure variant of the dev cluster: SASL/SCRAM Kafka with ACLs, digest ZooKeeper.

``ordered cluster up --secure`` makes one user per role, the same name and password in
Kafka (SCRAM-SHA-512, added when the storage is formatted) and in ZooKeeper (digest):

- ``admin``: Kafka super user (``super.users``), ZooKeeper super user (``superDigest``);
  the operator's identity, which ``client.properties`` holds.
- ``coordinator``, ``producer``, ``consumer``, ``reader``: the roles of ``ordered acl
  apply``; each gets ``<dir>/secure/<user>.properties``.

Kafka runs ``StandardAuthorizer`` with ``allow.everyone.if.no.acl.found=false``: a user
other than ``admin`` can do only what a Kafka ACL grants it. The brokers talk to each
other with SCRAM-SHA-512 as ``admin``, and to the controllers with PLAIN (KRaft cannot
check SCRAM on the controller listener: the credentials live in the metadata log the
controllers serve). ZooKeeper refuses every request of an unauthenticated session
(``enforce.auth.enabled``, 3.9); it takes digest and SASL (DIGEST-MD5, a JAAS
``Server`` section with every user).

ZooKeeper serves TLS only (``secureClientPort``, Netty): no plain client port is
open, so no digest travels in clear. The cluster makes its own CA with the JDK's
``keytool`` (``<dir>/secure/tls``): ``ca.pem`` (what clients trust) and the server's
PKCS12 key store, whose certificate names ``127.0.0.1`` and ``localhost``. The server
asks for a client certificate but needs none (``ssl.clientAuth=want``): one it is shown
must be signed by the cluster's CA; clients authenticate with digest or SASL, inside TLS.

The property files are Java client properties, as Kafka's tools read them with
``--command-config``, plus ``ordered.zookeeper.connect``, ``ordered.zookeeper.auth``
and the ``ordered.zookeeper.ssl.*`` settings (TLS, the CA). They and
``credentials.json`` are readable by their owner only.
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import secrets
import subprocess
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

from coordinator.kernel.errors import ClusterError
from coordinator.kernel.zk_tls import CA as ZK_TLS_CA
from coordinator.kernel.zk_tls import ENABLE as ZK_TLS_ENABLE

__all__ = [
    "ADMIN",
    "ROLES",
    "Credentials",
    "TlsFiles",
    "ca_path",
    "client_properties",
    "format_scram_args",
    "kafka_security_lines",
    "load_credentials",
    "make_credentials",
    "make_tls",
    "properties_path",
    "write_properties",
    "zookeeper_jvm_flags",
    "zookeeper_lines",
]

ADMIN: Final = "admin"
"""The super user of Kafka and ZooKeeper in a secure dev cluster."""

ROLES: Final = ("coordinator", "producer", "consumer", "reader")
"""The role users of a secure dev cluster, besides :data:`ADMIN`."""

_SCRAM: Final = "SCRAM-SHA-512"
_CREDENTIALS: Final = "credentials.json"


@dataclass(frozen=True)
class Credentials:
    """The users of a secure dev cluster: name -> password (Kafka and ZooKeeper alike)."""

    passwords: dict[str, str]

    def password(self, user: str) -> str:
        """Return ``user``'s password."""
        return self.passwords[user]


def _secure_dir(directory: Path) -> Path:
    return directory / "secure"


def _write_private(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as out:
        out.write(text)


def load_credentials(directory: Path) -> Credentials | None:
    """Return the credentials stored in ``directory``, or None when it has none."""
    path = _secure_dir(directory) / _CREDENTIALS
    if not path.is_file():
        return None
    return Credentials(dict(json.loads(path.read_text())))


def make_credentials(directory: Path) -> Credentials:
    """Return the cluster's credentials, made (random passwords) on first use.

    A restarted cluster keeps them: Kafka's SCRAM users were added when its storage was
    formatted, and ZooKeeper's ACLs name the digests of these passwords.
    """
    existing = load_credentials(directory)
    if existing is not None:
        return existing
    creds = Credentials({user: secrets.token_urlsafe(18) for user in (ADMIN, *ROLES)})
    _write_private(
        _secure_dir(directory) / _CREDENTIALS, json.dumps(creds.passwords, sort_keys=True)
    )
    return creds


def _digest(user: str, password: str) -> str:
    # ZooKeeper's DigestAuthenticationProvider: base64(sha1("user:password")).
    raw = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return base64.b64encode(raw).decode()


def _jaas(module: str, user: str, password: str, extra: str = "") -> str:
    return f'{module} required username="{user}" password="{password}"{extra};'


def kafka_security_lines(creds: Credentials, broker_port: int, controller_port: int) -> list[str]:
    """Return the ``server.properties`` lines of a secure node (listeners included)."""
    admin = creds.password(ADMIN)
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    plain = "org.apache.kafka.common.security.plain.PlainLoginModule"
    return [
        f"listeners=SASL_PLAINTEXT://127.0.0.1:{broker_port},CONTROLLER://127.0.0.1:{controller_port}",
        f"advertised.listeners=SASL_PLAINTEXT://127.0.0.1:{broker_port}",
        "listener.security.protocol.map=SASL_PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:SASL_PLAINTEXT",
        "inter.broker.listener.name=SASL_PLAINTEXT",
        f"sasl.enabled.mechanisms={_SCRAM}",
        f"sasl.mechanism.inter.broker.protocol={_SCRAM}",
        "sasl.mechanism.controller.protocol=PLAIN",
        "listener.name.controller.sasl.enabled.mechanisms=PLAIN",
        "listener.name.controller.plain.sasl.jaas.config="
        + _jaas(plain, ADMIN, admin, f' user_{ADMIN}="{admin}"'),
        "listener.name.sasl_plaintext.scram-sha-512.sasl.jaas.config=" + _jaas(scram, ADMIN, admin),
        "authorizer.class.name=org.apache.kafka.metadata.authorizer.StandardAuthorizer",
        f"super.users=User:{ADMIN}",
        "allow.everyone.if.no.acl.found=false",
    ]


def format_scram_args(creds: Credentials) -> list[str]:
    """Return ``kafka-storage format`` arguments that add every user's SCRAM credential."""
    out: list[str] = []
    for user, password in sorted(creds.passwords.items()):
        out += ["--add-scram", f"{_SCRAM}=[name={user},password={password}]"]
    return out


def zookeeper_lines(tls: TlsFiles, port: int, host: str) -> list[str]:
    """Return the ``zoo.cfg`` lines of a secure ZooKeeper: TLS only on ``port`` (no plain
    ``clientPort``), and authentication required, digest or SASL (3.9)."""
    return [
        f"secureClientPort={port}",
        f"secureClientPortAddress={host}",
        "serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
        f"ssl.keyStore.location={tls.keystore}",
        f"ssl.keyStore.password={tls.password}",
        "ssl.keyStore.type=PKCS12",
        f"ssl.trustStore.location={tls.ca}",
        "ssl.trustStore.type=PEM",
        "ssl.clientAuth=want",
        "authProvider.1=org.apache.zookeeper.server.auth.DigestAuthenticationProvider",
        "authProvider.2=org.apache.zookeeper.server.auth.SASLAuthenticationProvider",
        "enforce.auth.enabled=true",
        "enforce.auth.schemes=digest,sasl",
    ]


@dataclass(frozen=True)
class TlsFiles:
    """ZooKeeper's TLS files in a secure dev cluster.

    Attributes:
        ca: The PEM certificate of the cluster's CA (what clients trust).
        keystore: The server's PKCS12 key store (its key and certificate, CA-signed).
        password: The key store's password.
    """

    ca: Path
    keystore: Path
    password: str = field(repr=False)


def _keytool(keytool: Path, *args: str, stdin: bytes | None = None) -> bytes:
    done = subprocess.run(
        [str(keytool), *args], input=stdin, capture_output=True, timeout=120, check=False
    )
    if done.returncode != 0:
        out = (done.stdout + done.stderr).decode(errors="replace")[-800:]
        raise ClusterError(f"keytool {args[0]} failed (making ZooKeeper's TLS files):\n{out}")
    return done.stdout


def ca_path(directory: Path) -> Path:
    """Where the PEM CA certificate of the secure cluster in ``directory`` is."""
    return _secure_dir(directory) / "tls" / "ca.pem"


def make_tls(directory: Path, java: str, host: str) -> TlsFiles:
    """Return ZooKeeper's TLS files, made on first use with the JDK's ``keytool``.

    A CA (its key stays in ``ca.p12``), and a server key whose certificate the CA signs
    for ``host`` and ``localhost`` (valid ten years). A restarted cluster keeps them, so
    the ``ca.pem`` its clients were given stays good.

    Raises:
        ClusterError: ``keytool`` is missing next to ``java`` or failed.
    """
    ca_pem = ca_path(directory)
    tls_dir = ca_pem.parent
    keystore, pw_file = tls_dir / "server.p12", tls_dir / "password"
    if ca_pem.is_file() and keystore.is_file() and pw_file.is_file():
        return TlsFiles(ca_pem, keystore, pw_file.read_text().strip())
    keytool = Path(java).resolve().parent / "keytool"
    if not keytool.is_file():
        raise ClusterError(f"no keytool next to {java}: it makes ZooKeeper's TLS certificates")
    tls_dir.mkdir(parents=True, exist_ok=True)
    for old in tls_dir.iterdir():
        old.unlink()
    password = secrets.token_urlsafe(18)
    _write_private(pw_file, password)
    ca_store = str(tls_dir / "ca.p12")
    common = ["-storetype", "PKCS12", "-storepass", password, "-keypass", password]
    _keytool(keytool, "-genkeypair", "-alias", "ca", "-keyalg", "EC", "-groupname", "secp256r1",
             "-dname", "CN=ordered dev cluster CA", "-ext", "bc:c", "-validity", "3650",
             "-keystore", ca_store, *common)  # fmt: skip
    ca_pem.write_bytes(
        _keytool(keytool, "-exportcert", "-rfc", "-alias", "ca", "-keystore", ca_store, *common)
    )
    server = ["-alias", "zookeeper", "-keystore", str(keystore), *common]
    _keytool(keytool, "-genkeypair", "-keyalg", "EC", "-groupname", "secp256r1",
             "-dname", f"CN={host}", "-validity", "3650", *server)  # fmt: skip
    request = _keytool(keytool, "-certreq", *server)
    signed = _keytool(keytool, "-gencert", "-alias", "ca", "-keystore", ca_store, *common,
                      "-rfc", "-validity", "3650", "-ext", f"san=ip:{host},dns:localhost",
                      "-ext", "eku=serverAuth", stdin=request)  # fmt: skip
    _keytool(keytool, "-importcert", "-noprompt", "-alias", "ca", "-file", str(ca_pem),
             "-keystore", str(keystore), *common)  # fmt: skip
    _keytool(keytool, "-importcert", "-noprompt", *server, stdin=signed)
    return TlsFiles(ca_pem, keystore, password)


def zookeeper_jvm_flags(creds: Credentials, directory: Path) -> list[str]:
    """Return the JVM flags of a secure ZooKeeper (writes its JAAS file in ``directory``).

    :data:`ADMIN` is the super user of both schemes; every user may also log in with
    SASL DIGEST-MD5 (identity ``sasl:USER``) with the same password.
    """
    users = " ".join(f'user_{u}="{p}"' for u, p in sorted(creds.passwords.items()))
    jaas = directory / "zookeeper-jaas.conf"
    _write_private(
        jaas,
        f"Server {{\n  org.apache.zookeeper.server.auth.DigestLoginModule required {users};\n}};\n",
    )
    digest = _digest(ADMIN, creds.password(ADMIN))
    return [
        f"-Dzookeeper.DigestAuthenticationProvider.superDigest={ADMIN}:{digest}",
        f"-Dzookeeper.superUser={ADMIN}",
        f"-Djava.security.auth.login.config={jaas}",
    ]


def client_properties(
    user: str,
    password: str,
    bootstrap: str,
    zookeeper: str,
    mechanism: str = _SCRAM,
    ca: Path | None = None,
) -> str:
    """Return Java client properties for ``user`` (``--command-config`` reads them);
    with ``ca``, ZooKeeper is reached over TLS trusting that PEM CA."""
    scram = "org.apache.kafka.common.security.scram.ScramLoginModule"
    return "\n".join(
        [
            f"# ordered dev cluster: user {user}",
            f"bootstrap.servers={bootstrap}",
            "security.protocol=SASL_PLAINTEXT",
            f"sasl.mechanism={mechanism}",
            "sasl.jaas.config=" + _jaas(scram, user, password),
            f"ordered.zookeeper.connect={zookeeper}",
            f"ordered.zookeeper.auth=digest:{user}:{password}",
            *([f"{ZK_TLS_ENABLE}=true", f"{ZK_TLS_CA}={ca}"] if ca is not None else []),
            "",
        ]
    )


def properties_path(directory: Path, user: str) -> Path:
    """Return where the property file of ``user`` lives (``client.properties`` for admin)."""
    if user == ADMIN:
        return directory / "client.properties"
    return _secure_dir(directory) / f"{user}.properties"


def write_properties(
    directory: Path, creds: Credentials, bootstrap: str, zookeeper: str, ca: Path | None = None
) -> dict[str, str]:
    """Write every user's property file (with ``ca``: ZooKeeper over TLS); return
    user -> path."""
    out: dict[str, str] = {}
    for user, password in sorted(creds.passwords.items()):
        path = properties_path(directory, user)
        text = client_properties(user, password, bootstrap, zookeeper, ca=ca)
        _write_private(path, text)
        out[user] = str(path)
    return out
