"""``ordered adopt|unadopt|expand|shrink TOPIC`` and ``ordered coordinator``.

Where the servers are: ``--zookeeper`` (else ``$ORDERED_ZOOKEEPER_CONNECT``, else the
dev cluster of ``ordered cluster up``) and ``--bootstrap-servers`` (else
``$ORDERED_BOOTSTRAP_SERVERS``, else the dev cluster). Both fail fast when the server is
down: ZooKeeper within ``--connect-timeout`` seconds, Kafka within ``--kafka-timeout``.
Every check runs before anything is written; ``--dry-run`` runs only the checks and
prints what would change.
"""

from __future__ import annotations

import argparse
import logging
import signal
import threading
import time
from types import FrameType
from typing import Any, Final

from coordinator.autoscale import DEFAULT_AUTOSCALE_INTERVAL_S
from coordinator.control.controller import Controller, TransitionResult
from coordinator.daemon import CoordinatorDaemon
from coordinator.kernel.errors import ConfigError, TransitionInProgressError
from coordinator.metrics.daemon_metrics import (
    DEFAULT_METRICS_ADDRESS,
    open_metrics,
    parse_metrics_address,
)
from coordinator.trims.retention import DEFAULT_SWEEP_INTERVAL_S, SweepSettings
from linear_hash import ALGORITHMS, DEFAULT_ALGORITHM
from ordered.cli import describe, plan
from ordered.cli.connection import (
    BOOTSTRAP_ENV,
    ZOOKEEPER_ENV,
    Connections,
    common_arguments,
    connect,
    topic_text,
)
from ordered.cli.options import (
    interest_arguments,
    interest_settings,
    partition_count,
    seconds,
    seconds_or_zero,
    topic_name,
)
from ordered.cli.output import configure, emit, progress, warn

# The connection helpers live in ordered.cli.connection (describe uses them too, and
# admin registers describe's parser); they stay importable from here.
__all__ = [
    "BOOTSTRAP_ENV",
    "ZOOKEEPER_ENV",
    "Connections",
    "add_parsers",
    "common_arguments",
    "connect",
    "topic_text",
]

STOP_GRACE_S: Final = 3.0
"""Seconds the daemon gets to stop cleanly after SIGTERM/SIGINT before the process
leaves anyway (ZooKeeper unreachable: its election node and locks end with the session)."""


