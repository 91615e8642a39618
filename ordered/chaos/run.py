"""``ordered chaos``: a local cluster, traffic, seeded faults, then the checker's verdict.

The run starts its own dev cluster in a fresh directory, adopts a topic, and starts
coordinator daemons, verifiable producers and verifiable readers as separate processes
(:mod:`ordered.chaos.worker`), in three groups: ``main`` (several members: kills,
stops, rebalances, session expiries), ``lag`` (one member, stopped for long stretches
so that layout changes pile up behind it and trims must wait for it) and ``replay``
(one member: seeks backwards and offset resets, when on), and with ``--spark`` a
Spark query on a standalone cluster (group ``spark``, :mod:`ordered.chaos.spark_reader`).
With ``--java-readers N``, N members of ``main`` are Java ``OrderedKafkaConsumer``s
(:mod:`ordered.chaos.java_reader`), faulted like the others and checked the same way.
While traffic flows it
injects the faults of :mod:`ordered.chaos.schedule`. When the faults are over it
continues everything stopped, lets the producers finish, lets every group read to the
end, stops everything it started, and checks the histories
(:mod:`ordered.verify.checker`). Everything it started is stopped on every way out.
"""

from __future__ import annotations

import contextlib
import json
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from coordinator.kernel.errors import OrderedError, RunInterruptedError
from ordered import devcluster
from ordered.chaos.faults import FaultRunner
from ordered.chaos.java_reader import java_command
from ordered.chaos.net_faults import NetFaults, NetProxies, totals
from ordered.chaos.processes import Slots
from ordered.chaos.schedule import ScheduleShape, digest, kinds_for, make_schedule
from ordered.chaos.spark_faults import SparkFaults
from ordered.chaos.spark_reader import SparkReader
from ordered.verify import HistoryWriter, check, read_events

__all__ = ["ChaosOptions", "remove_workdir", "run_chaos"]

TOPIC = "chaos"
OUTPUT = "chaos-out"
ROOT = "/ordered-chaos"


@dataclass(frozen=True)
class ChaosOptions:
    """How a chaos run is shaped.

    Attributes:
        duration: Seconds of traffic with faults.
        seed: The fault schedule's seed.
        brokers: Kafka brokers (1, or 3 with replication factor 3).
        rate: Records per second, over all producers.
        replays: Seeks backwards and offset resets on.
        eos: Run the exactly-once stage (a transactional copy to a second topic).
        keys: Distinct keys per producer.
        directory: Where the cluster, histories and logs go (default: a temp dir,
            removed after a run that holds unless ``keep``).
        keep: Keep the directory.
        drain_timeout: Seconds the groups get to read to the end after the faults.
        spark: Also read the topic with a Spark query on a standalone cluster, and kill
            its executors and its driver.
        zookeepers: ZooKeeper servers: 1, or an ensemble of 3 or 5 (its members are
            killed, and its quorum lost, by faults of their own).
        network_faults: Route every process of the run through fault proxies (Kafka:
            one per broker; ZooKeeper: one per process) and inject cuts, blackholes
            and latency (:mod:`ordered.chaos.net_faults`).
        java_readers: How many of the main group's starting members are Java
            ``OrderedKafkaConsumer``s (at most :attr:`ScheduleShape.consumers`); the
            others are Python.
        consumer_barrier: Write the ``consumer-barrier`` feature on (``True``) or off
            (``False``) in the run's root before its first adoption; ``None`` leaves it
            to that adoption, which turns it on (``docs/consumer-barrier.md``).
    """

    duration: float
    seed: int
    brokers: int = 1
    rate: float = 300.0
    replays: bool = False
    eos: bool = False
    keys: int = 200
    directory: Path | None = None
    keep: bool = False
    drain_timeout: float = 300.0
    spark: bool = False
    zookeepers: int = 1
    network_faults: bool = False
    consumer_barrier: bool | None = None
    java_readers: int = 0


