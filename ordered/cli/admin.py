"""``ordered adopt|unadopt|expand|shrink|describe TOPIC`` and ``ordered coordinator``.

``describe`` also lists each retired partition: draining or trimmed, its final offset,
and the interested groups that hold it back with their committed offsets.

Where the servers are: ``--zookeeper`` (else ``$ORDERED_ZOOKEEPER_CONNECT``, else the
dev cluster of ``ordered cluster up``) and ``--bootstrap-servers`` (else
``$ORDERED_BOOTSTRAP_SERVERS``, else the dev cluster). Both fail fast when the server is
down: ZooKeeper within ``--connect-timeout`` seconds, Kafka within ``--kafka-timeout``.
Every check runs before anything is written.
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import signal
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from types import FrameType
from typing import Any

from coordinator import devcluster
from coordinator.controller import Controller, Description, TransitionResult
from coordinator.daemon import CoordinatorDaemon
from coordinator.errors import StoreUnavailableError, UsageError
from coordinator.group_status import GroupStatus, group_status
from coordinator.kafka_admin import KafkaAdmin
from coordinator.retention import (
    DEFAULT_SWEEP_INTERVAL_S,
    RetiredStatus,
    SweepSettings,
    retired_status,
)
from coordinator.store import DEFAULT_ROOT, LayoutStore, TopicRecord
from coordinator.zk import close_client, make_client, start_client
from linear_hash import ALGORITHMS, DEFAULT_ALGORITHM
from ordered.cli.options import interest_arguments, interest_settings
from ordered.cli.output import emit, progress
from ordered.cli.security import (
    Security,
    resolve_security,
    security_arguments,
    security_notes,
)

__all__ = ["Connections", "add_parsers", "common_arguments", "connect"]

ZOOKEEPER_ENV = "ORDERED_ZOOKEEPER_CONNECT"
BOOTSTRAP_ENV = "ORDERED_BOOTSTRAP_SERVERS"


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a partition count, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a partition count must be >= 1, got {value}")
    return value


def _seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0:
        raise argparse.ArgumentTypeError(f"seconds must be > 0, got {text}")
    return value


def _seconds_or_zero(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0:
        raise argparse.ArgumentTypeError(f"seconds must be >= 0, got {text}")
    return value


def _common(p: argparse.ArgumentParser, timeout: float | None) -> None:
    p.add_argument(
        "--zookeeper",
        default=None,
        help=f"ZooKeeper connect string (default: ${ZOOKEEPER_ENV}, else the dev cluster)",
    )
    p.add_argument(
        "--bootstrap-servers",
        default=None,
        help=f"Kafka bootstrap.servers (default: ${BOOTSTRAP_ENV}, else the dev cluster)",
    )
    security_arguments(p)
    p.add_argument("--root", default=DEFAULT_ROOT, help=f"store root (default {DEFAULT_ROOT})")
    p.add_argument("--json", action="store_true", help="print JSON")
    p.add_argument(
        "--connect-timeout", type=_seconds, default=5.0, help="seconds to reach ZooKeeper"
    )
    p.add_argument("--kafka-timeout", type=_seconds, default=10.0, help="seconds per Kafka request")
    p.add_argument(
        "--session-timeout",
        type=_seconds,
        default=6.0,
        help="ZooKeeper session timeout in seconds (how soon a killed run's lock frees)",
    )
    if timeout is not None:
        p.add_argument(
            "--timeout",
            type=_seconds,
            default=timeout,
            help=f"seconds to wait for the producer barrier (default {timeout:g})",
        )


def common_arguments(p: argparse.ArgumentParser, timeout: float | None) -> None:
    """Add the server, output and timeout flags every admin command takes."""
    _common(p, timeout)


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``adopt``, ``unadopt``, ``expand``, ``shrink``, ``describe``, ``coordinator``."""
    adopt = sub.add_parser("adopt", help="adopt a topic: its partition count becomes initial")
    adopt.add_argument("topic", metavar="TOPIC")
    adopt.add_argument(
        "--algorithm", choices=sorted(ALGORITHMS), default=DEFAULT_ALGORITHM, help="key hash"
    )
    adopt.add_argument(
        "--unordered",
        action="store_true",
        help="adopt with ordered delivery off (producers route as plain Kafka)",
    )
    adopt.add_argument(
        "--replace",
        action="store_true",
        help="re-adopt: replace an existing layout (of a deleted and re-created topic, or "
        "with other settings) by a fresh adoption; refused while an epoch is pending",
    )
    _common(adopt, None)
    adopt.set_defaults(func=_adopt)

    unadopt = sub.add_parser(
        "unadopt",
        help="remove a topic's layout (producers route it as plain Kafka); refused while "
        "an epoch is pending",
    )
    unadopt.add_argument("topic", metavar="TOPIC")
    _common(unadopt, None)
    unadopt.set_defaults(func=_unadopt)

    for name, text in (
        ("expand", "grow the active partition count, keeping each key's order"),
        ("shrink", "shrink the active partition count (never below initial)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("topic", metavar="TOPIC")
        p.add_argument("--to", type=_positive, required=True, help="the new active count")
        _common(p, 60.0)
        p.set_defaults(func=_transition, kind=name)

    describe = sub.add_parser(
        "describe",
        help="show a topic's layout, epochs and producers, or where a group waits (--group)",
    )
    describe.add_argument("topic", metavar="TOPIC")
    describe.add_argument(
        "--group",
        default=None,
        metavar="G",
        help="show, per partition, what consumer group G waits on at the gates",
    )
    interest_arguments(describe)
    _common(describe, None)
    describe.set_defaults(func=_describe)

    daemon = sub.add_parser(
        "coordinator",
        help="run the coordinator daemon: completes pending epochs, relays group positions",
    )
    _common(daemon, None)
    daemon.add_argument("--scan-interval", type=_seconds, default=1.0, help="seconds between scans")
    daemon.add_argument(
        "--resume-timeout",
        type=_seconds,
        default=10.0,
        help="seconds one resume waits in the barrier before the next scan retries",
    )
    daemon.add_argument(
        "--relay-interval",
        type=_seconds_or_zero,
        default=0.1,
        help="seconds between position relay rounds (0: no relay; default 0.1)",
    )
    daemon.add_argument(
        "--sweep-interval",
        type=_seconds_or_zero,
        default=DEFAULT_SWEEP_INTERVAL_S,
        help="seconds between rounds of the drain monitor and consumed-retention sweep "
        f"(0: off; default {DEFAULT_SWEEP_INTERVAL_S:g})",
    )
    daemon.add_argument(
        "--trim-timeout",
        type=_seconds,
        default=30.0,
        help="seconds one sweep trim waits for every replica (default 30)",
    )
    interest_arguments(daemon)
    daemon.set_defaults(func=_coordinator)


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
        raise UsageError(
            f"no ZooKeeper to talk to: pass --zookeeper, set ${ZOOKEEPER_ENV}, or start "
            "the dev cluster (ordered cluster up)"
        )
    if not bootstrap:
        raise UsageError(
            f"no Kafka to talk to: pass --bootstrap-servers, set ${BOOTSTRAP_ENV}, or start "
            "the dev cluster (ordered cluster up)"
        )
    return zookeeper, bootstrap, security


@contextlib.contextmanager
def connect(args: argparse.Namespace, daemon: bool = False) -> Iterator[Connections]:
    """Connect to ZooKeeper and Kafka as ``args`` say; close both on exit.

    Raises:
        UsageError: No server is configured.
        StoreError: ZooKeeper cannot be reached within ``--connect-timeout``.
    """
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
    )
    try:
        start_client(client, args.connect_timeout)
    except StoreUnavailableError:
        raise StoreUnavailableError(
            f"cannot connect to ZooKeeper at {zookeeper} within {args.connect_timeout:g} s"
        ) from None
    try:
        try:
            store = LayoutStore(client, args.root)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
        kafka = {k: v for k, v in security.kafka.items() if k != "bootstrap.servers"}
        admin = KafkaAdmin(bootstrap, timeout=args.kafka_timeout, config=kafka)
        try:
            yield Connections(store, admin)
        finally:
            admin.close()
    finally:
        close_client(client)


def _topic_text(record: TopicRecord) -> str:
    pending = "none" if record.pending is None else str(record.pending)
    return (
        f"topic {record.topic}: initial {record.initial}, active {record.active}, "
        f"epoch {record.epoch}, pending {pending}, physical {record.physical}, "
        f"algorithm {record.algorithm}, ordered {str(record.ordered).lower()}, "
        f"compacted {str(record.compacted).lower()}, topic id {record.topic_id or 'unbound'}"
    )


def _adopt(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        controller = Controller(conn.store, conn.admin, progress=progress)
        record = controller.adopt(
            args.topic,
            args.algorithm,
            ordered=not args.unordered,
            replace_existing=args.replace,
        )
    emit(record.to_dict(), _topic_text(record), args.json)
    return 0


def _unadopt(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        removed = Controller(conn.store, conn.admin, progress=progress).unadopt(args.topic)
    payload: dict[str, Any] = {
        "name": args.topic,
        "unadopted": removed is not None,
        "topic": None if removed is None else removed.to_dict(),
    }
    text = (
        f"topic {args.topic}: not adopted; nothing to do"
        if removed is None
        else f"topic {args.topic}: unadopted (was: {_topic_text(removed)})"
    )
    emit(payload, text, args.json)
    return 0


def _result_text(result: TransitionResult) -> str:
    boundaries = ", ".join(f"{p}@{o}" for p, o in sorted(result.boundaries.items()))
    lines = [
        f"topic {result.topic}: epoch {result.epoch} sealed, {result.from_active} -> "
        f"{result.to_active} partitions in {result.seconds:.2f} s",
        f"boundaries {boundaries or 'none'}",
        f"producers {', '.join(result.producers) or 'none'}"
        + (f" (expired: {', '.join(result.expired)})" if result.expired else ""),
    ]
    return "\n".join(lines)


def _transition(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        controller = Controller(conn.store, conn.admin, progress=progress)
        run = controller.expand if args.kind == "expand" else controller.shrink
        result = run(args.topic, args.to, timeout=args.timeout)
    emit(result.to_dict(), _result_text(result), args.json)
    return 0


def _description_text(d: Description) -> str:
    if d.topic is None:
        return f"not adopted; {d.kafka_partitions} partitions in Kafka"
    lines = [
        _topic_text(d.topic),
        f"kafka partitions {d.kafka_partitions}, kafka topic id {d.kafka_topic_id}",
    ]
    for e in d.epochs:
        boundaries = ", ".join(f"{p}@{o}" for p, o in e.boundaries.items())
        edges = ", ".join(f"{a}->{b}" for a, b in e.edges)
        lines.append(
            f"epoch {e.epoch} {e.state}: {e.from_active} -> {e.to_active}"
            + (f", edges {edges}" if edges else "")
            + (f", boundaries {boundaries}" if boundaries else "")
            + (f", producers {', '.join(e.producers)}" if e.producers else "")
        )
    lines.append(f"producers {', '.join(sorted(d.producers)) or 'none'}")
    if d.topic.pending is not None:
        lines.append(f"acks of epoch {d.topic.pending}: {', '.join(d.acks) or 'none'}")
    return "\n".join(lines)


def _ago(since: float | None, now: float) -> str:
    if since is None:
        return ""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
    return f" since {stamp} ({max(0.0, now - since):.1f} s)"


def _group_text(status: GroupStatus, now: float) -> str:
    lines = [
        f"group {status.group} on topic {status.topic}: active {status.active}, "
        f"epoch {status.epoch}"
    ]
    for p in status.partitions:
        committed = "none" if p.committed is None else str(p.committed)
        head = (
            f"partition {p.partition} ({p.role}): committed {committed}, "
            f"log {p.log_start}..{p.end}, {p.state}"
        )
        if p.gate is None:
            lines.append(head)
            continue
        waits = ", ".join(
            f"epoch {w.epoch} seal"
            if w.partition < 0
            else f"{w.partition}@{w.offset} (committed "
            f"{'none' if w.committed is None else w.committed})"
            for w in p.waits
        )
        lines.append(
            f"{head} at {p.gate} (epoch {p.gate_epoch}){_ago(p.since, now)}: waits on {waits}"
        )
    return "\n".join(lines)


def _describe(args: argparse.Namespace) -> int:
    if args.group is not None:
        if not args.group:
            raise UsageError("--group needs a group id")
        with connect(args) as conn:
            status = group_status(conn.store, conn.admin, args.topic, args.group)
        emit(status.to_dict(), _group_text(status, time.time()), args.json)
        return 0
    with connect(args) as conn:
        description = Controller(conn.store, conn.admin).describe(args.topic)
        retired: list[RetiredStatus] = []
        retention = None
        if description.topic is not None:
            retired = retired_status(conn.store, conn.admin, args.topic, interest_settings(args))
            retention = conn.store.get_retention(args.topic)
        notes = security_notes(conn.store, description.topic)
    payload: dict[str, Any] = {"name": args.topic, **description.to_dict()}
    payload["retired"] = [r.to_dict() for r in retired]
    payload["consumed_retention_ms"] = None if retention is None else retention.consumed_ms
    payload["security"] = notes.to_dict()
    text = _description_text(description)
    if description.topic is not None:
        text += "\n" + _retired_text(retired, retention.consumed_ms if retention else None)
    text += notes.text()
    emit(payload, text, args.json)
    return 0


def _retired_text(retired: list[RetiredStatus], retention_ms: int | None) -> str:
    lines = [f"consumed retention {'off' if retention_ms is None else f'{retention_ms} ms'}"]
    if not retired:
        lines.append("retired partitions none")
    for r in retired:
        head = (
            f"retired partition {r.partition} (epoch {r.epoch}): {r.state}, final offset "
            f"{r.final_offset}, log {r.log_start}..{r.end}"
        )
        if r.state != "draining":
            lines.append(head)
            continue
        held = ", ".join(
            f"{g.group} ({g.state.lower()}) at {g.committed.get(r.partition, 'none')}"
            for g in r.holders
        )
        lines.append(
            f"{head}; held by {held or 'nobody'}" + (f" ({r.unknown})" if r.unknown else "")
        )
    return "\n".join(lines)


def _coordinator(args: argparse.Namespace) -> int:
    with connect(args, daemon=True) as conn:
        daemon = CoordinatorDaemon(
            conn.store.client,
            conn.admin,
            root=conn.store.root,
            progress=progress,
            scan_interval=args.scan_interval,
            resume_timeout=args.resume_timeout,
            relay_interval=args.relay_interval,
            sweep_interval=args.sweep_interval,
            sweep_settings=SweepSettings(interest_settings(args), args.trim_timeout),
        )

        def on_signal(_signum: int, _frame: FrameType | None) -> None:
            daemon.stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        # The daemon runs in a thread so the main thread stays free for signals.
        thread = threading.Thread(target=daemon.run, name="coordinator", daemon=True)
        thread.start()
        progress(f"coordinator {daemon.identifier} started (root {conn.store.root})")
        try:
            while thread.is_alive():
                thread.join(0.2)
        finally:
            daemon.stop()
            thread.join(15)
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    progress("coordinator stopped")
    return 0
