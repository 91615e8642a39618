"""The asyncio clients against confluent's: event-loop lag through an expansion, throughput.

    .venv/bin/python benchmarks/bench_aio.py [--bootstrap B --zookeeper Z] \
        [--records 1000000] [--rounds 3] [--lag-records 100000] [--lag-rounds 3] [--out FILE]

Two parts, each in alternating rounds (ours first in odd rounds, confluent's first in
even ones), on fresh uuid-named topics adopted under a scratch store root:

* **Loop lag.** A probe task sleeps 10 ms at a time on the event loop and records how
  late each wake-up is, while one producer writes ``--lag-records`` keyed records to a
  2-partition topic, the topic is expanded to 3 half-way (the controller's expand, run
  in a thread, the producer writing on meanwhile), and one consumer, started once the
  new partition has records, reads every record while the producer writes the last
  quarter. With the ordered clients that run includes the producer's barrier (the
  route switch) and a gate wait (the new partition waits until the consumer has read
  the old ones' tails: ``blocks`` in the round's facts); confluent's ``AIOProducer``
  and ``AIOConsumer`` run the same schedule on the same kind of topic (they ignore the
  layout). Per side: the worst lag of each round, its p99.
* **Throughput.** Keyed 100-byte records (1000 keys): ``OrderedAIOProducer`` against
  ``AIOProducer`` writing ``--records`` each, ``produce`` awaited per record then one
  ``flush``; ``OrderedAIOConsumer`` against ``AIOConsumer`` reading a backlog of
  ``--records`` with ``consume(500, 1.0)``, a fresh group per round, timed from the first
  record to the last; each client with its own defaults, then again with
  ``fetch.queue.backoff.ms=10`` for both (the ordered consumer's default; librdkafka's
  1000 ms alone slows a backlog read). Ratios are ours/theirs per round (paired),
  median and range.

Writes ``benchmarks/results/aio.json`` (or ``--out``); ``scripts/bench_table.py --add
aio`` puts its rows into the README's table.
"""

from __future__ import annotations

import asyncio
import os
import statistics
import sys
import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka.aio import AIOConsumer, AIOProducer

sys.path.insert(0, str(Path(__file__).resolve().parent))
from _common import environment, parser, scratch_root, servers, write_results

from coordinator.control.controller import Controller
from coordinator.kernel.errors import UnknownTopicError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from ordered import OrderedAIOConsumer, OrderedAIOProducer
from ordered.verify.loop_lag import LoopLagProbe

RESULTS = Path(__file__).resolve().parent / "results" / "aio.json"
KEYS = [f"key-{i:04d}".encode() for i in range(1000)]
VALUE = b"v" * 100


class Cluster:
    """Topics and layout changes for the rounds (one admin, one controller)."""

    def __init__(self, bootstrap: str, zookeeper: str, client: Any, root: str) -> None:
        self.bootstrap, self.zookeeper, self.root = bootstrap, zookeeper, root
        self.admin = KafkaAdmin(bootstrap, timeout=30.0)
        self.controller = Controller(LayoutStore(client, root), KafkaAdmin(bootstrap, timeout=30.0))

    def topic(self, partitions: int) -> str:
        name = f"bench-aio-{uuid.uuid4().hex[:10]}"
        self.admin.create_topics([name], partitions)
        deadline = time.monotonic() + 30
        while True:  # the new topic's metadata reaches the admin client a moment later
            try:
                self.controller.adopt(name)
                return name
            except UnknownTopicError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def drop(self, topic: str) -> None:
        self.admin.delete_topics([topic])

    def conf(self, ours: bool, **extra: Any) -> dict[str, Any]:
        conf: dict[str, Any] = {"bootstrap.servers": self.bootstrap, **extra}
        if ours:
            conf["ordered.zookeeper.connect"] = self.zookeeper
            conf["ordered.zookeeper.root"] = self.root
        return conf

    def producer(self, ours: bool) -> Any:
        conf = self.conf(ours, **{"linger.ms": 5})
        return OrderedAIOProducer(conf) if ours else AIOProducer(conf)

    def consumer(self, ours: bool, group: str, **extra: Any) -> Any:
        conf = self.conf(ours, **{"group.id": group, "auto.offset.reset": "earliest", **extra})
        return OrderedAIOConsumer(conf) if ours else AIOConsumer(conf)


async def _produce(producer: Any, topic: str, first: int, count: int) -> None:
    for i in range(first, first + count):
        await producer.produce(topic, VALUE, KEYS[i % len(KEYS)])


