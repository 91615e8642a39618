"""Benchmark: OrderedProducer against a plain confluent Producer on the same broker.

Not a test. Run as ``.venv/bin/python benchmarks/bench_producer.py`` (starts its own
cluster in a temporary directory) or with ``--bootstrap``/``--zookeeper`` to use a
running one. Prints a table and writes ``benchmarks/results/producer.json``.

Measured, all in one run against one broker. The first figure printed (and the
``headline`` of the JSON) is the default configuration (only ``ordered.zookeeper.*`` set:
epoch header off, the compiled send path when it is built) against plain confluent in
the same run, then what the opt-in epoch header costs, from paired rounds (see
``producer_rates.paired``: the ratio within each round, median and quartiles over rounds).

1. Throughput on keyed 100-byte records, best of ``--repeats``, variants interleaved:
   plain ``Producer`` (librdkafka's partitioner), plain ``Producer`` with the linear-hash
   partition computed in Python (the floor for any client-side router), and
   ``OrderedProducer`` on an unadopted topic, on an adopted topic in the default
   configuration, the same with the pure-Python send path forced, and with the epoch
   header turned on (opt-in). Two rates per variant: ``produce()`` calls per second (the
   client-side cost; the send loop only) and records per second including the final
   ``flush()`` (end to end, broker included).
2. Client-side cost: ns per ``produce()`` call with no broker reachable (records only
   queue in librdkafka), the part of the cost that is ours, without the broker's noise.
3. Produce latency (``produce()`` call to delivery report, every 50th record) in steady
   state and during an expansion, at a fixed offered rate; and the longest single
   ``produce()`` call, which would show a stall at the switch.
4. Time from ``expand`` to sealed with 10 live producers.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import confluent_kafka
from _common import environment, scratch_root, servers
from producer_rates import COMMON, KEY_COUNT, VALUE, client_cost, create_topic, paired, throughput

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from ordered.producer import OrderedProducer
from ordered.producer import send as producer_module

RESULTS = Path(__file__).resolve().parent / "results" / "producer.json"


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values`` by nearest rank."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


def latency(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """Delivery latency of sampled records, steady state vs during an expansion.

    An OrderedProducer and, as the baseline for what the broker itself does during a
    CreatePartitions, a plain Producer (explicit partitions 0-3 of the same topic) write
    at the same fixed rate side by side.
    """
    topic = create_topic(bootstrap, 4)
    controller.adopt(topic)
    ordered = OrderedProducer(
        {
            "bootstrap.servers": bootstrap,
            **COMMON,
            "ordered.zookeeper.connect": zookeeper,
            "ordered.zookeeper.root": root,
        }
    )
    plain = confluent_kafka.Producer({"bootstrap.servers": bootstrap, **COMMON})
    # (produced at, latency, partition) and (called at, duration) per writer.
    samples: dict[str, list[tuple[float, float, int]]] = {"ordered": [], "plain": []}
    call_times: dict[str, list[tuple[float, float]]] = {"ordered": [], "plain": []}
    stop = threading.Event()
    rate = args.latency_rate / 2

    def report(name: str, sent_at: float) -> Callable[[Any, Any], None]:
        def done(err: Any, msg: Any) -> None:
            if err is None:
                samples[name].append((sent_at, time.perf_counter() - sent_at, msg.partition()))

        return done

    def write(name: str, producer: Any) -> None:
        i = 0
        started = time.perf_counter()
        explicit = name == "plain"
        while not stop.is_set():
            # A fixed offered rate, so the latencies compare like for like.
            due = started + i / rate
            now = time.perf_counter()
            if due > now:
                time.sleep(due - now)
            key = b"key-%d" % (i % KEY_COUNT)
            partition = i % 4 if explicit else -1
            t0 = time.perf_counter()
            try:
                if i % 25 == 0:
                    producer.produce(topic, VALUE, key, partition, on_delivery=report(name, t0))
                else:
                    producer.produce(topic, VALUE, key, partition)
            except BufferError:
                producer.poll(0.001)
                continue
            call_times[name].append((t0, time.perf_counter() - t0))
            i += 1
            producer.poll(0)

    writers = [
        threading.Thread(target=write, args=(name, producer), daemon=True)
        for name, producer in (("ordered", ordered), ("plain", plain))
    ]
    for writer in writers:
        writer.start()
    time.sleep(args.steady_seconds)
    expand_start = time.perf_counter()
    result = controller.expand(topic, 6, timeout=30)
    sealed = time.perf_counter()
    time.sleep(1.0)
    stop.set()
    for writer in writers:
        writer.join(30)
    ordered.flush(30)
    ordered.close()
    plain.flush(30)
    warm = expand_start - args.steady_seconds + 1.0  # skip the first second
    lo, hi = expand_start, sealed + 0.2

    def stats(values: list[float], calls: list[float]) -> dict[str, Any]:
        if not values:
            return {"samples": 0}
        out: dict[str, Any] = {
            "samples": len(values),
            "p50_ms": round(percentile(values, 0.50) * 1000, 2),
            "p99_ms": round(percentile(values, 0.99) * 1000, 2),
            "max_ms": round(max(values) * 1000, 2),
        }
        if calls:
            out["max_produce_call_ms"] = round(max(calls) * 1000, 3)
        return out

    out: dict[str, Any] = {
        "offered_rate_per_s_each": rate,
        "sample_every": 25,
        "expand_seconds": round(result.seconds, 3),
    }
    for name in ("ordered", "plain"):
        got, calls = samples[name], call_times[name]
        out[name] = {
            "steady": stats(
                [lat for t, lat, _ in got if warm <= t < lo],
                [d for t, d in calls if warm <= t < lo],
            ),
            "during_expansion": stats(
                [lat for t, lat, _ in got if lo <= t <= hi],
                [d for t, d in calls if lo <= t <= hi],
            ),
        }
    # Partitions 4 and 5 are created by the expansion: the first records there wait
    # for the producer's first batch to the new partitions.
    out["ordered"]["during_expansion_new_partitions"] = stats(
        [lat for t, lat, p in samples["ordered"] if lo <= t <= hi and p >= 4], []
    )
    return out


def seal_time(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    store: LayoutStore,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """Seconds from ``expand`` to sealed with 10 live, writing producers."""
    topic = create_topic(bootstrap, 4)
    controller.adopt(topic)
    producers = [
        OrderedProducer(
            {
                "bootstrap.servers": bootstrap,
                **COMMON,
                "ordered.zookeeper.connect": zookeeper,
                "ordered.zookeeper.root": root,
            }
        )
        for _ in range(10)
    ]
    stop = threading.Event()

    def write(producer: OrderedProducer, n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, VALUE, b"key-%d-%d" % (n, i % 100))
                i += 1
            except BufferError:
                producer.poll(0.01)
            if i % 20 == 0:
                producer.poll(0)
                time.sleep(0.002)

    threads = [
        threading.Thread(target=write, args=(p, n), daemon=True) for n, p in enumerate(producers)
    ]
    for thread in threads:
        thread.start()
    time.sleep(1.0)
    seconds: list[float] = []
    to_publish: list[float] = []
    to_last_ack: list[float] = []
    to_seal: list[float] = []
    try:
        for to in range(5, 5 + args.seal_runs):
            wall = time.time()
            started = time.perf_counter()
            result = controller.expand(topic, to, timeout=30)
            seconds.append(time.perf_counter() - started)
            if len(result.producers) != 10 or result.expired:
                raise RuntimeError(f"unexpected barrier: {result}")
            epoch = store.get_epoch(topic, result.epoch)
            acks = store.acks(topic, result.epoch)
            to_publish.append(epoch.created_at - wall)
            to_last_ack.append(max(a.acked_at for a in acks.values()) - epoch.created_at)
            to_seal.append((epoch.sealed_at or 0.0) - epoch.created_at)
            time.sleep(0.3)
    finally:
        stop.set()
        for thread in threads:
            thread.join(10)
        for producer in producers:
            producer.close()
    return {
        "producers": 10,
        "runs": [round(s, 3) for s in seconds],
        "median_s": round(statistics.median(seconds), 3),
        "max_s": round(max(seconds), 3),
        # Where the time goes (wall clocks of this host): CreatePartitions and the
        # publish; the producers' switch, drain and ack; the controller's seal.
        "expand_to_publish_s": [round(x, 3) for x in to_publish],
        "publish_to_last_ack_s": [round(x, 3) for x in to_last_ack],
        "publish_to_seal_s": [round(x, 3) for x in to_seal],
    }


def main(argv: list[str] | None = None) -> int:
    """Run every benchmark, print the table, write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else "")
    parser.add_argument("--bootstrap", help="bootstrap.servers of a running Kafka")
    parser.add_argument("--zookeeper", help="ZooKeeper connect string of a running ZooKeeper")
    parser.add_argument("--records", type=int, default=300_000)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--pairs", type=int, default=12, help="paired rounds of the headline")
    parser.add_argument("--pair-records", type=int, default=200_000)
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--latency-rate", type=int, default=20_000)
    parser.add_argument("--steady-seconds", type=float, default=4.0)
    parser.add_argument("--seal-runs", type=int, default=5)
    parser.add_argument("--client-records", type=int, default=200_000)
    parser.add_argument("--client-repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    with (
        servers(args, "producer") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (client, root),
    ):
        store = LayoutStore(client, root)
        controller = Controller(store, KafkaAdmin(bootstrap, timeout=10.0))
        print("default configuration vs plain, paired rounds ...", flush=True)
        pairs = paired(bootstrap, zookeeper, root, controller, args)
        print("throughput ...", flush=True)
        rates = throughput(bootstrap, zookeeper, root, controller, args)
        print("client-side cost ...", flush=True)
        cost = client_cost(zookeeper, root, controller, bootstrap, args)
        print("latency ...", flush=True)
        lat = latency(bootstrap, zookeeper, root, controller, args)
        print("seal time ...", flush=True)
        seal = seal_time(bootstrap, zookeeper, root, controller, store, args)

    headline = {
        "default_vs_plain": pairs["default_vs_plain"],
        "header_on_vs_plain": pairs["header_on_vs_plain"],
        "header_on_vs_default": pairs["header_on_vs_default"],
        "paired_rounds": pairs["rounds"],
        "records_per_run": pairs["records_per_run"],
        "plain_per_s_median": pairs["plain_per_s_median"],
        "compiled_send_path": producer_module.COMPILED,
        "note": "end-to-end rates (produce + final flush), ratio within each round; the "
        "machine was shared with other work: read the quartiles",
    }
    results = {
        **environment("producer"),
        "headline": headline,
        "records": args.records,
        "repeats": args.repeats,
        "partitions": args.partitions,
        "value_bytes": len(VALUE),
        "producer_config": COMMON,
        "throughput": rates,
        "client_cost_no_broker": cost,
        "latency": lat,
        "seal_with_10_producers": seal,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")

    print()
    d, h = headline["default_vs_plain"], headline["header_on_vs_plain"]
    print(
        f"DEFAULT CONFIGURATION vs plain confluent, same run, {pairs['rounds']} paired rounds: "
        f"median {d['median']:.3f} (quartiles {d['q1']:.3f}-{d['q3']:.3f}, "
        f"range {d['min']:.3f}-{d['max']:.3f}); compiled send path: {producer_module.COMPILED}"
    )
    print(
        f"opt-in epoch header vs plain: median {h['median']:.3f} (quartiles "
        f"{h['q1']:.3f}-{h['q3']:.3f}); vs the default: "
        f"{headline['header_on_vs_default']['median']:.3f}"
    )
    print()
    print(
        f"{'variant (best of ' + str(args.repeats) + ')':22s} {'produce()/s':>12s} {'ratio':>6s} "
        f"{'with flush/s':>13s} {'ratio':>6s} {'median/s':>10s} {'ratio':>6s}"
    )
    for name, row in rates.items():
        print(
            f"{name:22s} {row['produce_calls_per_s']:>12,} "
            f"{row.get('ratio_produce_calls_per_s', 1.0):>6.3f} "
            f"{row['end_to_end_per_s']:>13,} {row.get('ratio_end_to_end_per_s', 1.0):>6.3f} "
            f"{row['end_to_end_per_s_median']:>10,} "
            f"{row.get('ratio_end_to_end_per_s_median', 1.0):>6.3f}"
        )
    print()
    print(f"client-side cost, no broker (best of {args.client_repeats}): ns/record  ratio")
    for name, row in cost.items():
        print(f"  {name:20s} {row['ns_per_record']:>8} {row['ratio_vs_plain']:>7.3f}")
    print()
    print(
        f"latency at {lat['offered_rate_per_s_each']:,.0f}/s each   p50 ms  p99 ms  max ms  "
        "max produce() ms"
    )
    rows = [
        ("ordered steady", lat["ordered"]["steady"]),
        ("ordered during expansion", lat["ordered"]["during_expansion"]),
        ("  of which new partitions", lat["ordered"]["during_expansion_new_partitions"]),
        ("plain steady", lat["plain"]["steady"]),
        ("plain during expansion", lat["plain"]["during_expansion"]),
    ]
    for label, row in rows:
        if not row["samples"]:
            continue
        print(
            f"  {label:28s} {row['p50_ms']:>7} {row['p99_ms']:>7} {row['max_ms']:>7} "
            f"{row.get('max_produce_call_ms', ''):>10}"
        )
    print()
    print(
        f"expand -> sealed, 10 producers: median {seal['median_s']} s, max {seal['max_s']} s "
        f"(runs {seal['runs']})"
    )
    print(
        f"  expand->publish {seal['expand_to_publish_s']}  publish->last ack "
        f"{seal['publish_to_last_ack_s']}  publish->sealed {seal['publish_to_seal_s']}"
    )
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
