"""The demo's client processes: ``python -m ordered.demo.worker producer|consumer ...``.

Each runs as its own process, as an application would, and writes what it did to one
file, line by line, for :mod:`ordered.demo.checker`:

* a producer writes each record as ``value = "<producer> <key> <seq>"`` (its sequence
  number per key counts up from 0) and logs every acknowledged record as
  ``<producer> <key> <seq> <partition> <offset>``;
* a consumer (one member of an :class:`~ordered.OrderedConsumer` group) logs every
  delivered record as ``<monotonic ns> <producer> <key> <seq> <partition> <offset>``;
  Linux's monotonic clock is shared by all processes, so the lines of several members
  merge into one delivery order. Its last line is ``# {json}`` with its counters and the
  longest time one of its partitions stayed blocked at a gate.

SIGTERM (or SIGINT) ends a worker cleanly: a producer flushes and closes (so it
leaves the barrier), a consumer closes (so the group rebalances at once).
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
from typing import IO, Any

from confluent_kafka import KafkaError

from ordered.consumer import GateState, OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener
from ordered.producer import OrderedProducer

__all__ = ["main"]

_stop = threading.Event()


def _on_signal(_signum: int, _frame: FrameType | None) -> None:
    _stop.set()


def _producer(args: argparse.Namespace, out: IO[str]) -> dict[str, Any]:
    producer = OrderedProducer(
        {
            "bootstrap.servers": args.bootstrap,
            "ordered.zookeeper.connect": args.zookeeper,
            "ordered.zookeeper.root": args.root,
            "linger.ms": 5,
        }
    )
    counts = {"produced": 0, "acked": 0, "failed": 0}
    seqs = [0] * args.keys

    def delivered(err: KafkaError | None, msg: Any) -> None:
        if err is not None:
            counts["failed"] += 1
            return
        counts["acked"] += 1
        out.write(f"{msg.value().decode()} {msg.partition()} {msg.offset()}\n")

    interval = 1.0 / args.rate
    n = 0
    next_at = time.monotonic()
    try:
        while not _stop.is_set():
            key = f"{args.name}-k{n % args.keys:03d}"
            slot = n % args.keys
            value = f"{args.name} {key} {seqs[slot]}"
            while not _stop.is_set():
                try:
                    producer.produce(args.topic, value=value, key=key, on_delivery=delivered)
                    break
                except BufferError:  # a full queue or ZooKeeper away: serve, then retry
                    producer.poll(0.05)
            else:
                break
            seqs[slot] += 1
            n += 1
            counts["produced"] += 1
            next_at += interval
            pause = next_at - time.monotonic()
            producer.poll(max(0.0, pause))
            if pause < -1.0:  # far behind (a barrier wait): do not burst to catch up
                next_at = time.monotonic()
    finally:
        producer.flush(30)
        producer.close()
    return counts


class _Listener(PartitionKeyRebalanceListener):
    """Counts KIP-253's key-rebalance callbacks (an application would move state here)."""

    def __init__(self) -> None:
        self.revoked = 0
        self.assigned = 0

    def on_partition_key_maybe_revoked(self, partitions: list[Any]) -> None:
        self.revoked += len(partitions)

    def on_partition_key_assigned(self, partitions: list[Any]) -> None:
        self.assigned += len(partitions)


def _consumer(args: argparse.Namespace, out: IO[str]) -> dict[str, Any]:
    consumer = OrderedConsumer(
        {
            "bootstrap.servers": args.bootstrap,
            "group.id": args.group,
            "client.id": args.name,
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200,
            "partition.assignment.strategy": "roundrobin",
            "ordered.zookeeper.connect": args.zookeeper,
            "ordered.zookeeper.root": args.root,
        }
    )
    listener = _Listener()
    blocked_since: dict[int, float] = {}
    longest = 0.0
    errors = 0
    taken = 0
    try:
        # A member that joins late starts with a backlog: the first layout change then
        # finds the group behind, and the gates have something to hold back.
        _stop.wait(args.start_delay)
        consumer.subscribe([args.topic], key_listener=listener)
        began = time.monotonic()
        while not _stop.is_set():
            if args.max_rate > 0:  # the application's own pace: a bounded work rate
                ahead = taken / args.max_rate - (time.monotonic() - began)
                if ahead > 0:
                    _stop.wait(ahead)
            msgs = consumer.consume(100, 0.2)
            taken += len(msgs)
            now_ns = time.monotonic_ns()
            lines = []
            for msg in msgs:
                if msg.error() is not None:
                    errors += 1
                    continue
                lines.append(f"{now_ns} {msg.value().decode()} {msg.partition()} {msg.offset()}\n")
            out.writelines(lines)
            now = time.monotonic()
            seen = set()
            for gate in consumer.gate_status(waits=False):
                if gate.state is GateState.BLOCKED:
                    seen.add(gate.partition)
                    blocked_since.setdefault(gate.partition, now)
            for partition in list(blocked_since):
                longest = max(longest, now - blocked_since[partition])
                if partition not in seen:
                    del blocked_since[partition]
        metrics = consumer.metrics
    finally:
        consumer.close()
    return {
        "delivered": metrics.get("delivered", 0),
        "violations": metrics.get("violations", 0),
        "gates_opened": metrics.get("gates_opened", 0),
        "announcements": metrics.get("announcements", 0),
        "key_revoked": listener.revoked,
        "key_assigned": listener.assigned,
        "errors": errors,
        "longest_gate_wait_s": round(longest, 3),
    }


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ordered.demo.worker")
    p.add_argument("role", choices=("producer", "consumer"))
    p.add_argument("--name", required=True)
    p.add_argument("--topic", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--group", default="ordered-demo")
    p.add_argument("--keys", type=int, default=50)
    p.add_argument("--rate", type=float, default=200.0, help="producer: records/s")
    p.add_argument("--max-rate", type=float, default=0.0, help="consumer: records/s (0: any)")
    p.add_argument("--start-delay", type=float, default=0.0, help="consumer: seconds")
    return p


def main(argv: Sequence[str] | None = None) -> int:
    """Run one demo worker until SIGTERM; return its exit code."""
    args = _parser().parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, _on_signal)
    with open(args.out, "w", buffering=1 << 16) as out:
        run = _producer if args.role == "producer" else _consumer
        summary = run(args, out)
        out.write(f"# {json.dumps(summary, sort_keys=True)}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