async def _read(consumer: Any, topic: str, count: int, timeout: float = 600.0) -> float:
    """Read ``count`` records; return the seconds from the first to the last."""
    await consumer.subscribe([topic])
    got, first = 0, None
    deadline = time.monotonic() + timeout
    while got < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"read {got} of {count} records of {topic} in {timeout} s")
        # No more than are still due: the last call returns with the last record
        # instead of waiting out its timeout for a full batch (which would be timed).
        for msg in await consumer.consume(min(500, count - got), 1.0):
            if msg.error() is None:
                if first is None:
                    first = time.perf_counter()
                got += 1
    return time.perf_counter() - (first or time.perf_counter())


async def lag_round(cluster: Cluster, ours: bool, records: int) -> dict[str, Any]:
    """One lag round (see the module's docstring)."""
    loop = asyncio.get_running_loop()
    topic = await loop.run_in_executor(None, cluster.topic, 2)
    probe = LoopLagProbe()
    probe.start()
    started = time.perf_counter()
    producer = cluster.producer(ours)
    consumer = cluster.consumer(ours, f"lag-{uuid.uuid4().hex[:8]}")
    half, eighth = records // 2, records // 8
    await _produce(producer, topic, 0, half)
    await producer.flush()
    # The producer writes on while the layout changes (ours: through the barrier's
    # switch) and after it; the consumer joins once the new partition has records and
    # the old ones a backlog, so the new one waits at its gate (ours) as the rest is written.
    expanding = loop.run_in_executor(None, cluster.controller.expand, topic, 3)
    await _produce(producer, topic, half, eighth)
    await expanding
    await _produce(producer, topic, half + eighth, eighth)
    await producer.flush()
    reading = loop.create_task(_read(consumer, topic, records))
    await _produce(producer, topic, half + 2 * eighth, records - half - 2 * eighth)
    await producer.flush()
    await reading
    facts: dict[str, Any] = {}
    if ours:
        metrics = consumer.consumer.metrics
        facts = {k: metrics.get(k, 0) for k in ("blocks", "held", "gates_opened")}
        route = await loop.run_in_executor(None, producer.producer.layout, topic)
        facts["producer_partitions"] = None if route is None else route.active
    await consumer.close()
    await producer.close()
    await probe.stop()
    lag = probe.summary()
    await loop.run_in_executor(None, cluster.drop, topic)
    lag["seconds"] = round(time.perf_counter() - started, 2)
    return {**lag, **facts}


async def produce_round(cluster: Cluster, ours: bool, records: int) -> tuple[float, str]:
    """Write ``records`` through a fresh producer; (records/s, the topic written)."""
    loop = asyncio.get_running_loop()
    topic = await loop.run_in_executor(None, cluster.topic, 4)
    producer = cluster.producer(ours)
    await producer.produce(topic, VALUE, KEYS[0])  # first use (the ordered topic check)
    await producer.flush()
    started = time.perf_counter()
    await _produce(producer, topic, 1, records)
    await producer.flush()
    rate = records / (time.perf_counter() - started)
    await producer.close()
    return rate, topic


async def consume_round(
    cluster: Cluster, ours: bool, topic: str, records: int, **extra: Any
) -> float:
    """Read the backlog ``topic`` with a fresh group (``extra`` settings); records/s."""
    consumer = cluster.consumer(ours, f"tp-{uuid.uuid4().hex[:8]}", **extra)
    try:
        seconds = await _read(consumer, topic, records)
    finally:
        await consumer.close()
    return records / seconds


def _spread(values: list[float]) -> dict[str, float]:
    return {
        "median": round(statistics.median(values), 3),
        "min": round(min(values), 3),
        "max": round(max(values), 3),
    }


GOALS = {
    "producer": ">= 0.9",
    "consumer": ">= 0.9",
    "consumer_same_backoff": "report",
    "lag": "<= 50 ms or <= 1.5x",
}
CONSUMER_PARTS = {
    "consumer": {},
    # The ordered consumer's default (librdkafka's is 1000 ms, which alone slows a
    # backlog read): set for both, the ratio is the asyncio shell's and the layer's cost.
    "consumer_same_backoff": {"fetch.queue.backoff.ms": 10},
}


def _sides(r: int) -> tuple[bool, bool]:
    """Who goes first in round ``r``: ours in even rounds (from 0), theirs in odd ones."""
    return (True, False) if r % 2 == 0 else (False, True)