def run_chaos(options: ChaosOptions, say: Callable[[str], None]) -> dict[str, Any]:
    """Run the chaos test and return its result (``holds`` is the verdict).

    Raises:
        RunInterruptedError: SIGINT or SIGTERM; everything started was stopped.
        OrderedError: The cluster did not start.
    """
    shape = ScheduleShape(
        duration=options.duration,
        brokers=options.brokers,
        replays=options.replays,
        eos=options.eos,
        spark=options.spark,
        zookeepers=options.zookeepers,
        network=options.network_faults,
    )
    schedule = make_schedule(options.seed, shape)
    if not 0 <= options.java_readers <= shape.consumers:
        raise OrderedError(
            f"--java-readers must be 0 to {shape.consumers} (the main group's starting members)"
        )
    # Before anything starts: a missing java or jar is the user's to fix, not a crash loop.
    java = java_command() if options.java_readers else None
    workdir = options.directory or Path(tempfile.mkdtemp(prefix="ordered-chaos-"))
    workdir.mkdir(parents=True, exist_ok=True)
    stop = threading.Event()

    def on_signal(signum: int, _frame: Any) -> None:
        stop.set()

    previous = {s: signal.signal(s, on_signal) for s in (signal.SIGINT, signal.SIGTERM)}
    say(
        f"seed {options.seed}: {len(schedule)} faults over {options.duration:g} s "
        f"(schedule {digest(schedule)}), {options.brokers} broker(s), "
        f"{options.zookeepers} ZooKeeper server(s), {options.rate:g} records/s, "
        f"{options.java_readers} Java reader(s), directory {workdir}"
    )
    cluster_dir = workdir / "cluster"
    state = None
    slots: Slots | None = None
    spark = SparkReader(workdir, say) if options.spark else None
    net: NetProxies | None = None
    started = time.monotonic()
    try:
        if options.network_faults:
            net = NetProxies(options.brokers)
        state = devcluster.up(
            cluster_dir,
            brokers=options.brokers,
            progress=say,
            zookeepers=options.zookeepers,
            client_listeners=net.client_listeners if net else None,
        )
        if stop.is_set():
            raise RunInterruptedError("interrupted while the cluster started")
        conn = _Connection(state.bootstrap_servers, state.zookeeper_connect, ROOT)
        if options.consumer_barrier is not None:
            # Before the first adoption, which would turn a never-written flag on.
            change = "enable" if options.consumer_barrier else "disable"
            code, _payload, err = conn.cli("features", change, "consumer-barrier")
            if code != 0:
                raise OrderedError(f"setting the consumer barrier failed: {err.strip()}")
            say(f"consumer barrier {'on' if options.consumer_barrier else 'off'}")
        _create_and_adopt(conn, TOPIC, shape, options.brokers)
        if options.eos:
            _create_and_adopt(conn, OUTPUT, shape, options.brokers)
        if spark is not None:
            spark.start()
        if net is not None:
            net.set_zookeeper(state.zookeeper_connect)
            say(f"network faults on: clients reach Kafka at {net.bootstrap} (proxies)")
        slots = _slots(workdir, conn, options, shape, net, java)
        if spark is not None:
            spark.add_slot(slots)
        runner = FaultRunner(
            conn,
            slots,
            cluster_dir,
            shape,
            HistoryWriter(workdir / "history" / "run.jsonl"),
            say,
            stop,
            NetFaults(net, say) if net else None,
        )
        for slot in slots.slots.values():
            slots.start(slot)
        say(f"started {len(slots.slots)} processes; traffic flows")
        if spark is not None:
            runner.spark = SparkFaults(runner, spark, options.duration)
            spark.wait_ready(slots, stop)
        runner.wait_readers_committed()
        runner.run(schedule, options.duration)
        if stop.is_set():
            raise RunInterruptedError("interrupted")
        drained = runner.drain(options.drain_timeout)
        if stop.is_set():
            raise RunInterruptedError("interrupted")
        layout_changes = runner.epoch()
        runner.close()
        slots.kill_all()
        devcluster.down(cluster_dir)
        state = None
        if spark is not None:
            spark.stop()
        say("cluster stopped; checking the histories")
        groups = sorted({s.group for s in slots.slots.values() if s.kind == "reader"})
        histories = sorted((workdir / "history").glob("*.jsonl"))
        verdict = check(
            read_events(histories), groups, ["eosout"] if options.eos else [], topic=TOPIC
        )
        result = verdict.to_dict()
        kinds = Counter(runner.fault_kinds)
        result.update(
            seed=options.seed,
            duration_s=options.duration,
            elapsed_s=round(time.monotonic() - started, 1),
            brokers=options.brokers,
            rate=options.rate,
            replays=options.replays,
            eos=options.eos,
            spark=options.spark,
            schedule_digest=digest(schedule),
            faults=sum(kinds.values()),
            fault_kinds=dict(sorted(kinds.items())),
            missing_fault_kinds=sorted(k.value for k in kinds_for(shape) if k.value not in kinds),
            layout_changes=layout_changes,
            process_kills=runner.kills + runner.zk.kills,
            zookeepers=options.zookeepers,
            zookeeper_outages=runner.zk.outages,
            crashes=runner.crashes,
            drained=drained,
            directory=str(workdir),
        )
        if net is not None:
            result["network_faults"] = True
            result["proxies"] = totals(net.stats())
        result["trim_proof"] = result.pop("pauses")
        result["java_readers"] = options.java_readers
        result["reader_kinds"] = {
            n: "java" if s.java else "python"
            for n, s in sorted(slots.slots.items())
            if s.kind == "reader"
        }
        result["java_members"] = _java_members(workdir, slots, runner)
        if spark is not None:
            result["spark_logs"] = spark.log_problems()
            result["spark_drivers"] = spark.driver_stats()
        return result
    except OrderedError:
        raise
    except Exception as exc:  # no traceback for the user: the message, then the cleanup
        raise OrderedError(f"the chaos run failed: {type(exc).__name__}: {exc}") from exc
    finally:
        if slots is not None:
            slots.kill_all()
        if spark is not None:
            spark.stop()
        if net is not None:
            net.close()
        if state is not None:
            with contextlib.suppress(OrderedError):
                devcluster.down(cluster_dir)
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@dataclass(frozen=True)
class _Connection:
    bootstrap: str
    zookeeper: str
    root: str

    def cli(self, *args: str, timeout: float = 120.0) -> tuple[int, dict[str, Any], str]:
        """Run ``ordered ARGS --json`` against the run's cluster: (code, JSON, stderr)."""
        argv = [sys.executable, "-m", "ordered.cli", *args, "--zookeeper", self.zookeeper]
        argv += ["--bootstrap-servers", self.bootstrap, "--root", self.root, "--json"]
        try:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return 124, {}, f"timed out after {timeout:g} s"
        try:
            payload = (
                json.loads(done.stdout.strip().splitlines()[-1]) if done.stdout.strip() else {}
            )
        except ValueError:
            payload = {}
        return done.returncode, payload, done.stderr


