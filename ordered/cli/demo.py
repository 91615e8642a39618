"""``ordered demo``: run the whole layer on the local cluster and check the order end to end."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from coordinator.kernel.errors import CommandLineError
from coordinator.kernel.store import DEFAULT_ROOT
from ordered.cli.options import MAX_SECONDS, FloatArg, IntArg
from ordered.cli.output import emit

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``demo`` command on ``sub``."""
    from ordered.demo.runner import MIN_DURATION  # keeps `ordered --help` light

    p = sub.add_parser(
        "demo",
        help="run producers, consumers and a daemon through expansions, a shrink and a "
        "trim on the local cluster; check the order; draw a timeline",
        description="Start the local cluster unless it runs, a coordinator daemon, producer "
        "processes and an OrderedConsumer group; expand 2 -> 3 -> 4, shrink to 2, trim the "
        "retired partitions, expand to 4 over them; check every key's order end to end; "
        "draw a timeline PNG; stop everything it started. Exit code 0 only with 0 order "
        "violations and 0 records lost.",
    )
    p.add_argument(
        "--duration",
        type=FloatArg(0.0, MAX_SECONDS, "seconds"),
        default=60.0,
        help="seconds of traffic over which the layout changes run "
        f"(default 60, at least {MIN_DURATION:g})",
    )
    p.add_argument(
        "--spark", action="store_true", help="also read the topic with a Spark streaming query"
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="dev cluster directory; started there unless it runs (default: "
        "$ORDERED_CLUSTER_DIR, else ~/.local/state/ordered/cluster)",
    )
    p.add_argument(
        "--out",
        type=Path,
        default=Path("ordered-demo"),
        help="where the PNG and logs go (default ./ordered-demo)",
    )
    p.add_argument(
        "--root",
        default=DEFAULT_ROOT,
        help=f"the layout store's root znode (default {DEFAULT_ROOT})",
    )
    p.add_argument(
        "--producers",
        type=IntArg(1, 32, "a process count"),
        default=2,
        help="producer processes (default 2)",
    )
    p.add_argument(
        "--consumers",
        type=IntArg(1, 32, "a process count"),
        default=2,
        help="consumer processes, one group (default 2)",
    )
    p.add_argument(
        "--rate",
        type=FloatArg(0.0, 100_000.0, "records per second"),
        default=200.0,
        help="records per second per producer (default 200)",
    )
    p.set_defaults(func=_demo)


def _text(s: dict[str, Any]) -> str:
    changes = ", ".join(
        f"epoch {c['epoch']} {c['from']}->{c['to']} sealed in {c['seconds']:.2f} s"
        for c in s["layout_changes"]
    )
    lines = [
        f"records produced {s['produced']}, acknowledged {s['records']}, delivered "
        f"{s['delivered']} (+{s['duplicates']} re-deliveries)",
        f"epochs {s['epochs']}: {changes}",
        f"longest gate wait {s['longest_gate_wait_s']:.1f} s (records held at a closed gate; "
        f"a member paused a partition for at most {s['longest_member_pause_s']:.1f} s)",
        *(
            []
            if s.get("gate_held", True)
            else ["no gate held any record back: the demo's main point did not show"]
        ),
        f"order violations {s['violations']}, records lost {s['lost']}",
        *(
            [
                f"Spark query: {s['spark'].get('delivered', 0)} records in order, lost "
                f"{s['spark'].get('lost', 0)}"
                + (f", failed: {s['spark']['error']}" if s["spark"].get("error") else "")
            ]
            if s.get("spark")
            else []
        ),
        f"timeline {s['png']} (logs in {s['logs']})",
        "OK: every key in order, nothing lost" if s["ok"] else "FAILED: see above",
    ]
    return "\n".join(lines)


def _demo(args: argparse.Namespace) -> int:
    from ordered.demo.runner import MIN_DURATION, DemoOptions, run_demo

    if args.duration < MIN_DURATION:
        raise CommandLineError(f"--duration must be at least {MIN_DURATION:g} seconds")
    for flag in ("producers", "consumers"):
        if getattr(args, flag) < 1:
            raise CommandLineError(f"--{flag} must be at least 1")
    if args.rate <= 0:
        raise CommandLineError("--rate must be > 0")
    summary = run_demo(
        DemoOptions(
            duration=args.duration,
            spark=args.spark,
            as_json=args.json,
            cluster_dir=args.dir,
            out=args.out,
            root=args.root,
            producers=args.producers,
            consumers=args.consumers,
            rate=args.rate,
        )
    )
    emit(summary, _text(summary), args.json)
    return 0 if summary["ok"] else 1
