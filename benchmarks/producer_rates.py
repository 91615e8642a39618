"""The producer benchmark's rate measurements: the paired headline rounds, best-of-N
throughput of every variant, and the client-side cost with no broker.

Used by ``bench_producer.py`` (run that one); this module only measures and returns the
figures, the caller prints them and writes the JSON.
"""

from __future__ import annotations

import argparse
import gc
import statistics
import time
import uuid
from collections.abc import Callable
from typing import Any

import confluent_kafka

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.topic_ids import TopicIds
from linear_hash import Layout
from ordered.producer import OrderedProducer
from ordered.producer import send as producer_module

__all__ = [
    "COMMON",
    "KEY_COUNT",
    "VALUE",
    "Routed",
    "client_cost",
    "create_topic",
    "paired",
    "python_path",
    "send_loop",
    "throughput",
]

VALUE = b"x" * 100
KEY_COUNT = 10_000
COMMON: dict[str, Any] = {
    "linger.ms": 5,
    "queue.buffering.max.messages": 1_000_000,
    "queue.buffering.max.kbytes": 1_048_576,
    "enable.idempotence": True,
}


def create_topic(bootstrap: str, partitions: int) -> str:
    """Create a fresh topic and wait for its metadata."""
    name = f"bench-{uuid.uuid4().hex[:10]}"
    KafkaAdmin(bootstrap, timeout=30.0).create_topics([name], partitions)
    return name


def send_loop(producer: Any, topic: str, keys: list[bytes], count: int) -> float:
    """Produce ``count`` keyed records as fast as possible; return the loop's seconds."""
    produce = producer.produce
    poll = producer.poll
    n_keys = len(keys)
    started = time.perf_counter()
    i = 0
    while i < count:
        try:
            produce(topic, VALUE, keys[i % n_keys])
        except BufferError:
            poll(0.005)
            continue
        i += 1
        if not i & 1023:
            poll(0)
    return time.perf_counter() - started


class Routed:
    """A plain Producer behind a Python-side linear-hash route: the router floor."""

    def __init__(self, producer: Any, layout: Layout) -> None:
        self._producer = producer
        self._pf = layout.partition_for
        self.poll = producer.poll
        self.flush = producer.flush

    def produce(self, topic: str, value: bytes, key: bytes) -> None:
        self._producer.produce(topic, value, key, self._pf(key))


