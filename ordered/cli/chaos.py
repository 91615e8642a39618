"""``ordered chaos``: a bounded fault-injection run on a local cluster, then a verdict."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from coordinator.kernel.errors import RunInterruptedError
from ordered.chaos.run import ChaosOptions, remove_workdir, run_chaos
from ordered.cli.options import MAX_SECONDS, FloatArg, IntArg
from ordered.cli.output import emit, error, progress

__all__ = ["add_parser"]


_seconds = FloatArg(30.0, MAX_SECONDS, "seconds (at least 30)", include_minimum=True)
_rate = FloatArg(1.0, 20_000.0, "records per second", include_minimum=True)
_seed = IntArg(-(2**63), 2**63 - 1, "a seed (a 64-bit integer)")


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``ordered chaos``."""
    p = sub.add_parser(
        "chaos",
        help="fault-injection run on a local cluster it starts; exit 0 only if order held",
        description="Start a local cluster, producers, consumer groups and coordinators as "
        "separate processes, inject seeded faults while traffic flows, then check the "
        "recorded histories: per-key order of first deliveries and of every replay pass, "
        "nothing acked lost, duplicates counted.",
    )
    p.add_argument("--duration", type=_seconds, required=True, help="seconds of faults (>= 30)")
    p.add_argument("--seed", type=_seed, required=True, help="fault schedule seed")
    p.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="Kafka brokers")
    p.add_argument("--rate", type=_rate, default=300.0, help="records per second (all producers)")
    p.add_argument(
        "--consumer-barrier",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the consumer-barrier feature in the run's root, written before its first "
        "adoption (default: on, as that adoption leaves a new root; "
        "--no-consumer-barrier: every fetch checked)",
    )
    p.add_argument(
        "--replays",
        action="store_true",
        help="also seek a running consumer backwards and reset a stopped group's offsets",
    )
    p.add_argument(
        "--eos",
        action="store_true",
        help="also run an exactly-once stage (transactional copy to a second topic), killed "
        "mid-transaction",
    )
    p.add_argument(
        "--spark",
        action="store_true",
        help="also read the topic with a Spark query (group spark) on a standalone master "
        "and two workers it starts; kill executors and the driver (restarted from its "
        "checkpoint)",
    )
    p.add_argument(
        "--zookeepers",
        type=int,
        choices=(1, 3, 5),
        default=1,
        help="ZooKeeper servers; an ensemble (3 or 5) also gets kill-zookeeper-member and "
        "zookeeper-quorum-loss faults, and zookeeper-restart kills every member",
    )
    p.add_argument(
        "--network-faults",
        action="store_true",
        help="also cut, blackhole and slow the network between the processes and Kafka "
        "(a proxy per broker) and ZooKeeper (a proxy per process)",
    )
    p.add_argument(
        "--java-readers",
        type=IntArg(0, 3, "a count of Java readers"),
        default=0,
        metavar="N",
        help="how many of the main group's 3 starting members are Java OrderedKafkaConsumers "
        "(the jar's verifiable reader; needs Java 17 and the built jar, see `ordered jvm-jar`), "
        "killed, stopped and rebalanced like the Python ones; default 0: all Python",
    )
    p.add_argument("--dir", type=Path, default=None, help="run directory (default: a temp dir)")
    p.add_argument("--keep", action="store_true", help="keep the run directory")
    p.add_argument(
        "--drain-timeout", type=_seconds, default=300.0, help="seconds to read to the end"
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.set_defaults(func=_chaos)


def _text(r: dict[str, Any]) -> str:
    kinds = ", ".join(f"{k} {n}" for k, n in r["fault_kinds"].items())
    lines = [
        f"verdict: {'HOLDS' if r['holds'] else 'VIOLATED'} (seed {r['seed']}, "
        f"schedule {r['schedule_digest']})",
        f"records acked {r['records']}, order violations {r['violations']}, lost {r['lost']}, "
        f"committed past undelivered {r['committed_past_undelivered']}, "
        f"duplicates {r['duplicates']}, copies in the exactly-once output {r['copies']}",
        f"faults {r['faults']} ({kinds}); layout changes {r['layout_changes']}; "
        f"process kills {r['process_kills']}",
    ]
    for name, member in r.get("java_members", {}).items():
        delivered = ", ".join(f"{ident} {n}" for ident, n in member["delivered"].items())
        lines.append(f"Java reader {name}: killed {member['kills']} times; delivered {delivered}")
    for group, stats in sorted(r["groups"].items()):
        lines.append(f"group {group}: " + ", ".join(f"{k} {v}" for k, v in stats.items()))
    for proof in r["trim_proof"]:
        lines.append(
            f"group {proof['group']} stopped {proof['paused_s']} s across {proof['trims']} "
            f"trims, lost {proof['lost']}"
        )
    for v in r["violation_samples"][:10]:
        lines.append("violation: " + json.dumps(v, sort_keys=True))
    for lost in r["lost_samples"][:10]:
        lines.append("lost: " + json.dumps(lost, sort_keys=True))
    for passed in r["committed_past_samples"][:10]:
        lines.append("committed past undelivered: " + json.dumps(passed, sort_keys=True))
    if "spark_logs" in r:
        logs = r["spark_logs"]
        lines.append(
            f"Spark logs: {logs['stack_overflow_errors']} StackOverflowError lines, "
            f"{logs['dead_stream_threads']} dead stream threads"
        )
    for outage in r.get("zookeeper_outages", []):
        lines.append(
            f"{outage['kind']} {','.join(outage['members'])}: down {outage['down_s']} s, "
            f"quorum with every member back after {outage['back_s']} s"
        )
    for crash in r["crashes"]:
        lines.append(f"crash (not injected): {crash['ident']} exit code {crash['code']}")
    if r["missing_fault_kinds"]:
        lines.append("fault kinds that did not happen: " + ", ".join(r["missing_fault_kinds"]))
    lines.append(f"run directory: {r['directory']}")
    return "\n".join(lines)


def _chaos(args: argparse.Namespace) -> int:
    options = ChaosOptions(
        duration=args.duration,
        seed=args.seed,
        brokers=args.brokers,
        rate=args.rate,
        replays=args.replays,
        eos=args.eos,
        spark=args.spark,
        directory=args.dir,
        keep=args.keep,
        drain_timeout=args.drain_timeout,
        zookeepers=args.zookeepers,
        network_faults=args.network_faults,
        consumer_barrier=args.consumer_barrier,
        java_readers=args.java_readers,
    )
    try:
        result = run_chaos(options, progress)
    except RunInterruptedError as exc:
        error(f"{exc}; everything the run started was stopped", args.json, "RunInterruptedError")
        return 130
    remove_workdir(result, options)
    emit(result, _text(result), args.json)
    return 0 if result["holds"] else 1
