"""Benchmark: OrderedConsumer against a plain confluent Consumer on the same broker.

Not a test. Run as ``.venv/bin/python benchmarks/bench_consumer.py`` (starts its own
cluster in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a
running one. Prints a table and writes ``benchmarks/results/consumer.json``.

Measured, all in one run against one broker:

1. Throughput: one pre-filled, adopted topic (keyed 100-byte records written by the
   layout with the epoch header, so the opt-in header audit has something to read);
   each variant reads all of it with ``consume(10000)`` in a fresh group, from the
   first batch to the last record. Variants are interleaved and repeated; the best and
   the median rate are kept. The first figure is ``OrderedConsumer`` in its default
   configuration (only the ZooKeeper settings: key audit on one record in 16 of the
   fast path, header audit off, the per-batch layout check on) against a plain
   ``Consumer`` (counts the batch only). Then: a plain ``Consumer`` that reads each
   record's value (what any application does at least), the default without the
   per-batch layout check (a test-only switch: what the check costs), the default
   without fetching ahead (each check's round trip waited for in turn), no audit, and
   the opt-in audits: the key audit on every record, the header audit sampled (1 in
   16), and the full audit (both on every record). For the wrapper, the time it
   spends per record outside librdkafka's ``consume`` is measured too: it does not
   depend on how busy the broker is, unlike the rates on this shared machine.
2. Unblock latency through the fallback path (committed offsets read from Kafka every
   ``ordered.gate.poll.interval.ms``): a topic alternates expand 2 -> 3 and shrink
   3 -> 2; each transition puts a gate on a destination partition. Once the
   destination's consumer (one thread) holds the first record past the gate, the
   source's consumer (another thread) delivers the source's tail and, at its next
   ``consume``, calls ``on_partition_key_maybe_revoked`` and commits. Latency = the
   destination's first delivery past the gate minus the source's callback (so the
   synchronous boundary commit is included). Measured twice: through the fallback path
   alone (``ordered.positions=false``) and with the position service, whose ZooKeeper
   notification makes the destination re-check at once.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import threading
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers
from confluent_kafka import Consumer, Producer, TopicPartition

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from linear_hash import Layout
from ordered.consumer import OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener

RESULTS = Path(__file__).resolve().parent / "results" / "consumer.json"
VALUE = b"x" * 100
# The first expansion creates partition 2, which the destination's librdkafka learns of
# at its next metadata refresh: those transitions measure metadata, not gates.
WARMUP = 2


def create_topic(bootstrap: str, partitions: int) -> str:
    """Create a fresh topic and wait for its metadata."""
    name = f"bench-{uuid.uuid4().hex[:10]}"
    KafkaAdmin(bootstrap, timeout=30.0).create_topics([name], partitions)
    return name


def prefill(bootstrap: str, topic: str, layout: Layout, count: int) -> None:
    """Write ``count`` keyed records routed by ``layout``, with the epoch header."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "linger.ms": 20,
            "batch.num.messages": 10000,
            "queue.buffering.max.messages": 1_000_000,
        }
    )
    header = [("ordered.epoch", str(layout.epoch).encode())]
    keys = [f"key-{i}".encode() for i in range(10_000)]
    parts = [layout.partition_for(k) for k in keys]
    for i in range(count):
        j = i % len(keys)
        while True:
            try:
                producer.produce(
                    topic, value=VALUE, key=keys[j], partition=parts[j], headers=header
                )
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("prefill did not complete")


