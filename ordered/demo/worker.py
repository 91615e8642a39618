"""The demo's client processes: ``python -m ordered.demo.worker producer|consumer ...``.

Each runs as its own process, as an application would, around the verifiable clients
of :mod:`ordered.verify`, which append every ack and every delivery to the process's
history file for the checker:

* a producer (:class:`~ordered.verify.VerifiableProducer`) writes numbered records over
  its keys at ``--rate`` records per second;
* a consumer (:class:`~ordered.verify.VerifiableReader`, one member of an
  ``OrderedConsumer`` group) reads at most ``--max-rate`` records per second (the
  application's own pace), after ``--start-delay`` seconds, and measures how long each
  of its partitions stays blocked at a gate.

On exit each writes ``--stats`` (JSON): its counters and, for a consumer, the longest
gate wait. SIGTERM (or SIGINT) ends a worker cleanly: a producer flushes and closes (so
it leaves the barrier), a consumer closes (so the group rebalances at once).
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from ordered.consumer import GateState
from ordered.verify import VerifiableProducer, VerifiableReader

__all__ = ["main"]

_stop = threading.Event()


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    _stop.set()


def _config(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "bootstrap.servers": args.bootstrap,
        "ordered.zookeeper.connect": args.zookeeper,
        "ordered.zookeeper.root": args.root,
    }


def _producer(args: argparse.Namespace) -> dict[str, Any]:
    keys = [f"k{i:03d}" for i in range(args.keys)]
    producer = VerifiableProducer(
        {**_config(args), "linger.ms": 5},
        args.name,
        args.topic,
        args.history,
        keys,
        seed=args.seed,
    )
    try:
        producer.run(args.rate, stop=_stop.is_set)
    finally:
        producer.close(30.0)
    return {"sent": producer.sent, "acked": producer.acked, "nacked": producer.nacked}


def _consumer(args: argparse.Namespace) -> dict[str, Any]:
    config = {
        **_config(args),
        "client.id": args.name,
        "auto.offset.reset": "earliest",
        "partition.assignment.strategy": "roundrobin",
    }
    reader = VerifiableReader(config, args.group, args.name, args.topic, args.history)
    blocked_since: dict[int, float] = {}
    longest = 0.0
    try:
        # A member that joins late starts with a backlog: the first layout change then
        # finds the group behind, and the gates have something to hold back.
        _stop.wait(args.start_delay)
        reader.subscribe()
        began = time.monotonic()
        while not _stop.is_set():
            if args.max_rate > 0:
                ahead = reader.delivered / args.max_rate - (time.monotonic() - began)
                if ahead > 0:
                    _stop.wait(ahead)
            reader.poll_once(0.2, batch=100)
            now = time.monotonic()
            blocked = {
                g.partition
                for g in reader.consumer.gate_status(waits=False)
                if g.state is GateState.BLOCKED
            }
            for partition in blocked:
                blocked_since.setdefault(partition, now)
            for partition in list(blocked_since):
                longest = max(longest, now - blocked_since[partition])
                if partition not in blocked:
                    del blocked_since[partition]
        metrics = reader.consumer.metrics
    finally:
        reader.close()
    return {
        "delivered": reader.delivered,
        "violations": metrics.get("violations", 0),
        "gates_opened": metrics.get("gates_opened", 0),
        "announcements": metrics.get("announcements", 0),
        "passes": reader.pass_no + 1,
        "longest_gate_wait_s": round(longest, 3),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ordered.demo.worker")
    p.add_argument("role", choices=("producer", "consumer"))
    p.add_argument("--name", required=True, help="producer or reader id in the history")
    p.add_argument("--topic", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--history", required=True, help="the history file (JSON lines)")
    p.add_argument("--stats", required=True, help="the JSON file written on exit")
    p.add_argument("--group", default="ordered-demo")
    p.add_argument("--keys", type=int, default=50, help="producer: keys")
    p.add_argument("--seed", type=int, default=0, help="producer: seed of the key choice")
    p.add_argument("--rate", type=float, default=200.0, help="producer: records/s")
    p.add_argument("--max-rate", type=float, default=0.0, help="consumer: records/s (0: any)")
    p.add_argument("--start-delay", type=float, default=0.0, help="consumer: seconds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one demo worker until SIGTERM; return its exit code."""
    args = _parser().parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
    run = _producer if args.role == "producer" else _consumer
    stats = run(args)
    with open(args.stats, "w") as out:
        json.dump(stats, out, sort_keys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
