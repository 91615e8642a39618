"""``--command-config`` and ``--zookeeper-auth``: how a command authenticates.

Kafka: ``--command-config FILE`` takes Java client properties, as Kafka's own tools do
(``security.protocol``, ``sasl.mechanism``, ``sasl.jaas.config``, ``ssl.*``;
translated by :func:`coordinator.kernel.kafka_security.translate`). The file may also hold
``bootstrap.servers``, ``ordered.zookeeper.connect``, ``ordered.zookeeper.auth`` and
the ``ordered.zookeeper.ssl.*`` settings (ZooKeeper over TLS, checked as the clients
check them: :mod:`coordinator.kernel.zk_tls`).

ZooKeeper credentials (``SCHEME:USER:PASSWORD``), first found wins:
``--zookeeper-auth``, ``$ORDERED_ZOOKEEPER_AUTH``, ``ordered.zookeeper.auth`` in the
command config. Without ``--command-config``, a secure dev cluster's
``client.properties`` is used when the dev cluster is the one talked to.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kazoo.exceptions import KazooException, NoAuthError

from coordinator.kernel.errors import ConfigError, StoreAuthError, StoreUnavailableError
from coordinator.kernel.kafka_security import load_properties, translate
from coordinator.kernel.store import LayoutStore, TopicRecord
from coordinator.kernel.zk_auth import NO_AUTH, ZkAuth
from coordinator.kernel.zk_tls import NO_TLS, TLS_KEYS, ZkTls
from coordinator.security.acl_apply import tree_is_open
from ordered import devcluster
from ordered.settings import Role, parse_settings

__all__ = [
    "ZOOKEEPER_AUTH_ENV",
    "Security",
    "SecurityNotes",
    "resolve_security",
    "security_arguments",
    "security_notes",
]

ZOOKEEPER_AUTH_ENV = "ORDERED_ZOOKEEPER_AUTH"


@dataclass(frozen=True)
class Security:
    """How one command reaches the servers, beyond their addresses.

    Attributes:
        kafka: librdkafka security settings (and ``bootstrap.servers`` if the file had it).
        zookeeper_auth: The ZooKeeper credentials (or :data:`NO_AUTH`).
        zookeeper: ``ordered.zookeeper.connect`` from the command config, if any.
        zookeeper_tls: ZooKeeper over TLS (``ordered.zookeeper.ssl.*`` in the command
            config), or :data:`~coordinator.kernel.zk_tls.NO_TLS`.
    """

    kafka: dict[str, str] = field(default_factory=dict)
    zookeeper_auth: ZkAuth = NO_AUTH
    zookeeper: str | None = None
    zookeeper_tls: ZkTls = NO_TLS


def security_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--command-config`` and ``--zookeeper-auth``."""
    p.add_argument(
        "--command-config",
        type=Path,
        default=None,
        metavar="FILE",
        help="Java client properties for Kafka (security.protocol, sasl.*, ssl.*), as "
        "Kafka's tools take them; may also set ordered.zookeeper.connect/.auth/.ssl.*",
    )
    p.add_argument(
        "--zookeeper-auth",
        default=None,
        metavar="SCHEME:USER:PASSWORD",
        help=f"ZooKeeper credentials, digest or sasl (default: ${ZOOKEEPER_AUTH_ENV}, else "
        "ordered.zookeeper.auth in --command-config); prefer the variable or the file",
    )


def _dev_cluster_config() -> Path | None:
    state = devcluster.load_state(devcluster.default_dir())
    if state is None or not state.secure or not state.client_properties:
        return None
    return Path(state.client_properties)


def resolve_security(args: argparse.Namespace, uses_dev_cluster: bool) -> Security:
    """Return the security settings ``args`` (and the environment) ask for.

    Args:
        args: The parsed arguments (with :func:`security_arguments`' flags).
        uses_dev_cluster: Whether the servers came from the dev cluster's state.

    Raises:
        ConfigError: The file cannot be read, or holds a malformed setting.
    """
    path: Path | None = getattr(args, "command_config", None)
    if path is None and uses_dev_cluster:
        path = _dev_cluster_config()
    kafka: dict[str, str] = {}
    ordered: dict[str, str] = {}
    if path is not None:
        kafka, ordered = translate(load_properties(path))
    text = getattr(args, "zookeeper_auth", None) or os.environ.get(ZOOKEEPER_AUTH_ENV)
    if text:
        source = "--zookeeper-auth" if args.zookeeper_auth else f"${ZOOKEEPER_AUTH_ENV}"
        auth = ZkAuth.parse(text, source)
    else:
        auth = ZkAuth.parse(
            ordered.get("ordered.zookeeper.auth"), f"{path}: ordered.zookeeper.auth"
        )
    return Security(kafka, auth, ordered.get("ordered.zookeeper.connect"), _tls(ordered, path))


def _tls(ordered: dict[str, str], path: Path | None) -> ZkTls:
    """The ``ordered.zookeeper.ssl.*`` settings of the command config, parsed by the table."""
    given = {k: v for k, v in ordered.items() if k in TLS_KEYS}
    try:
        return ZkTls.from_parsed(parse_settings(given, Role.ALL, require=False))
    except ConfigError as exc:
        raise ConfigError(f"{path}: {exc}") from None


@dataclass(frozen=True)
class SecurityNotes:
    """What ``describe`` says about the tree's security.

    Attributes:
        root: The store root.
        open: Whether anyone may write the tree (no ``ordered acl apply`` yet).
        forged_acks: Producer id -> the identities named by a forged ack of the
            pending epoch (ignored by the barrier).
        pending: The pending epoch checked, if any.
    """

    root: str
    open: bool
    forged_acks: dict[str, tuple[str, ...]] = field(default_factory=dict)
    pending: int | None = None

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form."""
        return {
            "root": self.root,
            "open": self.open,
            "pending": self.pending,
            "forged_acks": {k: list(v) for k, v in sorted(self.forged_acks.items())},
        }

    def text(self) -> str:
        """Lines to append to ``describe``'s text (empty when all is well)."""
        lines = []
        if self.open:
            lines.append(
                f"WARNING: the tree under {self.root} is open: anyone who reaches ZooKeeper "
                "can change layouts, acks and epochs (run `ordered acl apply`)"
            )
        for pid, writers in sorted(self.forged_acks.items()):
            lines.append(
                f"WARNING: forged ack of epoch {self.pending} for producer {pid}, ignored "
                f"(written by {', '.join(writers) or 'an unknown identity'})"
            )
        return "".join("\n" + line for line in lines)


def security_notes(store: LayoutStore, record: TopicRecord | None) -> SecurityNotes:
    """Check whether the tree is open and the pending epoch has forged acks.

    Raises:
        StoreError: ZooKeeper failed.
    """
    try:
        is_open = store.client.retry(tree_is_open, store.client, store.root)
    except NoAuthError as exc:
        raise StoreAuthError(f"cannot check the tree's ACLs: {exc}") from None
    except KazooException as exc:
        raise StoreUnavailableError(f"cannot check the tree's ACLs: {exc!r}") from None
    if record is None or record.pending is None:
        return SecurityNotes(store.root, is_open)
    checked = store.verified_acks(record.topic, record.pending)
    return SecurityNotes(store.root, is_open, checked.forged, record.pending)