class TimedInner:
    """Wraps the confluent consumer inside an OrderedConsumer to time its ``consume``."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.seconds = 0.0

    def consume(self, *args: Any) -> Any:
        started = time.perf_counter()
        try:
            return self.inner.consume(*args)
        finally:
            self.seconds += time.perf_counter() - started

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)


def read_all(consumer: Any, count: int, touch: bool) -> tuple[float, float]:
    """Consume ``count`` records from the first batch on.

    Returns:
        Records per second, and the wrapper's own time per record in nanoseconds (time
        in ``consume`` outside librdkafka's ``consume``; 0 for a plain consumer).
    """
    got = 0
    started = 0.0
    outer = 0.0
    timed = None
    if isinstance(consumer, OrderedConsumer):
        # The fetch path is what calls librdkafka's consume.
        timed = TimedInner(consumer._fetcher._consumer)
        consumer._fetcher._consumer = timed
    deadline = time.monotonic() + 300
    while got < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"only {got} of {count} records arrived")
        inner_before = timed.seconds if timed is not None else 0.0
        call = time.perf_counter()
        batch = consumer.consume(10000, 1.0)
        spent = time.perf_counter() - call
        if not batch:
            continue
        if not started:
            started = time.perf_counter()
        elif timed is not None:
            outer += spent - (timed.seconds - inner_before)
        if touch:
            for m in batch:
                m.value()
        got += len(batch)
    if timed is not None:
        consumer._fetcher._consumer = timed.inner
    return count / (time.perf_counter() - started), outer / count * 1e9


def throughput(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """Best and median rates of every variant, interleaved over ``args.repeats`` rounds."""
    topic = create_topic(bootstrap, args.partitions)
    controller.adopt(topic)
    prefill(bootstrap, topic, Layout(args.partitions, args.partitions, 0), args.records)
    base = {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "fetch.max.bytes": 52_428_800,
    }

    def plain(touch: bool) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            consumer = Consumer({**base, "group.id": f"bench-{uuid.uuid4().hex[:8]}"})
            try:
                consumer.subscribe([topic])
                return read_all(consumer, args.records, touch)
            finally:
                consumer.close()

        return run

    def ordered(
        settings: dict[str, Any], fetch_check: bool = True, pipeline: bool = True
    ) -> Callable[[], tuple[float, float]]:
        def run() -> tuple[float, float]:
            consumer = OrderedConsumer(
                {
                    **base,
                    "group.id": f"bench-{uuid.uuid4().hex[:8]}",
                    "ordered.zookeeper.connect": zookeeper,
                    "ordered.zookeeper.root": root,
                    **settings,
                }
            )
            consumer._layouts.verify_fetch = fetch_check
            consumer._fetcher.pipeline = pipeline
            try:
                consumer.subscribe([topic])
                rate = read_all(consumer, args.records, False)
                if consumer.violations:
                    raise RuntimeError(f"{consumer.violations} violations in a clean topic")
                return rate
            finally:
                consumer.close()

        return run

    header = {"ordered.epoch.header.audit": True}
    every_record = {"ordered.audit.every": 1}
    variants: dict[str, Callable[[], tuple[float, float]]] = {
        "plain": plain(False),
        "ordered_default": ordered({}),
        "plain_touch_value": plain(True),
        "ordered_default_without_layout_check": ordered({}, fetch_check=False),
        "ordered_default_without_fetch_ahead": ordered({}, pipeline=False),
        "ordered_no_audit": ordered({"ordered.key.audit": False}),
        "ordered_key_audit_every_record": ordered(every_record),
        "ordered_header_audit_every_16": ordered(header),
        "ordered_full_audit": ordered({**header, **every_record}),
    }
    rates: dict[str, list[float]] = {name: [] for name in variants}
    overheads: dict[str, list[float]] = {name: [] for name in variants}
    for round_ in range(args.repeats):
        for name, run in variants.items():
            gc.collect()
            rate, overhead = run()
            rates[name].append(rate)
            overheads[name].append(overhead)
            print(
                f"  round {round_ + 1} {name}: {rate:,.0f} rec/s, wrapper {overhead:.0f} ns/rec",
                flush=True,
            )
    out: dict[str, Any] = {}
    best_plain = max(rates["plain"])
    median_plain = statistics.median(rates["plain"])
    for name, values in rates.items():
        out[name] = {
            "best_per_s": round(max(values)),
            "median_per_s": round(statistics.median(values)),
            "runs_per_s": [round(v) for v in values],
            "ratio_best_vs_plain": round(max(values) / best_plain, 3),
            "ratio_median_vs_plain": round(statistics.median(values) / median_plain, 3),
            "wrapper_ns_per_record_median": round(statistics.median(overheads[name]), 1),
        }
    return out


class _Times(PartitionKeyRebalanceListener):
    def __init__(self, into: dict[int, list[float]]) -> None:
        self.into = into

    def on_partition_key_maybe_revoked(self, partitions: list[TopicPartition]) -> None:
        now = time.perf_counter()
        for tp in partitions:
            self.into[tp.partition].append(now)


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1), nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


def unblock_latency(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    args: argparse.Namespace,
    positions: bool,
) -> dict[str, Any]:
    """Source boundary commit -> destination first delivery.

    ``positions=False`` measures the fallback path (committed offsets polled from Kafka
    every ``ordered.gate.poll.interval.ms``); ``True`` adds the position service.
    """
    topic = create_topic(bootstrap, 2)
    controller.adopt(topic)
    group = f"bench-{uuid.uuid4().hex[:8]}"
    config: dict[str, Any] = {
        "bootstrap.servers": bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        "ordered.zookeeper.connect": zookeeper,
        "ordered.zookeeper.root": root,
        "ordered.gate.poll.interval.ms": args.gate_interval_ms,
        "ordered.positions": positions,
    }
    if args.fetch_wait_ms is not None:
        config["fetch.wait.max.ms"] = args.fetch_wait_ms
    # Partition 0 and partition 2 swap roles: expand 2 -> 3 moves keys 0 -> 2, shrink
    # 3 -> 2 moves them back. Each side runs its own consumer thread.
    lock = threading.Lock()
    arrivals: dict[bytes, float] = {}
    commits: dict[int, list[float]] = {0: [], 2: []}
    stop = threading.Event()
    errors: list[BaseException] = []
    hold = {0: threading.Event(), 2: threading.Event()}
    blocks = {0: 0, 2: 0}

    def side(partition: int) -> None:
        times = _Times(commits)
        consumer = OrderedConsumer(config)
        try:
            consumer.key_listener = times
            consumer.assign([TopicPartition(topic, partition)])
            while not stop.is_set():
                if hold[partition].is_set():
                    time.sleep(0.002)
                    continue
                batch = consumer.consume(100, 0.05)
                blocks[partition] = consumer.metrics["blocks"]
                now = time.perf_counter()
                with lock:
                    for m in batch:
                        arrivals.setdefault(m.value(), now)
        except BaseException as exc:
            errors.append(exc)
        finally:
            consumer.close()

    threads = [threading.Thread(target=side, args=(p,), daemon=True) for p in (0, 2)]
    for thread in threads:
        thread.start()
    producer_conf = {"bootstrap.servers": bootstrap, "linger.ms": 0}
    samples: list[float] = []
    try:
        for i in range(args.latency_samples + WARMUP):
            expand = i % 2 == 0
            source, destination = (0, 2) if expand else (2, 0)
            # The source's consumer waits until the destination's consumer holds the
            # first record past the gate: the sample then measures the gate only, not
            # how soon librdkafka fetches a fresh record.
            hold[source].set()
            blocked_before = blocks[destination]
            producer = Producer(producer_conf)
            producer.produce(topic, value=f"tail-{i}".encode(), partition=source)
            producer.flush(10)
            if expand:
                controller.expand(topic, 3, timeout=30)
            else:
                controller.shrink(topic, 2, timeout=30)
            producer = Producer(producer_conf)
            marker = f"head-{i}".encode()
            producer.produce(topic, value=marker, partition=destination)
            producer.flush(10)
            wait(lambda d=destination, b=blocked_before: blocks[d] > b, errors)
            hold[source].clear()
            wait(lambda marker=marker: marker in arrivals, errors)
            wait(lambda n=i // 2 + 1, s=source: len(commits[s]) >= n, errors)
            # Measured from the callback: the synchronous commit after it counts.
            announced = commits[source][i // 2]
            latency_ms = (arrivals[marker] - announced) * 1000.0
            print(f"  transition {i + 1}: {latency_ms:.1f} ms", flush=True)
            if i >= WARMUP:
                samples.append(latency_ms)
    finally:
        stop.set()
        for thread in threads:
            thread.join(30)
    if errors:
        raise errors[0]
    return {
        "samples": len(samples),
        "gate_poll_interval_ms": args.gate_interval_ms,
        "p50_ms": round(percentile(samples, 0.5), 1),
        "p99_ms": round(percentile(samples, 0.99), 1),
        "max_ms": round(max(samples), 1),
        "mean_ms": round(statistics.fmean(samples), 1),
        "measured_from": "on_partition_key_maybe_revoked callback (boundary commit included)",
        "warmup_transitions_discarded": WARMUP,
    }


def _ratio_range(rates: dict[str, Any]) -> list[float]:
    """Lowest and highest per-round ratio of the default wrapper to plain (same round)."""
    if "ordered_default" not in rates:
        return []
    pairs = zip(rates["ordered_default"]["runs_per_s"], rates["plain"]["runs_per_s"], strict=True)
    ratios = [o / p for o, p in pairs]
    return [round(min(ratios), 3), round(max(ratios), 3)]


def wait(condition: Callable[[], bool], errors: list[BaseException], timeout: float = 20) -> None:
    """Wait for ``condition``; fail early if a consumer thread died."""
    deadline = time.monotonic() + timeout
    while not condition():
        if errors:
            raise errors[0]
        if time.monotonic() > deadline:
            raise RuntimeError("timed out")
        time.sleep(0.001)


def main(argv: list[str] | None = None) -> int:
    """Run both benchmarks, print the results, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency-samples", type=int, default=30)
    parser.add_argument("--gate-interval-ms", type=int, default=100)
    parser.add_argument("--fetch-wait-ms", type=int, default=None)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    with (
        servers(args, "consumer") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (client, root),
    ):
        _common.set_consumer_barrier(client, root, args.consumer_barrier)
        controller = Controller(LayoutStore(client, root), KafkaAdmin(bootstrap, timeout=10))
        print("throughput ...", flush=True)
        rates = throughput(bootstrap, zookeeper, root, controller, args) if args.repeats else {}
        print("unblock latency, fallback path ...", flush=True)
        latency = unblock_latency(bootstrap, zookeeper, root, controller, args, False)
        print("unblock latency, position service ...", flush=True)
        service = unblock_latency(bootstrap, zookeeper, root, controller, args, True)

    default = rates.get("ordered_default", {})
    results = {
        "default_ratio_vs_plain": {
            "median": default.get("ratio_median_vs_plain"),
            "best": default.get("ratio_best_vs_plain"),
            "range": _ratio_range(rates),
        },
        **environment("consumer"),
        "records": args.records,
        "partitions": args.partitions,
        "repeats": args.repeats,
        "goal": "ordered_default/plain >= 0.9",
        "throughput": rates,
        "unblock_latency_fallback": latency,
        "unblock_latency_position_service": service,
        "note": "2 shared cores; other sessions ran tests at the same time: compare "
        "variants within this run only",
    }
    if default:
        print(
            "default configuration / plain confluent: "
            f"median {default['ratio_median_vs_plain']}, best {default['ratio_best_vs_plain']}, "
            f"per round {results['default_ratio_vs_plain']['range']}",
            flush=True,
        )
    _common.write_results(args.out, results)
    print(json.dumps(results, indent=2, sort_keys=True))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
