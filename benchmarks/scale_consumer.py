"""The consumer's scale curves for ``bench_scale.py``: ZooKeeper load, gate wait.

Not a benchmark of its own: ``bench_scale.py`` runs them (``--only zookeeper gatewait``).

ZooKeeper requests are counted by the server (``mntr``'s ``zk_packets_received``), so
they include everything the consumer's session sends (checks, reloads, pings). The
benchmark's own ZooKeeper client idles meanwhile; the producers are plain confluent
ones (no ZooKeeper).
"""

from __future__ import annotations

import argparse
import os
import socket
import statistics
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, Producer

from coordinator.control.controller import Controller
from coordinator.kernel.history import load_history
from coordinator.kernel.zk import close_client, make_client, start_client
from linear_hash import Layout
from ordered.consumer import OrderedConsumer
from ordered.consumer_config import FETCH_QUEUE_BACKOFF_MS
from ordered.producer import OrderedProducer

__all__ = ["consumer_load", "gate_wait", "lockstep", "zk_packets", "zookeeper_capacity"]

ROOT = Path(__file__).resolve().parents[1]
PARTITIONS = 4

# A plain producer writing keyed records where the topic's first layout puts them, as
# fast as it can, until stdin closes; prints the records it wrote.
LIVE_PRODUCER = r"""
import sys
from confluent_kafka import Producer
from linear_hash import Layout
bootstrap, topic, partitions = sys.argv[1], sys.argv[2], int(sys.argv[3])
layout = Layout(partitions, partitions, 0)
keys = [b"k%d" % i for i in range(10_000)]
parts = [layout.partition_for(k) for k in keys]
producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
print("ready", flush=True)
import select
n = 0
while not select.select([sys.stdin], [], [], 0)[0]:
    for _ in range(1000):
        j = n % len(keys)
        try:
            producer.produce(topic, b"x" * 100, keys[j], partition=parts[j])
            n += 1
        except BufferError:
            producer.poll(0.01)
    producer.poll(0)
producer.flush(30)
print(n, flush=True)
"""


FAST_BACKOFF_MS = FETCH_QUEUE_BACKOFF_MS  # 10
"""``fetch.queue.backoff.ms`` of the second set of backlog rows (librdkafka's default: 1000).

With the default, librdkafka postpones a partition's next fetch by a whole second once
its queue holds ``queued.min.messages``; a consumer faster than the fetches then drains
the queue and waits. A backlog read's rate is decided by how many of those seconds fall
into it (runs of 1M records took 1.8 s + k x 0.97 s, k = 1..6, for either consumer), not
by the consumer's own cost. With 10 ms both read at their own speed. It is the
ordered consumer's own default (``ordered.consumer_config.FETCH_QUEUE_BACKOFF_MS``), so
the first set of rows (each client with its defaults) compares a plain consumer with
librdkafka's second against an ordered one with 10 ms, as a user who swaps one for the
other gets them.
"""


def _zk_port(zookeeper: str) -> int:
    return int(zookeeper.split(",")[0].split("/")[0].rsplit(":", 1)[1])


def zk_packets(zookeeper: str) -> int:
    """ZooKeeper's ``zk_packets_received`` (``mntr``): requests the server has read."""
    with socket.create_connection(("127.0.0.1", _zk_port(zookeeper)), timeout=5) as sock:
        sock.sendall(b"mntr")
        chunks = []
        while chunk := sock.recv(65536):
            chunks.append(chunk)
    for line in b"".join(chunks).decode().splitlines():
        name, _, value = line.partition("\t")
        if name == "zk_packets_received":
            return int(value)
    raise RuntimeError("mntr has no zk_packets_received")


def zookeeper_capacity(zookeeper: str, seconds: float) -> float:
    """Requests per second one ZooKeeper server here answers (``exists``, 8 clients)."""
    clients = [start_client(make_client(zookeeper), 15.0) for _ in range(8)]
    try:
        clients[0].ensure_path("/scale-capacity")
        done = 0
        deadline = time.monotonic() + seconds
        started = time.monotonic()
        while time.monotonic() < deadline:
            results = [c.exists_async("/scale-capacity") for c in clients for _ in range(250)]
            for r in results:
                r.get(10)
            done += len(results)
        return done / (time.monotonic() - started)
    finally:
        for c in clients:
            close_client(c)