async def run(args: Any, cluster: Cluster) -> dict[str, Any]:
    """Every round of both parts; the result dict."""
    loads: list[float] = []
    lag: dict[str, list[dict[str, Any]]] = {"ours": [], "theirs": []}
    for r in range(args.lag_rounds):
        for ours in _sides(r):
            side = "ours" if ours else "theirs"
            lag[side].append(await lag_round(cluster, ours, args.lag_records))
            print(f"[lag] round {r + 1} {side}: {lag[side][-1]}", flush=True)
        loads.append(os.getloadavg()[0])
    rates: dict[str, dict[str, list[float]]] = {
        part: {"ours": [], "theirs": []} for part in ("producer", *CONSUMER_PARTS)
    }
    backlog = None
    for r in range(args.rounds):
        for ours in _sides(r):
            side = "ours" if ours else "theirs"
            rate, topic = await produce_round(cluster, ours, args.records)
            rates["producer"][side].append(round(rate))
            print(f"[producer] round {r + 1} {side}: {rate:.0f}/s", flush=True)
            if backlog is None and ours:
                backlog = topic  # written by the ordered producer: the consumers' backlog
            else:
                await asyncio.get_running_loop().run_in_executor(None, cluster.drop, topic)
        loads.append(os.getloadavg()[0])
    assert backlog is not None
    for part, extra in CONSUMER_PARTS.items():
        for r in range(args.rounds):
            for ours in _sides(r):
                side = "ours" if ours else "theirs"
                rate = await consume_round(cluster, ours, backlog, args.records + 1, **extra)
                rates[part][side].append(round(rate))
                print(f"[{part}] round {r + 1} {side}: {rate:.0f}/s", flush=True)
            loads.append(os.getloadavg()[0])
    await asyncio.get_running_loop().run_in_executor(None, cluster.drop, backlog)
    out: dict[str, Any] = {"lag": {}, "throughput": {}, "goals": GOALS}
    for side, rounds in lag.items():
        worst = [x["max_ms"] for x in rounds]
        out["lag"][side] = {
            "rounds": rounds,
            "max_ms": max(worst),
            "median_max_ms": statistics.median(worst),
        }
    ours_max, theirs_max = out["lag"]["ours"]["max_ms"], out["lag"]["theirs"]["max_ms"]
    out["lag"]["ratio"] = round(ours_max / theirs_max, 3) if theirs_max else None
    out["lag"]["bound_ms"] = max(50.0, 1.5 * theirs_max)
    out["lag"]["holds"] = ours_max <= out["lag"]["bound_ms"]
    out["lag"]["gate_waits"] = sum(x.get("blocks", 0) for x in lag["ours"])
    for part, sides in rates.items():
        ratios = [o / t for o, t in zip(sides["ours"], sides["theirs"], strict=True)]
        out["throughput"][part] = {
            "ours": sides["ours"],
            "theirs": sides["theirs"],
            "ratios": [round(x, 3) for x in ratios],
            "ratio": _spread(ratios),
            "ours_median": round(statistics.median(sides["ours"])),
            "theirs_median": round(statistics.median(sides["theirs"])),
        }
    out["load_average_1m_per_round"] = [round(x, 2) for x in loads]
    return out


def main(argv: list[str] | None = None) -> int:
    """Run the benchmark and write its JSON."""
    p = parser(__doc__)
    p.add_argument("--records", type=int, default=1_000_000, help="records per throughput round")
    p.add_argument("--rounds", type=int, default=3, help="throughput rounds per side")
    p.add_argument("--lag-records", type=int, default=100_000, help="records per lag round")
    p.add_argument("--lag-rounds", type=int, default=3, help="lag rounds per side")
    p.add_argument("--out", type=Path, default=RESULTS, help="the JSON written")
    args = p.parse_args(argv)
    with servers(args, "aio") as (bootstrap, zookeeper), scratch_root(zookeeper) as (client, root):
        cluster = Cluster(bootstrap, zookeeper, client, root)
        started = time.perf_counter()
        result = asyncio.run(run(args, cluster))
    results = {
        **environment("aio"),
        "records": args.records,
        "rounds": args.rounds,
        "lag_records": args.lag_records,
        "lag_rounds": args.lag_rounds,
        "record_bytes": len(VALUE),
        "keys": len(KEYS),
        "seconds": round(time.perf_counter() - started, 1),
        **result,
    }
    write_results(args.out, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