def _metrics_address(text: str) -> str:
    """argparse type: ``HOST:PORT`` or ``off`` (a malformed one is a usage error)."""
    try:
        parse_metrics_address(text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix("--metrics-address: ")) from None
    return text


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``adopt``, ``unadopt``, ``expand``, ``shrink``, ``describe``, ``coordinator``."""
    adopt = sub.add_parser("adopt", help="adopt a topic: its partition count becomes initial")
    adopt.add_argument("topic", metavar="TOPIC", type=topic_name, help="the Kafka topic")
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
    common_arguments(adopt, None)
    adopt.set_defaults(func=_adopt)

    unadopt = sub.add_parser(
        "unadopt",
        help="remove a topic's layout (producers route it as plain Kafka); refused while "
        "an epoch is pending, and while producers are registered unless --force",
    )
    unadopt.add_argument("topic", metavar="TOPIC", type=topic_name, help="the Kafka topic")
    unadopt.add_argument(
        "--force",
        action="store_true",
        help="unadopt although producers are registered (they then route by plain Kafka "
        "hashing over every partition: a key written before and after lands in two "
        "partitions)",
    )
    unadopt.add_argument(
        "--dry-run", action="store_true", help="check and show what would be removed; write nothing"
    )
    common_arguments(unadopt, None)
    unadopt.set_defaults(func=_unadopt)

    for name, text in (
        ("expand", "grow the active partition count, keeping each key's order"),
        ("shrink", "shrink the active partition count (never below initial)"),
    ):
        p = sub.add_parser(name, help=text)
        p.add_argument("topic", metavar="TOPIC", type=topic_name, help="the Kafka topic")
        p.add_argument(
            "--to", type=partition_count, required=True, metavar="N", help="the new active count"
        )
        p.add_argument(
            "--dry-run",
            action="store_true",
            help="check and show the edges and which partitions would receive, give or "
            "retire; write nothing",
        )
        common_arguments(p, 60.0)
        p.set_defaults(func=_transition, kind=name)

    describe.add_parser(sub)

    daemon = sub.add_parser(
        "coordinator",
        help="run the coordinator daemon: completes pending epochs, relays group positions, "
        "runs consumed retention",
    )
    common_arguments(daemon, None)
    daemon.add_argument("--scan-interval", type=seconds, default=1.0, help="seconds between scans")
    daemon.add_argument(
        "--resume-timeout",
        type=seconds,
        default=10.0,
        help="seconds one resume waits in the barrier before the next scan retries",
    )
    daemon.add_argument(
        "--relay-interval",
        type=seconds_or_zero,
        default=0.1,
        help="seconds between position relay rounds (0: no relay)",
    )
    daemon.add_argument(
        "--sweep-interval",
        type=seconds_or_zero,
        default=DEFAULT_SWEEP_INTERVAL_S,
        help="seconds between rounds of the drain monitor and consumed-retention sweep, "
        "each followed by history compaction (0: off)",
    )
    daemon.add_argument(
        "--autoscale-interval",
        type=seconds_or_zero,
        default=DEFAULT_AUTOSCALE_INTERVAL_S,
        help="seconds between autoscaler ticks for topics with an autoscale policy (0: off)",
    )
    daemon.add_argument(
        "--trim-timeout",
        type=seconds,
        default=30.0,
        help="seconds one sweep trim waits for every replica",
    )
    daemon.add_argument(
        "--metrics-address",
        type=_metrics_address,
        default=None,
        metavar="HOST:PORT",
        help="serve Prometheus metrics on http://HOST:PORT/metrics and liveness on /healthz "
        "(port 0: any free port; "
        f"off: none; default {DEFAULT_METRICS_ADDRESS}, skipped with a warning if taken)",
    )
    interest_arguments(daemon)
    daemon.set_defaults(func=_coordinator)


def _adopt(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        controller = Controller(conn.store, conn.admin, progress=progress)
        record = controller.adopt(
            args.topic,
            args.algorithm,
            ordered=not args.unordered,
            replace_existing=args.replace,
        )
    emit(record.to_dict(), topic_text(record), args.json)
    return 0


def _unadopt(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        unadoption = plan.unadopt_plan(conn.store, args.topic)
        if unadoption.record is not None and unadoption.producers and not args.force:
            raise TransitionInProgressError(plan.producers_refusal(args.topic, unadoption))
        if args.dry_run:
            if unadoption.record is not None and unadoption.record.pending is not None:
                raise TransitionInProgressError(
                    f"cannot unadopt {args.topic}: epoch {unadoption.record.pending} is pending"
                )
            emit(unadoption.to_dict(), plan.unadopt_text(args.topic, unadoption), args.json)
            return 0
        if unadoption.producers:
            warn(plan.producers_refusal(args.topic, unadoption, forced=True))
        removed = Controller(conn.store, conn.admin, progress=progress).unadopt(args.topic)
    payload: dict[str, Any] = {
        "name": args.topic,
        "unadopted": removed is not None,
        "topic": None if removed is None else removed.to_dict(),
        "producers": sorted(unadoption.producers),
        "dry_run": False,
    }
    text = (
        f"topic {args.topic}: not adopted; nothing to do"
        if removed is None
        else f"topic {args.topic}: unadopted (was: {topic_text(removed)})"
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
        if args.dry_run:
            change = plan.transition_plan(conn.store, conn.admin, args.topic, args.to, args.kind)
            emit(change.to_dict(), plan.transition_text(change), args.json)
            return 0
        controller = Controller(conn.store, conn.admin, progress=progress)
        run = controller.expand if args.kind == "expand" else controller.shrink
        result = run(args.topic, args.to, timeout=args.timeout)
    emit(result.to_dict(), _result_text(result), args.json)
    return 0


def _coordinator(args: argparse.Namespace) -> int:
    # The daemon logs for an operator: INFO and up, JSON lines with --json.
    configure(args.json, logging.INFO)
    logging.getLogger("kazoo").setLevel(logging.WARNING)
    metrics = open_metrics(args.metrics_address, progress)  # before connecting: a bad address
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
            autoscale_interval=args.autoscale_interval,
            metrics=metrics,
        )
        stopping = threading.Event()

        def on_signal(signum: int, _frame: FrameType | None) -> None:
            # Only flags here: the main thread reports and bounds the shutdown.
            stopping.set()
            daemon.stop()

        previous = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGTERM, signal.SIGINT)}
        # The daemon runs in a thread so the main thread stays free for signals.
        thread = threading.Thread(target=daemon.run, name="coordinator", daemon=True)
        thread.start()
        progress(f"coordinator {daemon.identifier} started (root {conn.store.root})")
        try:
            while thread.is_alive() and not stopping.is_set():
                thread.join(0.2)
        finally:
            daemon.stop()
            progress("coordinator stopping")
            deadline = time.monotonic() + STOP_GRACE_S
            while thread.is_alive() and time.monotonic() < deadline:
                thread.join(0.1)
            if thread.is_alive():
                # Stuck in a ZooKeeper call that retries while the server is away: the
                # daemon thread dies with the process; the server drops the session.
                warn(
                    f"coordinator did not stop within {STOP_GRACE_S:g} s (ZooKeeper "
                    "unreachable?): leaving; its election node and locks end with the session"
                )
            for sig, handler in previous.items():
                signal.signal(sig, handler)
    progress("coordinator stopped")
    return 0