def _fill(bootstrap: str, topic: str, count: int, layout: Layout | None = None) -> None:
    """``count`` keyed records where ``layout`` (default: the first) puts them."""
    layout = layout or Layout(PARTITIONS, PARTITIONS, 0)
    keys = [b"k%d" % i for i in range(10_000)]
    parts = [layout.partition_for(k) for k in keys]
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for i in range(count):
        j = i % len(keys)
        while True:
            try:
                producer.produce(topic, b"x" * 100, keys[j], partition=parts[j])
                break
            except BufferError:
                producer.poll(0.05)
    if producer.flush(120) != 0:
        raise RuntimeError("fill did not complete")


def _backlog(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    args: argparse.Namespace,
    create_topics: Callable[[str, list[str], int], None],
    prefix: str,
) -> tuple[str, dict[str, Any], dict[str, Any]]:
    """An adopted topic holding ``args.zk_records``; a plain and an ordered configuration."""
    topic = f"{prefix}-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, [topic], PARTITIONS)
    controller.adopt(topic)
    _fill(bootstrap, topic, args.zk_records)
    base = {
        "bootstrap.servers": bootstrap,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
    }
    ordered_cfg = {
        **base,
        "ordered.zookeeper.connect": zookeeper,
        "ordered.zookeeper.root": root,
    }
    if args.consumer_session_timeout_ms is not None:
        ordered_cfg["ordered.zookeeper.session.timeout.ms"] = args.consumer_session_timeout_ms
    return topic, base, ordered_cfg


def _read_backlog(
    consumer: Any, topic: str, count: int, num: int, zookeeper: str
) -> tuple[float, float, float]:
    """Read ``count`` records with ``consume(num)``: records/s, ZooKeeper requests/s, CPU.

    Timed from the first batch (the subscription's start-up is not counted). The CPU
    figure is the reading thread's CPU time (``time.thread_time``) per record, in
    microseconds: what ``consume`` costs the application's thread, librdkafka's work
    on it included, whatever the other processes on the machine do meanwhile.
    """
    consumer.subscribe([topic])
    got = timed = 0
    started = None
    packets0 = 0
    cpu0 = 0.0
    deadline = time.monotonic() + 600
    while got < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"read {got} of {count} records")
        batch = consumer.consume(num, 1.0)
        records = sum(1 for m in batch if m.error() is None)
        got += records
        if started is None:
            if records:  # the rate counts from the end of the first batch
                started = time.perf_counter()
                packets0 = zk_packets(zookeeper)
                cpu0 = time.thread_time()
        else:
            timed += records
    elapsed = time.perf_counter() - (started or time.perf_counter())
    cpu = time.thread_time() - cpu0
    packets = zk_packets(zookeeper) - packets0
    return (
        timed / max(elapsed, 1e-9),
        packets / max(elapsed, 1e-9),
        cpu * 1e6 / max(timed, 1),
    )