def paired(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """The headline: default configuration and opt-in header vs plain, in paired rounds.

    Each round measures plain confluent, the default ``OrderedProducer`` and the one with
    the epoch header back to back on the same topic layout, in a rotating order (so a
    drift of the machine's load favours none of them), and takes the ratios within the
    round; the figure is the median over rounds, with the quartiles. On a machine shared
    with other work this is far steadier than ratios of best-of-N rates.
    """
    keys = [b"key-%d" % i for i in range(KEY_COUNT)]
    plain_topic = create_topic(bootstrap, args.partitions)
    ordered_topic = create_topic(bootstrap, args.partitions)
    controller.adopt(ordered_topic)
    base = {"bootstrap.servers": bootstrap, **COMMON}
    ordered_base = {**base, "ordered.zookeeper.connect": zookeeper, "ordered.zookeeper.root": root}
    makers: dict[str, tuple[Callable[[], Any], str]] = {
        "plain": (lambda: confluent_kafka.Producer(base), plain_topic),
        "default": (lambda: OrderedProducer(ordered_base), ordered_topic),
        "header_on": (
            lambda: OrderedProducer({**ordered_base, "ordered.epoch.header": True}),
            ordered_topic,
        ),
    }
    names = list(makers)
    ratios: dict[str, list[float]] = {"default": [], "header_on": []}
    rates: dict[str, list[float]] = {name: [] for name in names}
    for round_ in range(args.pairs):
        order = names[round_ % 3 :] + names[: round_ % 3]
        got: dict[str, float] = {}
        for name in order:
            make, topic = makers[name]
            producer = make()
            producer.produce(topic, VALUE, keys[0])
            producer.flush(30)
            gc.collect()
            started = time.perf_counter()
            send_loop(producer, topic, keys, args.pair_records)
            if producer.flush(120):
                raise RuntimeError(f"{name}: records not delivered")
            got[name] = args.pair_records / (time.perf_counter() - started)
            rates[name].append(got[name])
            if hasattr(producer, "close"):
                producer.close()
        for name in ratios:
            ratios[name].append(got[name] / got["plain"])
        print(
            f"  round {round_ + 1}: plain {got['plain']:>10,.0f}/s  default "
            f"{ratios['default'][-1]:.3f}  header on {ratios['header_on'][-1]:.3f}",
            flush=True,
        )

    def summary(values: list[float]) -> dict[str, Any]:
        q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
        return {
            "median": round(statistics.median(values), 3),
            "q1": round(q[0], 3),
            "q3": round(q[2], 3),
            "min": round(min(values), 3),
            "max": round(max(values), 3),
            "rounds": [round(v, 3) for v in values],
        }

    return {
        "rounds": args.pairs,
        "records_per_run": args.pair_records,
        "default_vs_plain": summary(ratios["default"]),
        "header_on_vs_plain": summary(ratios["header_on"]),
        "header_on_vs_default": summary(
            [h / d for h, d in zip(ratios["header_on"], ratios["default"], strict=True)]
        ),
        "plain_per_s_median": round(statistics.median(rates["plain"])),
    }


def throughput(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """Best-of-N rates of every variant, interleaved per repeat."""
    keys = [b"key-%d" % i for i in range(KEY_COUNT)]
    plain_topic = create_topic(bootstrap, args.partitions)
    unadopted_topic = create_topic(bootstrap, args.partitions)
    ordered_topic = create_topic(bootstrap, args.partitions)
    record = controller.adopt(ordered_topic)
    layout = Layout(record.initial, record.active, record.epoch)
    base = {"bootstrap.servers": bootstrap, **COMMON}
    ordered_base = {**base, "ordered.zookeeper.connect": zookeeper, "ordered.zookeeper.root": root}

    def plain() -> Any:
        return confluent_kafka.Producer(base)

    def routed() -> Any:
        return Routed(confluent_kafka.Producer(base), layout)

    variants: dict[str, tuple[Callable[[], Any], str]] = {
        "plain": (plain, plain_topic),
        "ordered_default": (lambda: OrderedProducer(ordered_base), ordered_topic),
        "ordered_header_on": (
            lambda: OrderedProducer({**ordered_base, "ordered.epoch.header": True}),
            ordered_topic,
        ),
        "ordered_python_path": (lambda: python_path(ordered_base), ordered_topic),
        "ordered_unadopted": (lambda: OrderedProducer(ordered_base), unadopted_topic),
        "plain_python_route": (routed, plain_topic),
    }
    calls: dict[str, list[float]] = {name: [] for name in variants}
    e2e: dict[str, list[float]] = {name: [] for name in variants}
    for repeat in range(args.repeats):
        for name, (make, topic) in variants.items():
            producer = make()
            # Warm up: first use (registration, metadata) is not the steady state.
            producer.produce(topic, VALUE, keys[0])
            producer.flush(30)
            gc.collect()
            started = time.perf_counter()
            loop = send_loop(producer, topic, keys, args.records)
            left = producer.flush(120)
            total = time.perf_counter() - started
            if left:
                raise RuntimeError(f"{name}: {left} records not delivered")
            calls[name].append(args.records / loop)
            e2e[name].append(args.records / total)
            if hasattr(producer, "close"):
                producer.close()
            print(
                f"  repeat {repeat + 1} {name:20s} produce() {args.records / loop:>10,.0f}/s  "
                f"with flush {args.records / total:>10,.0f}/s",
                flush=True,
            )
    out: dict[str, Any] = {}
    for name in variants:
        out[name] = {
            "produce_calls_per_s": round(max(calls[name])),
            "end_to_end_per_s": round(max(e2e[name])),
            "end_to_end_per_s_median": round(statistics.median(e2e[name])),
            "produce_calls_per_s_all": [round(x) for x in calls[name]],
            "end_to_end_per_s_all": [round(x) for x in e2e[name]],
        }
    for name in variants:
        if name == "plain":
            continue
        for metric in ("produce_calls_per_s", "end_to_end_per_s", "end_to_end_per_s_median"):
            out[name][f"ratio_{metric}"] = round(out[name][metric] / out["plain"][metric], 3)
        # The ratio within each round (plain measured just before, same broker state).
        out[name]["ratio_end_to_end_per_round"] = [
            round(o / p, 3) for o, p in zip(e2e[name], e2e["plain"], strict=True)
        ]
    return out


def python_path(config: dict[str, Any]) -> OrderedProducer:
    """An OrderedProducer with the pure-Python send path (as without a C compiler)."""
    saved = producer_module._FAST
    producer_module._FAST = None
    try:
        return OrderedProducer(config)
    finally:
        producer_module._FAST = saved


def client_cost(
    zookeeper: str, root: str, controller: Controller, bootstrap: str, args: argparse.Namespace
) -> dict[str, Any]:
    """ns per ``produce()`` call with no broker reachable: the client-side cost only.

    librdkafka queues the records (nothing is sent), so the broker and the network,
    which dominate and blur the end-to-end rates on a small machine, are out of the
    picture. The adopted topic's layout still comes from ZooKeeper.
    """
    keys = [b"key-%d" % i for i in range(KEY_COUNT)]
    topic = create_topic(bootstrap, args.partitions)
    controller.adopt(topic)
    offline = {
        **COMMON,
        "bootstrap.servers": "127.0.0.1:1",
        "queue.buffering.max.messages": 2_000_000,
        "queue.buffering.max.kbytes": 4_000_000,
        "linger.ms": 60_000,
        "log_level": 0,
    }
    ordered_conf = {
        **offline,
        "ordered.zookeeper.connect": zookeeper,
        "ordered.zookeeper.root": root,
    }
    variants: dict[str, tuple[Callable[[], Any], str]] = {
        "plain": (lambda: confluent_kafka.Producer(offline), topic),
        "ordered_default": (lambda: OrderedProducer(ordered_conf), topic),
        "ordered_header_on": (
            lambda: OrderedProducer({**ordered_conf, "ordered.epoch.header": True}),
            topic,
        ),
        "ordered_python_path": (lambda: python_path(ordered_conf), topic),
        "ordered_unadopted": (lambda: OrderedProducer(ordered_conf), "not-adopted"),
    }
    count = args.client_records
    best: dict[str, float] = {}
    for _ in range(args.client_repeats):
        for name, (make, target) in variants.items():
            producer = make()
            if isinstance(producer, OrderedProducer):
                # The topic-id check of the first use asks Kafka once; this client has no
                # broker by design, so that one question goes to the benchmark's cluster.
                producer._topics.topic_ids = TopicIds.for_client({"bootstrap.servers": bootstrap})
            producer.produce(target, VALUE, keys[0])
            gc.collect()
            produce = producer.produce
            started = time.perf_counter()
            for i in range(count):
                produce(target, VALUE, keys[i % KEY_COUNT])
            ns = (time.perf_counter() - started) / count * 1e9
            best[name] = min(best.get(name, ns), ns)
            producer.purge()
            producer.poll(0)
            if isinstance(producer, OrderedProducer):
                producer.close()
    return {
        name: {"ns_per_record": round(ns), "ratio_vs_plain": round(best["plain"] / ns, 3)}
        for name, ns in best.items()
    }
