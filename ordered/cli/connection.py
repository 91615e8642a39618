"""Where an ``ordered`` admin command finds its servers, and its connections to them.

``--zookeeper`` (else ``$ORDERED_ZOOKEEPER_CONNECT``, else the dev cluster of ``ordered
cluster up``) and ``--bootstrap-servers`` (else ``$ORDERED_BOOTSTRAP_SERVERS``, else the
dev cluster). Both fail fast when the server is down: ZooKeeper within
``--connect-timeout`` seconds, Kafka within ``--kafka-timeout``. Shared by the admin,
describe, listing, trim, compact and autoscale commands.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import DEFAULT_ROOT, LayoutStore, TopicRecord
from coordinator.kernel.store.paths import check_root
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster
from ordered.cli.options import (
    CommandLineError,
    kafka_seconds,
    seconds,
    session_seconds,
    zookeeper_connect,
)
from ordered.cli.security import Security, resolve_security, security_arguments

__all__ = [
    "BOOTSTRAP_ENV",
    "ZOOKEEPER_ENV",
    "Connections",
    "common_arguments",
    "connect",
    "topic_text",
]

ZOOKEEPER_ENV = "ORDERED_ZOOKEEPER_CONNECT"
BOOTSTRAP_ENV = "ORDERED_BOOTSTRAP_SERVERS"


_CLOSE_S: Final = 1.0


def common_arguments(p: argparse.ArgumentParser, timeout: float | None) -> None:
    """Add the server, output and timeout flags every admin command takes."""
    p.add_argument(
        "--zookeeper",
        type=zookeeper_connect,
        default=None,
        metavar="HOST:PORT[/CHROOT]",
        help=f"ZooKeeper connect string (default: ${ZOOKEEPER_ENV}, else the dev cluster)",
    )
    p.add_argument(
        "--bootstrap-servers",
        default=None,
        metavar="HOST:PORT[,...]",
        help=f"Kafka bootstrap.servers (default: ${BOOTSTRAP_ENV}, else the dev cluster)",
    )
    security_arguments(p)
    p.add_argument("--root", default=DEFAULT_ROOT, help="the layout store's root znode")
    p.add_argument("--json", action="store_true", help="print JSON (stderr: JSON lines)")
    p.add_argument(
        "--connect-timeout", type=seconds, default=5.0, help="seconds to reach ZooKeeper"
    )
    p.add_argument(
        "--kafka-timeout", type=kafka_seconds, default=10.0, help="seconds per Kafka request"
    )
    p.add_argument(
        "--session-timeout",
        type=session_seconds,
        default=6.0,
        help="ZooKeeper session timeout in seconds (how soon a killed run's lock frees)",
    )
    if timeout is not None:
        p.add_argument(
            "--timeout",
            type=seconds,
            default=timeout,
            help="seconds to wait for the producer barrier",
        )


@dataclass
class Connections:
    """The servers one command talks to.

    Attributes:
        store: The layout store over a started kazoo client.
        admin: Kafka admin helpers.
    """

    store: LayoutStore
    admin: KafkaAdmin


def _dev_cluster_setting(attribute: str) -> str | None:
    state = devcluster.load_state(devcluster.default_dir())
    return None if state is None else str(getattr(state, attribute))


def _resolve(args: argparse.Namespace) -> tuple[str, str, Security]:
    zookeeper = args.zookeeper or os.environ.get(ZOOKEEPER_ENV)
    bootstrap = args.bootstrap_servers or os.environ.get(BOOTSTRAP_ENV)
    security = resolve_security(args, uses_dev_cluster=False)
    zookeeper = zookeeper or security.zookeeper
    bootstrap = bootstrap or security.kafka.get("bootstrap.servers")
    if (not zookeeper or not bootstrap) and args.command_config is None:
        security = resolve_security(args, uses_dev_cluster=True)
    if not zookeeper:
        zookeeper = _dev_cluster_setting("zookeeper_connect")
    if not bootstrap:
        bootstrap = _dev_cluster_setting("bootstrap_servers")
    if not zookeeper:
        raise CommandLineError(
            f"no ZooKeeper to talk to: pass --zookeeper, set ${ZOOKEEPER_ENV}, or start "
            "the dev cluster (ordered cluster up)"
        )
    if not bootstrap:
        raise CommandLineError(
            f"no Kafka to talk to: pass --bootstrap-servers, set ${BOOTSTRAP_ENV}, or start "
            "the dev cluster (ordered cluster up)"
        )
    try:
        zookeeper_connect(zookeeper)
    except argparse.ArgumentTypeError as exc:
        raise CommandLineError(f"${ZOOKEEPER_ENV}: {exc}") from None
    return zookeeper, bootstrap, security


def _close_quietly(client: Any) -> None:
    """Close ``client`` within about a second: a ZooKeeper that is away must not hold
    the process (the session, its ephemeral nodes and locks end on the server)."""
    closer = threading.Thread(target=close_client, args=(client,), daemon=True)
    closer.start()
    closer.join(_CLOSE_S)


@contextlib.contextmanager
def connect(args: argparse.Namespace, daemon: bool = False) -> Iterator[Connections]:
    """Connect to ZooKeeper and Kafka as ``args`` say; close both on exit.

    Raises:
        CommandLineError: No server is configured, or the connect string is malformed.
        StoreError: ZooKeeper cannot be reached within ``--connect-timeout``.
    """
    try:
        # Before any client: the ACL policy of the root is read as the client starts.
        check_root(args.root)
    except ValueError as exc:
        raise CommandLineError(f"--root: {exc}") from None
    zookeeper, bootstrap, security = _resolve(args)
    # kazoo logs each refused connection; the failure reaches the user as one error.
    logging.getLogger("kazoo").addHandler(logging.NullHandler())
    # The daemon rides out outages (its store calls retry for 30 s, its connection for
    # ever); a command's calls give up after the connect timeout.
    client = make_client(
        zookeeper,
        session_timeout_s=args.session_timeout,
        command_deadline_s=30.0 if daemon else args.connect_timeout,
        auth=security.zookeeper_auth,
        acl_root=args.root,
        tls=security.zookeeper_tls,
    )
    # Its error names the connect string and, when TLS tells, why (a plain client at a
    # TLS-only port, a refused handshake).
    start_client(client, args.connect_timeout)
    try:
        try:
            store = LayoutStore(client, args.root)
        except ValueError as exc:
            raise CommandLineError(f"--root: {exc}") from None
        kafka = {k: v for k, v in security.kafka.items() if k != "bootstrap.servers"}
        admin = KafkaAdmin(bootstrap, timeout=args.kafka_timeout, config=kafka)
        try:
            yield Connections(store, admin)
        finally:
            admin.close()
    finally:
        _close_quietly(client)


def topic_text(record: TopicRecord) -> str:
    """One line with every field of a topic record."""
    pending = "none" if record.pending is None else str(record.pending)
    return (
        f"topic {record.topic}: initial {record.initial}, active {record.active}, "
        f"epoch {record.epoch}, pending {pending}, physical {record.physical}, "
        f"algorithm {record.algorithm}, ordered {str(record.ordered).lower()}, "
        f"compacted {str(record.compacted).lower()}, topic id {record.topic_id or 'unbound'}"
    )