def consumer_load(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    args: argparse.Namespace,
    create_topics: Callable[[str, list[str], int], None],
) -> dict[str, Any]:
    """ZooKeeper requests per second of one OrderedConsumer, by throughput, and idle.

    Rows: a backlog read at full speed with small and large batches (the plain
    consumer's rate in the same run alongside), a consumer that keeps up with a
    producer writing as fast as it can, and an idle consumer.
    """
    topic, base, ordered_cfg = _backlog(
        bootstrap, zookeeper, root, controller, args, create_topics, "scale-zk"
    )
    rows: list[dict[str, Any]] = []
    for backoff, num in [(b, n) for b in (None, FAST_BACKOFF_MS) for n in args.zk_batches]:
        # None: each client's defaults (the ordered consumer's include 10 ms); else the
        # same fetch.queue.backoff.ms set for both.
        tuned = {} if backoff is None else {"fetch.queue.backoff.ms": backoff}
        plain_rates, rates, loads = [], [], []
        plain_cpu, cpu = [], []
        for round_no in range(args.zk_rounds):
            group = f"scale-zk-{uuid.uuid4().hex[:8]}"
            # Alternately first: the second read of a pair meets what the first left
            # behind (a closing client, the broker's caches), so neither side always does.
            for side in ("plain", "ordered") if round_no % 2 == 0 else ("ordered", "plain"):
                consumer = (
                    Consumer({**base, **tuned, "group.id": group})
                    if side == "plain"
                    else OrderedConsumer({**ordered_cfg, **tuned, "group.id": f"{group}-o"})
                )
                try:
                    rate, load, used = _read_backlog(
                        consumer, topic, args.zk_records, num, zookeeper
                    )
                finally:
                    consumer.close()
                if side == "plain":
                    plain_rates.append(rate)
                    plain_cpu.append(used)
                else:
                    rates.append(rate)
                    loads.append(load)
                    cpu.append(used)
        settings = (
            "each client's defaults"
            if backoff is None
            else f"fetch.queue.backoff.ms={backoff} for both"
        )
        row = {
            "mode": f"backlog, consume({num}), {settings}",
            "fetch_queue_backoff_ms": backoff,
            "records_per_s": round(max(rates)),
            "plain_records_per_s": round(max(plain_rates)),
            "ratio_vs_plain": round(max(rates) / max(plain_rates), 3),
            "ratio_per_round": [round(o / p, 3) for o, p in zip(rates, plain_rates, strict=True)],
            # Each round's pair ran back to back: the median of their ratios is steadier
            # than best against best on a shared machine.
            "ratio_median_of_rounds": round(
                statistics.median(o / p for o, p in zip(rates, plain_rates, strict=True)), 3
            ),
            "zookeeper_requests_per_s": round(max(loads), 1),
            "zookeeper_requests_per_s_per_round": [round(x, 1) for x in loads],
            # The reading thread's CPU per record; the ratio is plain's over ours (above
            # 1: ours needs less), per round, as the rate's ratio.
            "thread_cpu_us_per_record": round(statistics.median(cpu), 3),
            "plain_thread_cpu_us_per_record": round(statistics.median(plain_cpu), 3),
            "cpu_ratio_per_round": [round(p / o, 3) for p, o in zip(plain_cpu, cpu, strict=True)],
            "cpu_ratio_median_of_rounds": round(
                statistics.median(p / o for p, o in zip(plain_cpu, cpu, strict=True)), 3
            ),
            "first_in_round": ["plain" if i % 2 == 0 else "ordered" for i in range(args.zk_rounds)],
        }
        if backoff is not None:
            row.update(
                _lockstep_summary(_lockstep_reads(base, ordered_cfg, tuned, topic, args, num))
            )
        rows.append(row)
        print(f"  zookeeper load: {row}", flush=True)
    rows.append(_live(bootstrap, zookeeper, topic, ordered_cfg, args))
    print(f"  zookeeper load: {rows[-1]}", flush=True)
    producer_row = _producer_load(bootstrap, zookeeper, topic, ordered_cfg, args)
    print(f"  zookeeper load: {producer_row}", flush=True)
    # What the server reads with no consumer at all (the benchmark's own session's
    # pings): the idle consumer's own rate is the difference.
    base0, wall0 = zk_packets(zookeeper), time.monotonic()
    time.sleep(args.zk_idle_seconds)
    baseline = (zk_packets(zookeeper) - base0) / (time.monotonic() - wall0)
    idle = OrderedConsumer({**ordered_cfg, "group.id": f"scale-zk-{uuid.uuid4().hex}"})
    try:
        _read_backlog(idle, topic, args.zk_records, 10_000, zookeeper)
        # The live row's producer wrote more behind those: idle means caught up.
        while any(m.error() is None for m in idle.consume(10_000, 1.0)):
            pass
        idle0, wall0 = zk_packets(zookeeper), time.monotonic()
        while time.monotonic() - wall0 < args.zk_idle_seconds:
            idle.consume(10_000, 0.5)
        idle_load = (zk_packets(zookeeper) - idle0) / (time.monotonic() - wall0)
    finally:
        idle.close()
    capacity = zookeeper_capacity(zookeeper, 3.0)
    # The headline: the largest batches without librdkafka's 1 s fetch backoff, where the
    # rate is the consumers' own per-record cost (see FAST_BACKOFF_MS).
    main = rows[2 * len(args.zk_batches) - 1]
    full = max(r["zookeeper_requests_per_s"] for r in rows)
    return {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "records": args.zk_records,
        "rows": rows,
        "full_speed_records_per_s": main["records_per_s"],
        "plain_records_per_s": main["plain_records_per_s"],
        # Read in lockstep when measured so (the same moments of the machine for both;
        # read apart, a pair's ratio moved by 0.15 from round to round here), else the
        # median of the paired sequential reads; both are in the row.
        "ratio_vs_plain": main.get(
            "lockstep_ratio_median_of_rounds", main["ratio_median_of_rounds"]
        ),
        "ratio_method": "lockstep" if "lockstep_ratio_median_of_rounds" in main else "paired",
        "ratio_sequential_median_of_rounds": main["ratio_median_of_rounds"],
        "ratio_best_vs_best": main["ratio_vs_plain"],
        "zookeeper_requests_per_s_full_speed": full,
        "zookeeper_requests_per_s_idle": round(idle_load, 2),
        "zookeeper_requests_per_s_idle_baseline": round(baseline, 2),
        "zookeeper_requests_per_s_idle_consumer": round(max(0.0, idle_load - baseline), 2),
        "zookeeper_server_requests_per_s": round(capacity),
        # A 3-node ensemble serves reads from every node and writes through the leader;
        # consumers only read, so reads scale with the nodes (at ~70% target load).
        "consumers_per_3_node_ensemble_at_full_speed": int(3 * 0.7 * capacity / max(full, 1.0)),
        "producer": producer_row,
        # A producer's requests are reads too (its watches, its session's pings); its few
        # writes (registration, an ack per epoch) go through the leader, once per epoch.
        # Busy or idle, whichever cost more (both are mostly the session's pings).
        "producers_per_3_node_ensemble": int(3 * 0.7 * capacity / _producer_cost(producer_row)),
    }


