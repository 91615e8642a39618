"""Benchmark: how the layer's own costs grow with its work (scale curves).

Not a test. Run as ``.venv/bin/python benchmarks/bench_scale.py [--quick]`` (starts its
own cluster in a temporary directory). Prints one table per curve and writes
``benchmarks/results/scale.json``.

Curves, each a table of work size against cost:

1. **Barrier**: 1, 10 and 50 live producers, each a separate process writing keyed
   records; seconds from ``expand`` to sealed (median and max over the rounds).
   Goal: <= 1 s at 50.
2. **Coordinator**: 200 adopted topics and 20 consumer groups with a declared wait
   (interest) each; a plain commit past the wait, then the time until the daemon's
   relay publishes the progress record the waiter watches (p50/p99); the daemon's CPU
   (from ``/proc``) and ZooKeeper's request rate (``mntr``) while it does.
   Goal: relay p99 <= 50 ms.
3. **ZooKeeper load per consumer** (``scale_consumer.py``): requests one
   ``OrderedConsumer`` sends ZooKeeper per second while it reads a backlog at full
   speed (small and large batches, the plain consumer's rate in the same run), while it
   keeps up with a producer writing as fast as it can, and while it is idle, against
   what one ZooKeeper server here answers per second (``exists`` from 8 clients, async).
   Goal: <= 20 requests/s per consumer at any throughput, ratio to plain >= 0.9.
   With ``--only lockstep`` (a diagnostic, not in the default set) the backlog rows are
   read again in lockstep: one call of each consumer in turn, each timed over its own
   calls, so both meet the same moments of the machine.
4. **Gate wait** (``scale_consumer.py``): a lagging group of one consumer reads a
   backlog across an expansion; seconds until the new partition's first record (it
   waits for the source's tail), against when the source's tail was delivered.
5. **Partition count**: expanding 8 -> 16 -> 64 -> 256 under traffic: seconds per step,
   the gate rule's cost per record at each size, and the bytes of the layout history in
   ZooKeeper after 100 epochs, before and after compaction (every partition trimmed to
   its end, then ``compact_topic``).
"""

from __future__ import annotations

import argparse
import contextlib
import inspect
import json
import os
import statistics
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import _common
from _common import environment, scratch_root, servers
from confluent_kafka import Consumer, Producer, TopicPartition
from scale_consumer import consumer_load, gate_wait, lockstep, zk_packets

from coordinator.control.controller import Controller
from coordinator.kernel.history import load_history
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.positions import PositionService
from coordinator.kernel.store import LayoutStore, paths
from coordinator.kernel.zk import close_client, make_client, start_client
from coordinator.relay.position_relay import PositionRelay
from coordinator.trims.history_compaction import compact_topic
from coordinator.trims.trim import Trimmer
from linear_hash import GateEvaluator

RESULTS = Path(__file__).resolve().parent / "results" / "scale.json"
ROOT = Path(__file__).resolve().parents[1]

PRODUCER = r"""
import json, signal, sys, time
from ordered.producer import OrderedProducer
config, topic, n = json.loads(sys.argv[1]), sys.argv[2], int(sys.argv[3])
stop = False
def on_term(*_):
    global stop
    stop = True
signal.signal(signal.SIGTERM, on_term)
producer = OrderedProducer(config)
print("ready", flush=True)
i = 0
while not stop:
    try:
        producer.produce(topic, b"x" * 100, b"k-%d-%d" % (n, i % 50))
        i += 1
    except BufferError:
        pass
    producer.poll(0)
    time.sleep(0.02)
producer.close()
"""


def _percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def _create_topics(bootstrap: str, names: list[str], partitions: int) -> None:
    # Returns once every broker's metadata shows them all.
    KafkaAdmin(bootstrap, timeout=60.0).create_topics(names, partitions)


def _cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    ticks = os.sysconf("SC_CLK_TCK")
    return (int(fields[11]) + int(fields[12])) / ticks


# --- 1. barrier ---------------------------------------------------------------------


@contextlib.contextmanager
def producer_processes(
    count: int, bootstrap: str, zookeeper: str, root: str, topic: str
) -> Iterator[list[subprocess.Popen[bytes]]]:
    """Start ``count`` producer processes and wait until each is ready."""
    config = {
        "bootstrap.servers": bootstrap,
        "ordered.zookeeper.connect": zookeeper,
        "ordered.zookeeper.root": root,
        "linger.ms": 5,
    }
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", PRODUCER, json.dumps(config), topic, str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
        )
        for n in range(count)
    ]
    try:
        for proc in procs:
            assert proc.stdout is not None
            if proc.stdout.readline().strip() != b"ready":
                raise RuntimeError("a producer process failed to start")
        yield procs
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(30)
            except subprocess.TimeoutExpired:
                proc.kill()


