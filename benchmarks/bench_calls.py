"""Benchmark: the consumer's cost per call, ``poll()`` and ``consume(N)`` against plain.

Not a test. Run as ``.venv/bin/python benchmarks/bench_calls.py`` (starts its own
cluster in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a
running one. Prints a table and writes ``benchmarks/results/calls.json``.

Measured, all in one run against one broker:

1. Cost per call: one adopted topic with ``--partitions`` partitions, pre-filled with
   ``--records`` keyed 100-byte records (routed by the layout, with the epoch header),
   read from the beginning by a fresh group, a plain ``Consumer`` and an
   ``OrderedConsumer`` (default configuration) in alternating rounds, both with
   ``fetch.queue.backoff.ms=10``, for each call: ``poll(1.0)`` once per message,
   ``consume(1)``, ``consume(100)``, ``consume(500)``, ``consume(10000)``. Timed from
   the first record to the last; CPU (the process's, librdkafka's threads included)
   over the same span. Reported per call: the median and range of the per-round ratio
   ordered / plain (same round), the median rates, and CPU per record of each.
2. ``poll()`` through an expansion: a 2-partition topic expanded to 3 half-way through
   its records, so the new partition's gate holds its records until the source's tail
   is delivered and its boundary committed (by the same consumer). A fresh group reads
   it all with ``poll(1.0)``, plain and ordered alternately (which goes first
   alternates too), timed from ``subscribe()`` (the group join included): the rates,
   and how often the gate held.
3. Gate unblock latency with the position service (``bench_consumer.unblock_latency``:
   two consumers, one per side of a transition).
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers
from bench_consumer import create_topic, prefill, unblock_latency
from confluent_kafka import Consumer

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from linear_hash import Layout
from ordered.consumer import OrderedConsumer

RESULTS = Path(__file__).resolve().parent / "results" / "calls.json"
CALLS = ("poll", "consume_1", "consume_100", "consume_500", "consume_10000")
# The poll() bar holds while the layout changes too (the expansion read, from subscribe()).
GOALS = {"poll": 0.9, "consume_500": 0.9, "consume_10000": 0.95, "expansion_poll": 0.9}


def read_all(
    consumer: Any, call: str, count: int, from_start: bool = False
) -> tuple[float, float, float]:
    """Read ``count`` records with ``call``.

    Timed from the first record, or (``from_start``) from this call on.

    Returns:
        Records/s, CPU microseconds per record, and when the first record came
        (``time.perf_counter()``).
    """
    got = 0
    started = cpu = 0.0
    if from_start:
        started, cpu = time.perf_counter(), time.process_time()
    first = 0.0
    deadline = time.monotonic() + 300
    if call == "poll":
        poll = consumer.poll
        while got < count:
            m = poll(1.0)
            if m is None:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {got} of {count} records arrived")
                continue
            if m.error() is not None:
                continue
            if not got:
                first = time.perf_counter()
                if not from_start:
                    started, cpu = first, time.process_time()
            got += 1
    else:
        num = int(call.split("_")[1])
        consume = consumer.consume
        while got < count:
            batch = consume(num, 1.0)
            if not batch:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {got} of {count} records arrived")
                continue
            if not got:
                first = time.perf_counter()
                if not from_start:
                    started, cpu = first, time.process_time()
            got += len(batch)
    elapsed = time.perf_counter() - started
    return count / elapsed, (time.process_time() - cpu) / count * 1e6, first


def _base(bootstrap: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "fetch.queue.backoff.ms": 10,
    }


def _runner(
    bootstrap: str, zookeeper: str, root: str, topic: str, ordered: bool, from_start: bool = False
) -> Callable[[str, int], tuple[float, float, dict[str, int], float]]:
    """A reader of ``topic``: (records/s, CPU us/record, metrics, subscribe() to first record s)."""

    def run(call: str, count: int) -> tuple[float, float, dict[str, int], float]:
        config = {**_base(bootstrap), "group.id": f"bench-{uuid.uuid4().hex[:8]}"}
        if ordered:
            config["ordered.zookeeper.connect"] = zookeeper
            config["ordered.zookeeper.root"] = root
        consumer: Any = OrderedConsumer(config) if ordered else Consumer(config)
        try:
            subscribed = time.perf_counter()
            consumer.subscribe([topic])
            rate, cpu, first = read_all(consumer, call, count, from_start)
            metrics: dict[str, int] = consumer.metrics if ordered else {}
            if metrics.get("violations"):
                raise RuntimeError(f"{metrics['violations']} violations in a clean topic")
            return rate, cpu, metrics, first - subscribed
        finally:
            consumer.close()

    return run


def _summary(
    plain: list[tuple[float, float]], ordered: list[tuple[float, float]]
) -> dict[str, Any]:
    ratios = [o[0] / p[0] for p, o in zip(plain, ordered, strict=True)]
    cpu_ratios = [o[1] / p[1] for p, o in zip(plain, ordered, strict=True)]
    return {
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "ratios": [round(r, 3) for r in ratios],
        "plain_median_per_s": round(statistics.median(r for r, _ in plain)),
        "ordered_median_per_s": round(statistics.median(r for r, _ in ordered)),
        "plain_cpu_us_per_record": round(statistics.median(c for _, c in plain), 3),
        "ordered_cpu_us_per_record": round(statistics.median(c for _, c in ordered), 3),
        "cpu_ratio_median": round(statistics.median(cpu_ratios), 3),
        "cpu_ratio_range": [round(min(cpu_ratios), 3), round(max(cpu_ratios), 3)],
    }


def calls(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """Every call, plain and ordered alternately, ``args.rounds`` rounds."""
    topic = create_topic(bootstrap, args.partitions)
    controller.adopt(topic)
    prefill(bootstrap, topic, Layout(args.partitions, args.partitions, 0), args.records)
    plain = _runner(bootstrap, zookeeper, root, topic, False)
    ordered = _runner(bootstrap, zookeeper, root, topic, True)
    out: dict[str, Any] = {}
    firsts: dict[str, list[float]] = {"plain": [], "ordered": []}
    for call in args.calls:
        runs: dict[str, list[tuple[float, float]]] = {"plain": [], "ordered": []}
        for round_ in range(args.rounds):
            # Alternate which goes first, so neither always follows the other.
            order = (("plain", plain), ("ordered", ordered))
            for name, run in order if round_ % 2 == 0 else order[::-1]:
                gc.collect()
                rate, cpu, _, first = run(call, args.records)
                runs[name].append((rate, cpu))
                firsts[name].append(first)
                print(
                    f"  {call} round {round_ + 1} {name}: {rate:,.0f} rec/s, {cpu:.3f} us CPU/rec",
                    flush=True,
                )
        out[call] = _summary(runs["plain"], runs["ordered"])
        print(f"  {call}: {out[call]}", flush=True)
    if firsts["plain"]:
        out["subscribe_to_first_record"] = _first_record(firsts["plain"], firsts["ordered"])
    return out


def _first_record(plain: list[float], ordered: list[float]) -> dict[str, Any]:
    """From ``subscribe()`` to the first record (the group join included), every call's rounds."""
    extra = [o - p for p, o in zip(plain, ordered, strict=True)]
    ratios = [o / p for p, o in zip(plain, ordered, strict=True)]
    return {
        "plain_median_s": round(statistics.median(plain), 3),
        "ordered_median_s": round(statistics.median(ordered), 3),
        "ratio_median": round(statistics.median(ratios), 3),
        "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)],
        "extra_median_s": round(statistics.median(extra), 3),
        "extra_range_s": [round(min(extra), 3), round(max(extra), 3)],
        "rounds": len(extra),
    }