def _lockstep_round(
    consumers: dict[str, Any], topic: str, count: int, num: int
) -> dict[str, dict[str, float]]:
    """Both consumers read ``count`` records, one ``consume(num)`` each in turn.

    Each side is timed over its own calls only (wall and thread CPU, from its first
    batch on), so both meet the same moments of the machine; which side calls first
    alternates from call to call.
    """
    for consumer in consumers.values():
        consumer.subscribe([topic])
    got = dict.fromkeys(consumers, 0)
    timed = dict.fromkeys(consumers, 0)
    wall = dict.fromkeys(consumers, 0.0)
    cpu = dict.fromkeys(consumers, 0.0)
    deadline = time.monotonic() + 600
    turn = 0
    while min(got.values()) < count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"read {got} of {count} records")
        turn += 1
        order = list(consumers) if turn % 2 else list(reversed(consumers))
        for side in order:
            if got[side] >= count:
                continue
            w0, c0 = time.perf_counter(), time.thread_time()
            batch = consumers[side].consume(num, 1.0)
            records = sum(1 for m in batch if m.error() is None)
            if got[side]:  # from the end of the first batch, as _read_backlog
                wall[side] += time.perf_counter() - w0
                cpu[side] += time.thread_time() - c0
                timed[side] += records
            got[side] += records
    return {
        side: {
            "records_per_s": timed[side] / max(wall[side], 1e-9),
            "thread_cpu_us_per_record": cpu[side] * 1e6 / max(timed[side], 1),
        }
        for side in consumers
    }


def _lockstep_reads(
    base: dict[str, Any],
    ordered_cfg: dict[str, Any],
    tuned: dict[str, Any],
    topic: str,
    args: argparse.Namespace,
    num: int,
) -> list[dict[str, dict[str, float]]]:
    """``args.zk_rounds`` lockstep reads, each by a new pair of consumers in new groups."""
    rounds = []
    for _ in range(args.zk_rounds):
        group = f"scale-ls-{uuid.uuid4().hex[:8]}"
        consumers: dict[str, Any] = {
            "plain": Consumer({**base, **tuned, "group.id": group}),
            "ordered": OrderedConsumer({**ordered_cfg, **tuned, "group.id": f"{group}-o"}),
        }
        try:
            rounds.append(_lockstep_round(consumers, topic, args.zk_records, num))
        finally:
            for consumer in consumers.values():
                consumer.close()
    return rounds


def _lockstep_summary(rounds: list[dict[str, dict[str, float]]]) -> dict[str, Any]:
    """The ratios of lockstep reads (:func:`_lockstep_reads`): per round and their median."""
    ratios = [r["ordered"]["records_per_s"] / r["plain"]["records_per_s"] for r in rounds]
    cpu = [
        r["plain"]["thread_cpu_us_per_record"] / r["ordered"]["thread_cpu_us_per_record"]
        for r in rounds
    ]
    return {
        "lockstep_ratio_per_round": [round(x, 3) for x in ratios],
        "lockstep_ratio_median_of_rounds": round(statistics.median(ratios), 3),
        "lockstep_cpu_ratio_per_round": [round(x, 3) for x in cpu],
        "lockstep_cpu_ratio_median_of_rounds": round(statistics.median(cpu), 3),
    }