def barrier_curve(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> list[dict[str, Any]]:
    """Expand-to-sealed seconds with 1, 10 and 50 producer processes."""
    rows = []
    for count in args.producers:
        topic = f"scale-barrier-{count}-{uuid.uuid4().hex[:6]}"
        _create_topics(bootstrap, [topic], 2)
        controller.adopt(topic)
        started = time.monotonic()
        with producer_processes(count, bootstrap, zookeeper, root, topic):
            ready_s = time.monotonic() - started
            deadline = time.monotonic() + 60
            while len(controller.store.producers(topic)) < count:
                if time.monotonic() > deadline:
                    raise RuntimeError(f"only {len(controller.store.producers(topic))} registered")
                time.sleep(0.1)
            time.sleep(1.0)
            seconds = []
            to_publish: list[float] = []
            to_first_ack: list[float] = []
            to_median_ack: list[float] = []
            to_last_ack: list[float] = []
            to_seal: list[float] = []
            store = controller.store
            for to in range(3, 3 + args.barrier_rounds):
                wall = time.time()
                t0 = time.perf_counter()
                result = controller.expand(topic, to, timeout=60)
                seconds.append(time.perf_counter() - t0)
                if len(result.producers) != count or result.expired:
                    raise RuntimeError(f"unexpected barrier: {result}")
                # Where the time goes: CreatePartitions and the publish; the
                # producers' switch, drain and ack; the controller's seal.
                epoch = store.get_epoch(topic, result.epoch)
                acks = store.acks(topic, result.epoch)
                to_publish.append(epoch.created_at - wall)
                acked = sorted(a.acked_at - epoch.created_at for a in acks.values())
                to_first_ack.append(acked[0])
                to_median_ack.append(statistics.median(acked))
                to_last_ack.append(acked[-1])
                to_seal.append((epoch.sealed_at or 0.0) - epoch.created_at)
                time.sleep(0.3)
        rows.append(
            {
                "producers": count,
                "rounds": len(seconds),
                "median_s": round(statistics.median(seconds), 3),
                "max_s": round(max(seconds), 3),
                "runs_s": [round(s, 3) for s in seconds],
                "expand_to_publish_s": [round(x, 3) for x in to_publish],
                "publish_to_first_ack_s": [round(x, 3) for x in to_first_ack],
                "publish_to_median_ack_s": [round(x, 3) for x in to_median_ack],
                "publish_to_last_ack_s": [round(x, 3) for x in to_last_ack],
                "publish_to_seal_s": [round(x, 3) for x in to_seal],
                "processes_ready_s": round(ready_s, 1),
                "load_average": [round(x, 2) for x in os.getloadavg()],
            }
        )
        print(f"  barrier, {count:3d} producers: {rows[-1]}", flush=True)
    return rows


# --- 2. coordinator -----------------------------------------------------------------


def coordinator_curve(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """Relay latency, daemon CPU and ZooKeeper requests with many topics and groups."""
    topics = [f"scale-coord-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.topics)]
    t0 = time.monotonic()
    _create_topics(bootstrap, topics, 2)
    for topic in topics:
        controller.adopt(topic)
    adopt_s = time.monotonic() - t0
    print(f"  created and adopted {len(topics)} topics in {adopt_s:.1f} s", flush=True)
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5})
    waited = topics[: args.groups]
    for topic in waited:
        for i in range(100):
            producer.produce(topic, b"x", b"k%d" % i, partition=0)
    producer.flush(30)

    client = start_client(make_client(zookeeper, command_deadline_s=10.0), 15.0)
    groups = [f"scale-g-{i}-{uuid.uuid4().hex[:6]}" for i in range(args.groups)]
    services = [PositionService(client, root, g) for g in groups]
    for service, topic in zip(services, waited, strict=True):
        service.declare(topic, "waiter", {0: 1_000_000})
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ordered.cli",
            "coordinator",
            "--zookeeper",
            zookeeper,
            "--bootstrap-servers",
            bootstrap,
            "--root",
            root,
            "--sweep-interval",
            "0",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    latencies: list[float] = []
    try:
        time.sleep(args.settle)
        cpu0, packets0, wall0 = _cpu_seconds(daemon.pid), zk_packets(zookeeper), time.monotonic()
        time.sleep(args.idle_seconds)
        idle_cpu = (_cpu_seconds(daemon.pid) - cpu0) / (time.monotonic() - wall0)
        idle_zk = (zk_packets(zookeeper) - packets0) / (time.monotonic() - wall0)
        cpu0, packets0, wall0 = _cpu_seconds(daemon.pid), zk_packets(zookeeper), time.monotonic()
        relayed: dict[str, int] = {}
        changed = threading.Condition()

        def watcher(group: str) -> Callable[[Any], None]:
            def on_progress(progress: Any) -> None:
                with changed:
                    relayed[group] = progress.offset
                    changed.notify_all()

            return on_progress

        for service, group, topic in zip(services, groups, waited, strict=True):
            service.watch(topic, 0, watcher(group))
        for round_ in range(args.relay_rounds):
            wait_at = 10 * (round_ + 1)
            for service, topic in zip(services, waited, strict=True):
                service.declare(topic, "waiter", {0: wait_at})
            time.sleep(0.5)  # the relay reads the new waits
            for group, topic in zip(groups, waited, strict=True):
                consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
                consumer.commit(offsets=[TopicPartition(topic, 0, wait_at)], asynchronous=False)
                committed = time.perf_counter()
                with changed:
                    ok = changed.wait_for(lambda g=group, at=wait_at: relayed.get(g, -1) >= at, 10)
                if not ok:
                    raise RuntimeError(f"no progress relayed for {group}")
                latencies.append(time.perf_counter() - committed)
                consumer.close()
        elapsed = time.monotonic() - wall0
        busy_cpu = (_cpu_seconds(daemon.pid) - cpu0) / elapsed
        busy_zk = (zk_packets(zookeeper) - packets0) / elapsed
        daemon.terminate()
        daemon.wait(30)
        durations = round_durations(bootstrap, root, client, args.round_seconds)
    finally:
        if daemon.poll() is None:
            daemon.terminate()
            daemon.wait(30)
        close_client(client)
    row = {
        "topics": len(topics),
        "groups_waiting": len(groups),
        "relay_samples": len(latencies),
        "relay_p50_ms": round(_percentile(latencies, 0.5) * 1000, 1),
        "relay_p99_ms": round(_percentile(latencies, 0.99) * 1000, 1),
        "relay_max_ms": round(max(latencies) * 1000, 1),
        # One full round's own duration (every waiting group), back to back.
        "relay_round_samples": len(durations),
        "relay_round_p50_ms": round(_percentile(durations, 0.5) * 1000, 2),
        "relay_round_p99_ms": round(_percentile(durations, 0.99) * 1000, 2),
        "load_average": [round(x, 2) for x in os.getloadavg()],
        "daemon_cpu_idle": round(idle_cpu, 3),
        "daemon_cpu_relaying": round(busy_cpu, 3),
        "zookeeper_requests_per_s_idle": round(idle_zk, 1),
        "zookeeper_requests_per_s_relaying": round(busy_zk, 1),
        "adopt_seconds": round(adopt_s, 1),
    }
    print(f"  coordinator: {row}", flush=True)
    return row


class _Rounds:
    """A hook that records the duration of each relay round."""

    def __init__(self) -> None:
        self.seconds: list[float] = []

    def on_relay_round(self, seconds: float, published: int) -> None:
        self.seconds.append(seconds)


def round_durations(bootstrap: str, root: str, client: Any, seconds: float) -> list[float]:
    """Durations of full relay rounds, back to back for ``seconds`` (in this process).

    The waits declared for the latency phase are still in place; the commit tail is
    off, so that every round is a full one.
    """
    hook = _Rounds()
    admin = KafkaAdmin(bootstrap, timeout=10.0)
    kwargs: dict[str, Any] = {"hooks": [hook]}
    if "tail_commits" in inspect.signature(PositionRelay).parameters:
        kwargs["tail_commits"] = False
    relay = PositionRelay(client, admin, root, 0.01, **kwargs)
    deadline = time.monotonic() + seconds
    try:
        relay.run(lambda: time.monotonic() > deadline)
    finally:
        admin.close()
    return hook.seconds[1:]  # the first round starts the group clients


# --- 4. partition count -------------------------------------------------------------


class _AllCommitted:
    """A group that committed everything: every gate opens (the steady state)."""

    def committed(self, partition: int) -> int | None:
        return 1 << 62

    def log_start(self, partition: int) -> int:
        return 0


def gate_costs(store: LayoutStore, topic: str, sizes: list[int]) -> list[dict[str, Any]]:
    """ns per record of the gate rule on the real history, at each active count.

    The consumer asks :meth:`GateEvaluator.limit` per batch and partition and
    :meth:`GateEvaluator.may_deliver` for records at or past a gate; both run here on
    records spread over every partition of the layout.
    """
    history = load_history(store, topic)
    rows = []
    view = _AllCommitted()
    for size in sizes:
        infos = [e for e in history.epochs if e.to_active <= size]
        evaluator = GateEvaluator(infos)
        records = [(i % size, 10 + i // size) for i in range(50_000)]
        t0 = time.perf_counter()
        for partition, offset in records:
            if offset >= evaluator.limit(partition):
                evaluator.may_deliver(partition, offset, view)
        rows.append(
            {
                "partitions": size,
                "epochs": len(infos),
                "gate_ns_per_record": round((time.perf_counter() - t0) / len(records) * 1e9),
            }
        )
    return rows


def partition_curve(
    bootstrap: str, zookeeper: str, root: str, controller: Controller, args: argparse.Namespace
) -> dict[str, Any]:
    """Seconds per expansion step under traffic, gate cost per record, history size."""
    topic = f"scale-parts-{uuid.uuid4().hex[:6]}"
    sizes = args.partition_steps
    _create_topics(bootstrap, [topic], sizes[0])
    controller.adopt(topic)
    steps = []
    with producer_processes(2, bootstrap, zookeeper, root, topic):
        for to in sizes[1:]:
            t0 = time.perf_counter()
            controller.expand(topic, to, timeout=120)
            steps.append({"to": to, "seconds": round(time.perf_counter() - t0, 3)})
            print(f"  partitions: expand to {to} in {steps[-1]['seconds']} s", flush=True)
    gate = gate_costs(controller.store, topic, sizes)
    history_topic = f"scale-history-{uuid.uuid4().hex[:6]}"
    _create_topics(bootstrap, [history_topic], 2)
    controller.adopt(history_topic)
    # A record in every active partition after each change, so every boundary is past
    # the log start until the trim below.
    writer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 0})
    for i in range(args.history_epochs):
        to = 3 if i % 2 == 0 else 2
        if i % 2 == 0:
            controller.expand(history_topic, to, timeout=30)
        else:
            controller.shrink(history_topic, to, timeout=30)
        for p in range(to):
            writer.produce(history_topic, b"v", partition=p)
        writer.flush(10)
    history, loads = _timed_loads(controller.store, history_topic)
    # The gate rule on the long history: a new consumer evaluates every epoch's gates.
    evaluator = GateEvaluator(history.epochs)
    records = [(i % 3, 10 + i // 3) for i in range(50_000)]
    view = _AllCommitted()
    t0 = time.perf_counter()
    for partition, offset in records:
        if offset >= evaluator.limit(partition):
            evaluator.may_deliver(partition, offset, view)
    long_gate_ns = round((time.perf_counter() - t0) / len(records) * 1e9)
    client = controller.store.client
    base = paths.topic_path(root, history_topic)
    total, nodes = _tree_size(client, base)
    # After the count: what a running client pays at the next change (the epochs it
    # does not hold sealed), against the full read above.
    controller.expand(history_topic, 3, timeout=30)
    reloads = []
    for _ in range(5):
        t0 = time.perf_counter()
        load_history(controller.store, history_topic, previous=history)
        reloads.append(time.perf_counter() - t0)
    # Compaction: nothing goes while every log starts at 0; after a trim of every
    # partition to its end, everything but the newest epoch goes.
    admin = KafkaAdmin(bootstrap, timeout=10.0)
    untrimmed = compact_topic(controller.store, admin, history_topic)
    ends = admin.end_offsets(history_topic, range(3))
    trim = Trimmer(admin).trim({(history_topic, p): o for p, o in ends.items()}, timeout=30)
    assert trim.ok, trim.summary()
    t0 = time.perf_counter()
    compacted = compact_topic(controller.store, admin, history_topic)
    compact_s = time.perf_counter() - t0
    after, after_loads = _timed_loads(controller.store, history_topic)
    after_bytes, after_nodes = _tree_size(client, base)
    return {
        "steps": steps,
        "gate": gate,
        "history_epochs": args.history_epochs,
        "history_bytes": total,
        "history_znodes": nodes,
        "history_load_ms": round(statistics.median(loads) * 1000, 1),
        "history_reload_ms": round(statistics.median(reloads) * 1000, 1),
        "history_gate_ns_per_record": long_gate_ns,
        "history_compaction": {
            "epochs_before": len(compacted.epochs),
            "dropped_before_trim": len(untrimmed.dropped),
            "dropped": len(compacted.dropped),
            "compact_ms": round(compact_s * 1000, 1),
            "epochs_after": len(after.epochs),
            "bytes_after": after_bytes,
            "znodes_after": after_nodes,
            "load_ms_after": round(statistics.median(after_loads) * 1000, 1),
        },
    }


def _timed_loads(store: LayoutStore, topic: str) -> tuple[Any, list[float]]:
    """The history, and the seconds of five full reads of it."""
    loads = []
    history = None
    for _ in range(5):
        t0 = time.perf_counter()
        history = load_history(store, topic)
        loads.append(time.perf_counter() - t0)
    return history, loads


def _tree_size(client: Any, base: str) -> tuple[int, int]:
    """Bytes of data and znodes under (and at) ``base``."""
    total = 0
    nodes = 0
    stack = [base]
    while stack:
        path = stack.pop()
        data, _stat = client.get(path)
        total += len(data or b"")
        nodes += 1
        stack.extend(f"{path}/{c}" for c in client.get_children(path))
    return total, nodes


def main(argv: list[str] | None = None) -> int:
    """Run the curves, print them, write the JSON."""
    parser = _common.parser(__doc__)
    parser.add_argument("--quick", action="store_true", help="fewer rounds and records")
    parser.add_argument("--only", nargs="+", default=None, help="curves to run")
    parser.add_argument("--out", type=Path, default=RESULTS)
    parser.add_argument(
        "--consumer-session-timeout-ms",
        type=int,
        default=None,
        help="ordered.zookeeper.session.timeout.ms of the measured consumers (default: theirs)",
    )
    parser.add_argument(
        "--settle", type=float, default=3.0, help="seconds the daemon gets before measuring"
    )
    args = parser.parse_args(argv)
    args.producers = [1, 10, 50]
    args.barrier_rounds = 3 if args.quick else 6
    args.topics = 200
    args.groups = 20
    args.relay_rounds = 2 if args.quick else 5
    args.round_seconds = 3.0 if args.quick else 10.0
    args.idle_seconds = 3.0 if args.quick else 10.0
    # An idle consumer's requests are its session's pings, one per third of the session
    # timeout (6 s by default): a window of a few seconds sees zero or one of them.
    args.zk_idle_seconds = 36.0 if args.quick else 72.0
    # A read must last a second or more for a rate per second: a 200,000-record read
    # (0.2 s) measured the start-up checks (each partition's first batches, a burst of
    # two), 24 requests/s, not the paced rate (16-18 over 2 M records).
    args.zk_records = 1_000_000 if args.quick else 2_000_000
    args.zk_batches = [500, 10_000]
    args.zk_rounds = 2 if args.quick else 5
    args.live_seconds = 5.0 if args.quick else 15.0
    args.partition_steps = [8, 16, 64, 256]
    args.history_epochs = 20 if args.quick else 100
    args.gate_records = 100_000 if args.quick else 400_000
    args.gate_rounds = 4 if args.quick else 6  # bimodal: a fetch parked at the broker or not
    curves = set(args.only or ["barrier", "coordinator", "zookeeper", "gatewait", "partitions"])

    results: dict[str, Any] = {**environment("scale"), "quick": args.quick}
    with (
        servers(args, "scale") as (bootstrap, zookeeper),
        scratch_root(zookeeper) as (client, root),
    ):
        _common.set_consumer_barrier(client, root, args.consumer_barrier)
        store = LayoutStore(client, root)
        controller = Controller(store, KafkaAdmin(bootstrap, timeout=10.0))
        if "barrier" in curves:
            print("barrier ...", flush=True)
            results["barrier"] = barrier_curve(bootstrap, zookeeper, root, controller, args)
        if "coordinator" in curves:
            print("coordinator ...", flush=True)
            results["coordinator"] = coordinator_curve(bootstrap, zookeeper, root, controller, args)
        if "zookeeper" in curves:
            print("zookeeper load ...", flush=True)
            results["zookeeper_load"] = consumer_load(
                bootstrap, zookeeper, root, controller, args, _create_topics
            )
        if "lockstep" in curves:  # a diagnostic, only when asked for (--only lockstep)
            print("consumer lockstep ...", flush=True)
            results["consumer_lockstep"] = lockstep(
                bootstrap, zookeeper, root, controller, args, _create_topics
            )
        if "gatewait" in curves:
            print("gate wait ...", flush=True)
            results["gate_wait"] = gate_wait(
                bootstrap, zookeeper, root, controller, args, _create_topics
            )
        if "partitions" in curves:
            print("partition count ...", flush=True)
            results["partitions"] = partition_curve(bootstrap, zookeeper, root, controller, args)
    _common.write_results(args.out, results)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