def expansion(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """``poll()`` over a history with an expansion 2 -> 3 half-way."""
    topic = create_topic(bootstrap, 2)
    controller.adopt(topic)
    half = args.expansion_records // 2
    prefill(bootstrap, topic, Layout(2, 2, 0), half)
    result = controller.expand(topic, 3, timeout=60)
    prefill(bootstrap, topic, Layout(2, 3, result.epoch), args.expansion_records - half)
    # Timed from subscribe() on, the group join included (the same for both): the
    # ordered consumer takes the new partition's held records before its first
    # delivery, and timing from that delivery would leave out their wait.
    plain = _runner(bootstrap, zookeeper, root, topic, False, from_start=True)
    ordered = _runner(bootstrap, zookeeper, root, topic, True, from_start=True)
    runs: dict[str, list[tuple[float, float]]] = {"plain": [], "ordered": []}
    blocks: list[int] = []
    for round_ in range(args.expansion_rounds):
        order = (("plain", plain), ("ordered", ordered))
        for name, run in order if round_ % 2 == 0 else order[::-1]:
            gc.collect()
            rate, cpu, metrics, _ = run("poll", args.expansion_records)
            runs[name].append((rate, cpu))
            if metrics:
                blocks.append(metrics["blocks"])
            print(f"  expansion round {round_ + 1} {name}: {rate:,.0f} rec/s", flush=True)
    return {**_summary(runs["plain"], runs["ordered"]), "gate_blocks": blocks}


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark, print the results, write the JSON."""
    parser = _common.parser(__doc__)
    # A million records: at 200,000 a side read in 0.13-0.2 s, so one stall (a fetch
    # wait, the first check) moved a round by up to 2x (a consume(500) round of 0.51
    # beside four of 0.85-1.0 in one run).
    parser.add_argument("--records", type=int, default=1_000_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--calls", nargs="*", choices=CALLS, default=list(CALLS))
    parser.add_argument("--expansion-records", type=int, default=100_000)
    parser.add_argument("--expansion-rounds", type=int, default=7)
    parser.add_argument("--latency-samples", type=int, default=20)
    parser.add_argument("--gate-interval-ms", type=int, default=100)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)
    args.fetch_wait_ms = None  # as unblock_latency reads it

    with (
        servers(args, "calls") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (client, root),
    ):
        controller = Controller(LayoutStore(client, root), KafkaAdmin(bootstrap, timeout=10))
        print("calls ...", flush=True)
        per_call = calls(bootstrap, zookeeper, root, controller, args)
        grown: dict[str, Any] = {}
        if args.expansion_rounds:
            print("poll() through an expansion ...", flush=True)
            grown = expansion(bootstrap, zookeeper, root, controller, args)
        latency: dict[str, Any] = {}
        if args.latency_samples:
            print("unblock latency, position service ...", flush=True)
            latency = unblock_latency(bootstrap, zookeeper, root, controller, args, True)

    results = {
        **environment("calls"),
        "records": args.records,
        "partitions": args.partitions,
        "rounds": args.rounds,
        "fetch.queue.backoff.ms": 10,
        "goals": {k: f">= {v}" for k, v in GOALS.items()},
        "calls": per_call,
        "expansion_poll": grown,
        "unblock_latency_position_service": latency,
        "note": "2 shared cores; other sessions ran at the same time: compare plain and "
        "ordered within a round; CPU per record is less sensitive to load than rates",
    }
    _common.write_results(args.out, results)
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