def lockstep(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    args: argparse.Namespace,
    create_topics: Callable[[str, list[str], int], None],
) -> dict[str, Any]:
    """The backlog rows read in lockstep: each consumer's rate over its own calls.

    A diagnostic beside :func:`consumer_load` (``bench_scale.py --only lockstep``): read
    alone, a pair's ratio moves by up to 0.15 from round to round here; in lockstep the
    machine's moments are shared, and what is left is each consumer's own cost per
    call (``docs/consumer.md``, "What a batch costs").
    """
    topic, base, ordered_cfg = _backlog(
        bootstrap, zookeeper, root, controller, args, create_topics, "scale-ls"
    )
    tuned = {"fetch.queue.backoff.ms": FAST_BACKOFF_MS}
    rows = []
    for num in args.zk_batches:
        rounds = _lockstep_reads(base, ordered_cfg, tuned, topic, args, num)
        summary = _lockstep_summary(rounds)
        row = {
            "mode": f"lockstep, consume({num}), fetch.queue.backoff.ms={FAST_BACKOFF_MS} for both",
            "ratio_per_round": summary["lockstep_ratio_per_round"],
            "ratio_median_of_rounds": summary["lockstep_ratio_median_of_rounds"],
            "cpu_ratio_per_round": summary["lockstep_cpu_ratio_per_round"],
            "records_per_s": {
                side: round(statistics.median(r[side]["records_per_s"] for r in rounds))
                for side in ("plain", "ordered")
            },
            "thread_cpu_us_per_record": {
                side: round(
                    statistics.median(r[side]["thread_cpu_us_per_record"] for r in rounds), 3
                )
                for side in ("plain", "ordered")
            },
        }
        rows.append(row)
        print(f"  lockstep: {row}", flush=True)
    return {
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "records": args.zk_records,
        "rows": rows,
    }


