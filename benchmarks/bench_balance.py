"""How librdkafka's built-in assignors spread active and retired partitions after a shrink.

KIP-253 section 6 asks the assignor to balance active and retiring partitions
separately: a retired partition carries no new records, so a member holding only
retired partitions idles while others carry the load. librdkafka offers Python no
pluggable assignor, so this measures what the built-in ones do on a real broker:

1. a topic adopted with 4 partitions, expanded to 8 and shrunk to 5 by the real
   controller (partitions 5..7 are retired; Kafka keeps them);
2. for each ``partition.assignment.strategy`` and group size, ``--rounds`` groups of plain
   confluent-kafka consumers subscribes (``OrderedConsumer.subscribe`` passes the same
   setting to the same librdkafka) and the stable assignment is recorded;
3. per member: active and retired partitions; per group: the spread of active
   partitions (max - min over members), the best possible spread, and how many members
   got no active partition at all.

Writes ``benchmarks/results/balance.json``.
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers
from confluent_kafka import Consumer

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore

RESULTS = Path(__file__).resolve().parent / "results" / "balance.json"
STRATEGIES = ("range", "roundrobin", "cooperative-sticky")


def shrunk_topic(bootstrap: str, controller: Controller, args: argparse.Namespace) -> str:
    """A topic adopted at ``initial``, expanded to ``peak`` and shrunk to ``active``."""
    topic = f"balance-{uuid.uuid4().hex[:8]}"
    KafkaAdmin(bootstrap, timeout=30.0).create_topics([topic], args.initial)
    controller.adopt(topic)
    controller.expand(topic, args.peak, timeout=30)
    controller.shrink(topic, args.active, timeout=30)
    return topic


def stable_assignment(
    bootstrap: str, topic: str, strategy: str, members: int, physical: int, timeout: float
) -> tuple[list[list[int]], float]:
    """Subscribe ``members`` consumers; return each one's partitions once stable."""
    group = f"balance-{uuid.uuid4().hex[:8]}"
    consumers = [
        Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "partition.assignment.strategy": strategy,
                "enable.auto.commit": False,
                "session.timeout.ms": 10_000,
                "heartbeat.interval.ms": 500,
            }
        )
        for _ in range(members)
    ]
    started = time.monotonic()
    try:
        for c in consumers:
            c.subscribe([topic])
        last: list[list[int]] = []
        stable_since = time.monotonic()
        while time.monotonic() - started < timeout:
            for c in consumers:
                c.poll(0.05)
            now = [sorted(tp.partition for tp in c.assignment()) for c in consumers]
            if now != last:
                last, stable_since = now, time.monotonic()
            elif sum(len(p) for p in now) == physical and time.monotonic() - stable_since > 1.0:
                return now, stable_since - started
        raise RuntimeError(f"{strategy} with {members} members did not settle: {last}")
    finally:
        for c in consumers:
            c.close()


def figures(assignment: list[list[int]], active: int) -> dict[str, Any]:
    """Active/retired partitions per member, and the spread of the active ones."""
    per_member = [
        {
            "active": [p for p in parts if p < active],
            "retired": [p for p in parts if p >= active],
        }
        for parts in assignment
    ]
    counts = [len(m["active"]) for m in per_member]
    members = len(assignment)
    return {
        "members": per_member,
        "active_per_member": counts,
        "active_spread": max(counts) - min(counts),
        "best_spread": 0 if active % members == 0 else 1,
        "members_without_active": sum(1 for c in counts if c == 0),
        "best_members_without_active": max(0, members - active),
    }


def summary(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Per strategy and group size: the worst spread and how often a member idled."""
    out: dict[tuple[str, int], dict[str, Any]] = {}
    for row in runs:
        entry = out.setdefault(
            (row["strategy"], row["group_size"]),
            {
                "strategy": row["strategy"],
                "group_size": row["group_size"],
                "best_spread": row["best_spread"],
                "rounds": 0,
                "worst_spread": 0,
                "rounds_with_a_member_without_active": 0,
                "active_per_member_seen": [],
            },
        )
        entry["rounds"] += 1
        entry["worst_spread"] = max(entry["worst_spread"], row["active_spread"])
        if row["members_without_active"] > row["best_members_without_active"]:
            entry["rounds_with_a_member_without_active"] += 1
        counts = sorted(row["active_per_member"], reverse=True)
        if counts not in entry["active_per_member_seen"]:
            entry["active_per_member_seen"].append(counts)
    return list(out.values())


def main(argv: list[str] | None = None) -> int:
    """Run every strategy and group size, print the figures, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--initial", type=int, default=4)
    parser.add_argument("--peak", type=int, default=8)
    parser.add_argument("--active", type=int, default=5)
    parser.add_argument("--members", type=int, nargs="+", default=[2, 3, 4])
    parser.add_argument("--timeout", type=float, default=60.0)
    parser.add_argument("--rounds", type=int, default=4, help="groups per strategy and size")
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    runs: list[dict[str, Any]] = []
    with (
        servers(args, "balance") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (client, root),
    ):
        controller = Controller(LayoutStore(client, root), KafkaAdmin(bootstrap, timeout=10))
        topic = shrunk_topic(bootstrap, controller, args)
        for strategy in STRATEGIES:
            for members in args.members:
                for attempt in range(1, args.rounds + 1):
                    # A fresh group each round: member ids, and so the order the
                    # assignor sees them in, change.
                    assignment, settle = stable_assignment(
                        bootstrap, topic, strategy, members, args.peak, args.timeout
                    )
                    row = {
                        "strategy": strategy,
                        "group_size": members,
                        "round": attempt,
                        **figures(assignment, args.active),
                    }
                    row["settle_s"] = round(settle, 2)
                    runs.append(row)
                    print(
                        f"{strategy:>18} x{members} #{attempt}: active per member "
                        f"{row['active_per_member']}, spread {row['active_spread']} "
                        f"(best {row['best_spread']}), members without active "
                        f"{row['members_without_active']} (best "
                        f"{row['best_members_without_active']})",
                        flush=True,
                    )

    results = {
        **environment("balance"),
        "layout": {
            "initial": args.initial,
            "peak": args.peak,
            "active": args.active,
            "retired": list(range(args.active, args.peak)),
        },
        "goal": "KIP-253 section 6: spread active and retired partitions separately",
        "runs": runs,
        "summary": summary(runs),
    }
    _common.write_results(args.out, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