def _create_and_adopt(conn: _Connection, topic: str, shape: ScheduleShape, brokers: int) -> None:
    from coordinator.kernel.kafka_admin import KafkaAdmin

    admin = KafkaAdmin(conn.bootstrap, timeout=60.0)
    admin.create_topics([topic], shape.initial, replication=min(brokers, 3))
    code, _payload, err = conn.cli("adopt", topic)
    if code != 0:
        raise OrderedError(f"adopting {topic} failed: {err.strip()}")


def _slots(
    workdir: Path,
    conn: _Connection,
    options: ChaosOptions,
    shape: ScheduleShape,
    net: NetProxies | None,
    java: list[str] | None,
) -> Slots:
    # With network faults every process of the run goes through the proxies; the run's
    # own commands and probes (conn) stay direct.
    bootstrap = net.bootstrap if net else conn.bootstrap
    base = {
        "bootstrap": bootstrap,
        "zookeeper": conn.zookeeper,
        "root": conn.root,
        "topic": TOPIC,
        "keys": options.keys,
    }
    coordinator = [
        sys.executable,
        "-m",
        "ordered.cli",
        "coordinator",
        "--zookeeper",
        conn.zookeeper,
    ]
    coordinator += ["--bootstrap-servers", bootstrap, "--root", conn.root]
    coordinator += ["--sweep-interval", "3", "--trim-timeout", "20"]
    slots = Slots(workdir, base, coordinator, net.zookeeper_for if net else None, java)
    for i in range(shape.coordinators):
        slots.add(f"coordinator-{i}", "coordinator")
    rate = options.rate / shape.producers
    for i in range(shape.producers):
        slots.add(f"producer-{i}", "producer", rate=rate)
    # Which members are Java is arbitrary for the schedule (its consumer faults pick main
    # members at random); main-1 first, as the CI seed's kill-consumer hits main-1.
    java_members = {(1 + i) % shape.consumers for i in range(options.java_readers)}
    for i in range(shape.consumers):
        slots.add(f"main-{i}", "reader", "main", **({"java": True} if i in java_members else {}))
    slots.add("lag-0", "reader", "lag")
    slots.add("replay-0", "reader", "replay")
    if options.eos:
        slots.add("eos-0", "pipeline", "eos", output=OUTPUT, txn_id="chaos-eos-0")
        slots.add("eosout-0", "reader", "eosout", topic=OUTPUT, read_committed=True)
    return slots


def _java_members(workdir: Path, slots: Slots, runner: FaultRunner) -> dict[str, Any]:
    """Per Java slot: SIGKILLs it took, and the records each incarnation delivered.

    What shows that the Java kind took part: a run whose Java members were never killed,
    or never delivered, proves nothing about them.
    """
    out: dict[str, Any] = {}
    for name, slot in sorted(slots.slots.items()):
        if not slot.java:
            continue
        delivered: dict[str, int] = {}
        for n in range(1, slot.incarnation + 1):
            history = workdir / "history" / f"{name}.{n}.jsonl"
            events = read_events([history]) if history.is_file() else []
            delivered[f"{name}.{n}"] = sum(1 for e in events if e["ev"] == "dlv")
        out[name] = {
            "kills": runner.killed[name],
            "incarnations": slot.incarnation,
            "delivered": delivered,
        }
    return out


def remove_workdir(result: dict[str, Any], options: ChaosOptions) -> None:
    """Remove the run's directory after a run that holds, unless it was asked for."""
    if result.get("holds") and not options.keep and options.directory is None:
        shutil.rmtree(result["directory"], ignore_errors=True)