def _live(
    bootstrap: str, zookeeper: str, topic: str, config: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """A consumer that has caught up, reading what a fast producer writes meanwhile."""
    consumer = OrderedConsumer(
        {**config, "group.id": f"scale-zk-{uuid.uuid4().hex}", "auto.offset.reset": "latest"}
    )
    proc = None
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while not consumer.assignment() and time.monotonic() < deadline:
            consumer.consume(10_000, 0.2)
        for _ in range(5):
            consumer.consume(10_000, 0.2)  # positions at the end
        proc = subprocess.Popen(
            [sys.executable, "-c", LIVE_PRODUCER, bootstrap, topic, str(PARTITIONS)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )
        assert proc.stdout is not None and proc.stdin is not None
        if proc.stdout.readline().strip() != b"ready":
            raise RuntimeError("the live producer did not start")
        got = 0
        checks0 = consumer.metrics["layout_checks"]
        packets0, started = zk_packets(zookeeper), time.perf_counter()
        while time.perf_counter() - started < args.live_seconds:
            got += sum(1 for m in consumer.consume(500, 0.5) if m.error() is None)
        elapsed = time.perf_counter() - started
        packets = zk_packets(zookeeper) - packets0
        checks = consumer.metrics["layout_checks"] - checks0
        proc.stdin.close()
        written = int(proc.stdout.readline())
        proc.wait(30)
    finally:
        if proc is not None and proc.poll() is None:
            proc.kill()
        consumer.close()
    return {
        "mode": "caught up with a producer at full speed, consume(500)",
        "records_per_s": round(got / elapsed),
        "producer_records_per_s": round(written / elapsed),
        "zookeeper_requests_per_s": round(packets / elapsed, 1),
        "layout_checks_per_s": round(checks / elapsed, 1),
    }


def _producer_cost(row: dict[str, Any]) -> float:
    """A producer's requests per second for capacity: busy or idle, the higher (>= 0.1)."""
    return max(row["zookeeper_requests_per_s"], row["zookeeper_requests_per_s_idle"], 0.1)


def _producer_load(
    bootstrap: str, zookeeper: str, topic: str, config: dict[str, Any], args: argparse.Namespace
) -> dict[str, Any]:
    """ZooKeeper requests per second of one OrderedProducer writing at full speed, and idle.

    Server-wide counts, less what the server reads with no producer (the benchmark's
    own session), measured just before.
    """
    base0, wall0 = zk_packets(zookeeper), time.monotonic()
    time.sleep(args.zk_idle_seconds)
    baseline = (zk_packets(zookeeper) - base0) / (time.monotonic() - wall0)
    producer_cfg = {
        k: v for k, v in config.items() if k.startswith("ordered.") or k == "bootstrap.servers"
    }
    producer = OrderedProducer({**producer_cfg, "linger.ms": 5})
    keys = [b"k%d" % i for i in range(10_000)]
    try:
        producer.produce(topic, b"x" * 100, keys[0])  # the first use: the topic's layout
        producer.flush(30)
        written = 0
        packets0, started = zk_packets(zookeeper), time.monotonic()
        while time.monotonic() - started < args.live_seconds:
            for _ in range(1000):
                try:
                    producer.produce(topic, b"x" * 100, keys[written % len(keys)])
                    written += 1
                except BufferError:
                    producer.poll(0.01)
            producer.poll(0)
        elapsed = time.monotonic() - started
        busy = (zk_packets(zookeeper) - packets0) / elapsed
        producer.flush(60)
        idle0, wall0 = zk_packets(zookeeper), time.monotonic()
        while time.monotonic() - wall0 < args.zk_idle_seconds:
            producer.poll(0.5)
        idle = (zk_packets(zookeeper) - idle0) / (time.monotonic() - wall0)
    finally:
        producer.close()
    return {
        "mode": "one OrderedProducer at full speed, then idle",
        "records_per_s": round(written / elapsed),
        "zookeeper_requests_per_s": round(max(0.0, busy - baseline), 2),
        "zookeeper_requests_per_s_idle": round(max(0.0, idle - baseline), 2),
        "zookeeper_requests_per_s_baseline": round(baseline, 2),
    }


def gate_wait(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    args: argparse.Namespace,
    create_topics: Callable[[str, list[str], int], None],
) -> list[dict[str, Any]]:
    """How long a new partition stays gated after an expansion under a lagging group.

    A topic of 4 partitions holds a backlog; it grows to 5 (partition 4 takes keys from
    partition 0) and more records are written. A group of one consumer then starts
    from the beginning: partition 4 waits until partition 0 is delivered (and its
    boundary committed) up to the boundary. Each round also times when partition 0's
    last record below the boundary was delivered (``source_drained_s``, the earliest
    the gate could open), the baseline of the same read.
    """
    rows = []
    for round_ in range(args.gate_rounds):
        row = _gate_wait_once(bootstrap, zookeeper, root, controller, args, create_topics)
        row["round"] = round_ + 1
        rows.append(row)
        print(f"  gate wait: {row}", flush=True)
    return rows


def _gate_wait_once(
    bootstrap: str,
    zookeeper: str,
    root: str,
    controller: Controller,
    args: argparse.Namespace,
    create_topics: Callable[[str, list[str], int], None],
) -> dict[str, Any]:
    topic = f"scale-gate-{uuid.uuid4().hex[:6]}"
    create_topics(bootstrap, [topic], PARTITIONS)
    controller.adopt(topic)
    _fill(bootstrap, topic, args.gate_records)
    controller.expand(topic, PARTITIONS + 1, timeout=60)
    history = load_history(controller.store, topic)
    boundary = history.epochs[-1].boundaries[0]
    _fill(bootstrap, topic, args.gate_records // 4, Layout(PARTITIONS, PARTITIONS + 1, 1))
    total = args.gate_records + args.gate_records // 4
    consumer = OrderedConsumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": f"scale-gate-{uuid.uuid4().hex}",
            "auto.offset.reset": "earliest",
            "ordered.zookeeper.connect": zookeeper,
            "ordered.zookeeper.root": root,
        }
    )
    got = 0
    started = source_done = child_first = None
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 300
        while got < total and time.monotonic() < deadline:
            batch = consumer.consume(10_000, 1.0)
            now = time.perf_counter()
            for m in batch:
                if m.error() is not None:
                    continue
                if started is None:
                    started = now
                got += 1
                if m.partition() == 0 and m.offset() >= boundary - 1 and source_done is None:
                    source_done = now
                if m.partition() == PARTITIONS and child_first is None:
                    child_first = now
        finished = time.perf_counter()
    finally:
        consumer.close()
    if started is None or child_first is None or source_done is None:
        raise RuntimeError(f"gate wait: {got} of {total} records delivered")
    return {
        "records": total,
        "source_boundary": boundary,
        "source_drained_s": round(source_done - started, 3),
        "child_gated_s": round(child_first - started, 3),
        "all_delivered_s": round(finished - started, 3),
    }
