"""Injecting the faults of a chaos run, and draining it afterwards.

Layout changes run one at a time in their own thread (each waits for the producer
barrier), so do server restarts, trims and retention changes (one cluster fault at a
time); signals to processes are sent at once, and what must happen later (a SIGCONT,
the replacement of a killed process) is kept as a timer. Every fault is printed and
written to the run's history as a ``fault`` event; ``pause``/``resume`` events mark
the lagging group's stops, ``low`` events the log start offsets sampled every 2 s.
"""

from __future__ import annotations

import contextlib
import queue
import signal
import threading
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from coordinator.kernel.errors import OrderedError
from ordered.chaos.net_faults import NET_KINDS, NetFaults
from ordered.chaos.processes import Slot, Slots
from ordered.chaos.schedule import FaultKind, ScheduledFault, ScheduleShape
from ordered.chaos.spark_faults import SPARK_KINDS, SparkFaults
from ordered.chaos.zk_faults import ZOOKEEPER_KINDS, ZookeeperFaults
from ordered.devcluster.restart import restart_node
from ordered.verify import HistoryWriter

__all__ = ["FaultRunner"]

TOPIC = "chaos"
MAX_MAIN_MEMBERS = 5
MIN_MAIN_MEMBERS = 2


class _Conn(Protocol):
    @property
    def bootstrap(self) -> str: ...

    def cli(self, *args: str, timeout: float = 120.0) -> tuple[int, dict[str, Any], str]: ...


class FaultRunner:
    """Runs a schedule against the run's processes, cluster and topic.

    Args:
        conn: The run's connection (``cli`` runs ``ordered`` commands).
        slots: The run's processes.
        cluster_dir: The dev cluster's directory.
        shape: The schedule's shape.
        log: The run's own history file.
        say: Prints one line of the fault log.
        stop: Set when the run is interrupted.
        net: The network faults (``--network-faults``), else ``None``.
    """

    def __init__(
        self,
        conn: _Conn,
        slots: Slots,
        cluster_dir: Path,
        shape: ScheduleShape,
        log: HistoryWriter,
        say: Callable[[str], None],
        stop: threading.Event,
        net: NetFaults | None = None,
    ) -> None:
        self.conn, self.slots, self.cluster_dir, self.shape = conn, slots, cluster_dir, shape
        self.log, self._say, self.stop, self.net = log, say, stop, net
        self.fault_kinds: list[str] = []
        self.kills = 0
        self.killed: Counter[str] = Counter()  # SIGKILLs by slot
        self.crashes: list[dict[str, Any]] = []
        self.t0 = time.monotonic()
        self._lock = threading.Lock()
        self._timers: list[tuple[float, str, Callable[[], None]]] = []
        self._pauses = 0
        self._layout_q: queue.Queue[ScheduledFault | None] = queue.Queue()
        self._cluster_q: queue.Queue[ScheduledFault | None] = queue.Queue()
        self._busy = {"layout": False, "cluster": False}
        self._active = shape.initial
        self._epoch = 0
        self._threads = [
            threading.Thread(target=self._worker, args=("layout", self._layout_q), daemon=True),
            threading.Thread(target=self._worker, args=("cluster", self._cluster_q), daemon=True),
            threading.Thread(target=self._sample_lows, daemon=True),
        ]
        self._sampling = threading.Event()
        self._next_main = shape.consumers
        self.spark: SparkFaults | None = None  # run.py sets it with --spark
        self.zk = ZookeeperFaults(cluster_dir, shape, self._fault, self.say)

    # --- the log ---------------------------------------------------------------------

    def say(self, text: str) -> None:
        """Print one line of the fault log, stamped with the run's clock."""
        self._say(f"[{time.monotonic() - self.t0:7.1f}s] {text}")

    def _fault(self, kind: FaultKind, target: str, detail: str) -> None:
        with self._lock:
            self.fault_kinds.append(kind.value)
        self.log.write({"ev": "fault", "kind": kind.value, "target": target, "detail": detail})
        self.say(f"{kind.value} {target} {detail}".replace("  ", " "))

    def _later(self, delay: float, what: str, call: Callable[[], None]) -> None:
        with self._lock:
            self._timers.append((time.monotonic() + delay, what, call))

    def _run_timers(self, everything: bool = False) -> None:
        now = time.monotonic()
        with self._lock:
            due = [t for t in self._timers if everything or t[0] <= now]
            self._timers = [t for t in self._timers if t not in due]
        for _at, _what, call in sorted(due, key=lambda t: t[0]):
            call()

    # --- the main loop ---------------------------------------------------------------

    def run(self, schedule: list[ScheduledFault], duration: float) -> None:
        """Inject ``schedule`` over ``duration`` seconds, printing progress every 10 s."""
        self.t0 = time.monotonic()
        for thread in self._threads:
            thread.start()
        pending = list(schedule)
        next_progress = 10.0
        while not self.stop.is_set():
            elapsed = time.monotonic() - self.t0
            if elapsed >= duration:
                break
            while pending and pending[0].at <= elapsed:
                self._inject(pending.pop(0))
            self._run_timers()
            self._reap_crashes()
            if elapsed >= next_progress:
                next_progress += 10.0
                self.progress()
            self.stop.wait(0.2)

    def _reap_crashes(self) -> None:
        """Replace a process that ended without being told to (as a supervisor would)."""
        for slot in list(self.slots.slots.values()):
            proc = slot.proc
            if proc is None or slot.signalled or not slot.wanted or proc.poll() is None:
                continue
            slot.signalled = True  # noted once
            crash = {"slot": slot.name, "ident": slot.ident, "code": proc.returncode}
            crash["at_s"] = round(time.monotonic() - self.t0, 1)
            self.crashes.append(crash)
            self.log.write({"ev": "crash", **crash})
            self.say(f"CRASH {slot.ident} exited by itself (code {proc.returncode}); replaced")
            self._restart_later(slot, 2.0)

    def progress(self) -> None:
        """Print one progress line: records acked, delivered per group, layout, faults."""
        stats = self.slots.stats()
        acked = sum(s.get("acked", 0) for k, s in stats.items() if k.startswith("producer"))
        groups: dict[str, int] = {}
        for name, s in stats.items():
            group = name.split("-")[0]
            if group in ("main", "lag", "replay", "eosout", "spark"):
                groups[group] = groups.get(group, 0) + int(s.get("delivered", 0))
        delivered = ", ".join(f"{g} {n}" for g, n in sorted(groups.items()))
        self.say(
            f"progress: {acked} acked; delivered {delivered}; {self._active} partitions "
            f"(epoch {self._epoch}); {len(self.fault_kinds)} faults, {self.kills} kills"
        )

    def _inject(self, fault: ScheduledFault) -> None:
        kind = fault.kind
        if kind.layout:
            self._layout_q.put(fault)
        elif kind in (
            FaultKind.BROKER_RESTART,
            FaultKind.ZOOKEEPER_RESTART,
            FaultKind.TRIM,
            FaultKind.RETENTION_SWEEP,
            FaultKind.OFFSET_RESET,
            *ZOOKEEPER_KINDS,
        ):
            self._cluster_q.put(fault)
        elif kind in SPARK_KINDS and self.spark is not None:
            self.spark.inject(fault)
        elif kind in NET_KINDS and self.net is not None:
            self.net.inject(fault, self._fault, self._later)
        else:
            self._process_fault(fault)

    def _worker(self, name: str, jobs: queue.Queue[ScheduledFault | None]) -> None:
        while True:
            fault = jobs.get()
            if fault is None:
                return
            self._busy[name] = True
            try:
                if name == "layout":
                    self._layout_fault(fault)
                else:
                    self._cluster_fault(fault)
            except Exception as exc:  # a fault that fails is logged; the run goes on
                self.say(f"{fault.kind.value} failed: {type(exc).__name__}: {exc}")
            finally:
                self._busy[name] = False

    # --- processes -------------------------------------------------------------------

    def _pick(self, target: str, kind: str, python_only: bool = False) -> Slot | None:
        """The target slot if its process runs, else the first running slot of its kind
        (``python_only``: of the Python ones)."""

        def fits(slot: Slot | None) -> bool:
            return (
                slot is not None
                and slot.alive
                and not slot.stopped
                and not (python_only and slot.java)
            )

        slot = self.slots.slots.get(target)
        if fits(slot):
            return slot
        prefix = target.rsplit("-", 1)[0]
        for name, other in sorted(self.slots.slots.items()):
            if name.startswith(prefix) and other.kind == kind and fits(other):
                return other
        return None

    def _restart_later(self, slot: Slot, delay: float) -> None:
        def again() -> None:
            if slot.wanted and not slot.alive:
                self.slots.start(slot)
                self.say(f"restarted {slot.name} as {slot.ident} (pid {slot.pid})")

        self._later(delay, f"restart {slot.name}", again)

    def _process_fault(self, fault: ScheduledFault) -> None:
        kind, params = fault.kind, fault.params
        kinds = {
            FaultKind.KILL_PRODUCER: "producer",
            FaultKind.STOP_PRODUCER: "producer",
            FaultKind.EXPIRE_PRODUCER_SESSION: "producer",
            FaultKind.KILL_COORDINATOR: "coordinator",
            FaultKind.STOP_COORDINATOR: "coordinator",
            FaultKind.KILL_PIPELINE: "pipeline",
        }
        if kind is FaultKind.REBALANCE:
            self._rebalance(bool(params.get("join")))
            return
        if kind is FaultKind.PAUSE_GROUP:
            self._pause_lag()
            self._fault(kind, "lag", f"stopped for {params['down_s']} s")
            self._later(float(params["down_s"]), "resume lag", self._resume_lag)
            return
        # The Java consumer keeps its ZooKeeper session to itself: no expiry from outside.
        python_only = kind is FaultKind.EXPIRE_CONSUMER_SESSION
        slot = self._pick(fault.target, kinds.get(kind, "reader"), python_only)
        if slot is None:
            self.say(f"{kind.value}: no running process for {fault.target}, skipped")
            return
        down = float(params.get("down_s", 0.0))
        if kind in (
            FaultKind.KILL_PRODUCER,
            FaultKind.KILL_CONSUMER,
            FaultKind.KILL_COORDINATOR,
            FaultKind.KILL_PIPELINE,
        ):
            pid = slot.pid
            self.slots.signal(slot, signal.SIGKILL)
            with self._lock:
                self.kills += 1
                self.killed[slot.name] += 1
            self._fault(kind, slot.ident, f"SIGKILL pid {pid}, replaced in {down} s")
            self._restart_later(slot, down)
        elif kind in (
            FaultKind.STOP_PRODUCER,
            FaultKind.STOP_CONSUMER,
            FaultKind.STOP_COORDINATOR,
        ):
            self.slots.signal(slot, signal.SIGSTOP)
            self._fault(kind, slot.ident, f"SIGSTOP pid {slot.pid} for {down} s")
            self._later(down, f"continue {slot.name}", lambda: self._continue(slot))
        elif kind in (FaultKind.EXPIRE_PRODUCER_SESSION, FaultKind.EXPIRE_CONSUMER_SESSION):
            self.slots.signal(slot, signal.SIGUSR1)
            self._fault(kind, slot.ident, "ZooKeeper session expiry requested")
        elif kind is FaultKind.SEEK_BACK:
            self.slots.signal(slot, signal.SIGUSR2)
            self._fault(kind, slot.ident, "seek every partition back to its log start")

    def _continue(self, slot: Slot) -> None:
        if self.slots.signal(slot, signal.SIGCONT):
            self.say(f"SIGCONT {slot.ident}")

    def _rebalance(self, join: bool) -> None:
        members = [
            s for n, s in sorted(self.slots.slots.items()) if n.startswith("main-") and s.wanted
        ]
        if join and len(members) >= MAX_MAIN_MEMBERS:
            join = False
        if not join and len(members) <= MIN_MAIN_MEMBERS:
            join = True
        if join:
            left = [s for s in members if not s.alive]
            slot = self.slots.slots.get(f"main-{self._next_main}")
            if slot is None:
                slot = self.slots.add(f"main-{self._next_main}", "reader", "main")
                self._next_main += 1
            if slot.alive:
                slot = left[0] if left else slot
            self.slots.start(slot)
            self._fault(FaultKind.REBALANCE, slot.ident, "a member joins the main group")
            return
        leaving = next((s for s in reversed(members) if s.alive and not s.stopped), None)
        if leaving is None:
            return
        leaving.wanted = False
        self.slots.signal(leaving, signal.SIGTERM)
        self._fault(FaultKind.REBALANCE, leaving.ident, "a member leaves the main group cleanly")

    def _lag_members(self) -> list[Slot]:
        return [s for s in self.slots.slots.values() if s.group == "lag"]

    def _pause_lag(self) -> None:
        with self._lock:
            self._pauses += 1
            first = self._pauses == 1
        if first:
            for slot in self._lag_members():
                self.slots.signal(slot, signal.SIGSTOP)
            self.log.write({"ev": "pause", "g": "lag"})
            self.say("lag group stopped (SIGSTOP)")

    def _resume_lag(self) -> None:
        with self._lock:
            last = self._pauses == 1
            self._pauses = max(0, self._pauses - 1)
        if last:
            for slot in self._lag_members():
                self.slots.signal(slot, signal.SIGCONT)
            self.log.write({"ev": "resume", "g": "lag"})
            self.say("lag group continued (SIGCONT)")

    # --- the layout ------------------------------------------------------------------

    def _describe(self) -> tuple[int, int, int | None]:
        for _attempt in range(5):
            code, payload, err = self.conn.cli("describe", TOPIC, timeout=60)
            if code == 0:
                break
            time.sleep(3.0)
        if code != 0 or not payload.get("topic"):
            raise OrderedError(f"describe failed: {err.strip()[-300:]}")
        topic = payload["topic"]
        self._active, self._epoch = int(topic["active"]), int(topic["epoch"])
        return self._active, self._epoch, topic.get("pending")

    def epoch(self) -> int:
        """The topic's current epoch: the number of layout changes since adoption."""
        with contextlib.suppress(OrderedError):
            self._describe()
        return self._epoch

    def _settled(self, timeout: float = 120.0) -> int:
        """The active count once no epoch is pending (the daemons complete those)."""
        deadline = time.monotonic() + timeout
        while True:
            active, _epoch, pending = self._describe()
            if pending is None or time.monotonic() > deadline:
                return active
            time.sleep(2.0)

    def _change(self, kind: FaultKind, how: str, steps: int) -> bool:
        active = self._settled()
        top, bottom = self.shape.max_partitions, self.shape.initial
        if how == "expand" and active >= top:
            how = "shrink"
        elif how == "shrink" and active <= bottom:
            how = "expand"
        to = min(top, active + steps) if how == "expand" else max(bottom, active - steps)
        started = time.monotonic()
        for _attempt in range(5):
            code, payload, err = self.conn.cli(
                how, TOPIC, "--to", str(to), "--timeout", "90", timeout=150
            )
            # ZooKeeper restarting: the command changed nothing; ask again.
            if code == 0 or "cannot connect to ZooKeeper" not in err:
                break
            time.sleep(3.0)
        took = time.monotonic() - started
        what = f"{active} -> {to}" if how == kind.value else f"{how} {active} -> {to}"
        if code == 0:
            self._active, self._epoch = to, int(payload.get("epoch", self._epoch + 1))
            self._fault(kind, "", f"{what}: epoch {self._epoch} sealed in {took:.1f} s")
            return True
        reason = err.strip().splitlines()[-1] if err.strip() else f"exit {code}"
        self._fault(kind, "", f"{what}: not sealed in {took:.1f} s ({reason})")
        return False

    def _layout_fault(self, fault: ScheduledFault) -> None:
        kind, params = fault.kind, fault.params
        if kind in (FaultKind.EXPAND, FaultKind.SHRINK):
            self._change(kind, kind.value, int(params["steps"]))
        elif kind is FaultKind.DEEP_CHAIN:
            self._pause_lag()
            try:
                for how in params["changes"]:
                    self._change(kind, how, 1)
            finally:
                self._later(5.0, "resume lag", self._resume_lag)
        elif kind is FaultKind.REGROW_RETIRED:
            self._pause_lag()
            try:
                steps = int(params["steps"])
                before = self._settled()
                if before - steps < self.shape.initial:
                    self._change(kind, "expand", steps)
                if self._change(kind, "shrink", steps):
                    held = self._retired_records()
                    self.say(f"retired partitions still hold {held} records; expanding over them")
                    self._change(kind, "expand", steps)
            finally:
                self._later(5.0, "resume lag", self._resume_lag)

    def _retired_records(self) -> int:
        from confluent_kafka import Consumer, TopicPartition

        probe = Consumer({"bootstrap.servers": self.conn.bootstrap, "group.id": "chaos-probe"})
        try:
            total = 0
            for p in range(self._active, self.shape.max_partitions):
                with contextlib.suppress(Exception):
                    low, high = probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=10)
                    total += max(0, high - low)
            return total
        finally:
            probe.close()

    # --- the cluster -----------------------------------------------------------------

    def _cluster_fault(self, fault: ScheduledFault) -> None:
        kind, params = fault.kind, fault.params
        if kind in self.zk.kinds:
            self.zk.inject(fault)
        elif kind is FaultKind.BROKER_RESTART:
            self._fault(kind, fault.target, f"stopping; down for {params['down_s']} s")
            restart_node(self.cluster_dir, fault.target, down_s=float(params["down_s"]))
            self._wait_brokers()
            self.say(f"{fault.target} is back")
        elif kind is FaultKind.ZOOKEEPER_RESTART:
            with self._lock:
                self.kills += 1
            self._fault(kind, "zookeeper", f"SIGKILL; down for {params['down_s']} s")
            restart_node(
                self.cluster_dir, "zookeeper", down_s=float(params["down_s"]), sig=signal.SIGKILL
            )
            self.say("zookeeper is back")
        elif kind is FaultKind.TRIM:
            code, payload, err = self.conn.cli("trim", TOPIC, "--consumed", timeout=120)
            parts = payload.get("partitions", payload)
            self._fault(kind, "", f"trim --consumed: exit {code} {str(parts)[:200]}")
        elif kind is FaultKind.RETENTION_SWEEP:
            code, _payload, err = self.conn.cli("retention", TOPIC, "--consumed-ms", "10000")
            self._fault(kind, "", f"consumed retention 10 s on: exit {code} {err.strip()[-120:]}")
        elif kind is FaultKind.OFFSET_RESET:
            self._offset_reset()

    def wait_readers_committed(self, timeout: float = 90.0) -> None:
        """Wait until every reader group has committed an offset of the topic.

        A trim waits only for groups it can see, by their commits: a group stopped
        before its first commit (a loaded machine can take seconds to start a member,
        and the lag group is stopped by the first faults) would lose the records trimmed
        meanwhile, which no client can prevent. The faults start after this.
        """
        from coordinator.kernel.kafka_admin import KafkaAdmin

        # The group whose commits a trim sees (a Spark query's commit group), and its topic.
        groups = {
            str(s.extra.get("commit_group", s.group)): str(s.extra.get("topic", TOPIC))
            for s in self.slots.slots.values()
            if s.kind == "reader"
        }
        admin = KafkaAdmin(self.conn.bootstrap, timeout=5.0, config={"log_level": 0})
        started = time.monotonic()
        waiting = sorted(groups)
        try:
            while waiting and not self.stop.is_set():
                for group in list(waiting):
                    topic = groups[group]
                    with contextlib.suppress(Exception):
                        partitions = range(admin.partition_count(topic))
                        if admin.committed_offsets(group, topic, partitions):
                            waiting.remove(group)
                if not waiting or time.monotonic() - started > timeout:
                    break
                self.stop.wait(0.5)
        finally:
            admin.close()
        took = time.monotonic() - started
        if waiting:
            self._say(f"no commit of {', '.join(waiting)} after {took:.1f} s; faults start anyway")
        else:
            self._say(f"every reader group committed ({', '.join(sorted(groups))}) in {took:.1f} s")

    def _wait_brokers(self, timeout: float = 180.0) -> None:
        from coordinator.kernel.kafka_admin import KafkaAdmin

        admin = KafkaAdmin(self.conn.bootstrap, timeout=5.0, config={"log_level": 0})
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                if admin.broker_count() >= self.shape.brokers:
                    return
            time.sleep(1.0)

    def _offset_reset(self) -> None:
        from coordinator.kernel.errors import OrderedKafkaError
        from coordinator.kernel.kafka_admin import KafkaAdmin
        from coordinator.kernel.kafka_retry import RetryPolicy

        members = [s for s in self.slots.slots.values() if s.group == "replay"]
        for slot in members:
            self.slots.signal(slot, signal.SIGCONT)
            self.slots.signal(slot, signal.SIGTERM)
        self.slots.wait_exit(members, 30.0, lambda: None)
        for slot in members:
            self.slots.signal(slot, signal.SIGKILL)
        admin = KafkaAdmin(self.conn.bootstrap, timeout=30.0)
        starts = admin.start_offsets(TOPIC, range(admin.partition_count(TOPIC)))
        offsets = {(TOPIC, p): max(low, 0) for p, low in starts.items()}
        # Kafka refuses while the group still has members (it may still be emptying).
        emptied = RetryPolicy(
            max_tries=None,
            deadline=60.0,
            delay=1.0,
            max_delay=1.0,
            jitter=0.0,
            retriable=lambda exc: isinstance(exc, OrderedKafkaError),
        )
        try:
            emptied.call(admin.alter_group_offsets, "replay", offsets)
        except OrderedKafkaError as exc:
            self.say(f"offset-reset failed: {exc}")
        self.log.write({"ev": "reset", "g": "replay"})
        self._fault(FaultKind.OFFSET_RESET, "replay", "group stopped, offsets reset to log start")
        for slot in members:
            # Started by the main loop: a child dies with the thread that started it.
            self._restart_later(slot, 0.0)

    def _sample_lows(self) -> None:
        from confluent_kafka import Consumer, TopicPartition

        probe = Consumer(
            {"bootstrap.servers": self.conn.bootstrap, "group.id": "chaos-probe", "log_level": 0}
        )
        seen: dict[int, int] = {}
        try:
            while not self._sampling.wait(2.0):
                for p in range(self.shape.max_partitions):
                    try:
                        low, _ = probe.get_watermark_offsets(TopicPartition(TOPIC, p), timeout=3)
                    except Exception:
                        continue
                    if low > seen.get(p, 0):
                        seen[p] = low
                        self.log.write({"ev": "low", "tp": p, "o": low})
        finally:
            probe.close()

    # --- the end ---------------------------------------------------------------------

    def drain(self, timeout: float) -> bool:
        """End the faults, continue everything, stop producers, let every group finish.

        Returns:
            Whether every reader exited by itself (it had read everything it got).
        """
        self.say("faults over: waiting for the running layout and cluster faults")
        deadline = time.monotonic() + 300
        while (
            (any(self._busy.values()) or not self._layout_q.empty() or not self._cluster_q.empty())
            and time.monotonic() < deadline
            and not self.stop.is_set()
        ):
            self._run_timers()
            time.sleep(0.5)
        self._layout_q.put(None)
        self._cluster_q.put(None)
        with self._lock:
            self._pauses = 1
        self._resume_lag()
        self._run_timers(everything=True)
        for slot in self.slots.slots.values():
            self.slots.signal(slot, signal.SIGCONT)
            if slot.wanted and not slot.alive:
                self.slots.start(slot)
        producers = [s for s in self.slots.slots.values() if s.kind == "producer"]
        # The readers (the exactly-once stage among them) drain after the producers.
        for slot in producers:
            self.slots.signal(slot, signal.SIGHUP)
        self.say("producers finishing")
        for slot in self.slots.wait_exit(producers, 90.0, lambda: None):
            self.slots.signal(slot, signal.SIGKILL)
        self.progress()
        readers = [
            s for s in self.slots.slots.values() if s.kind in ("reader", "pipeline") and s.alive
        ]
        for slot in readers:
            self.slots.signal(slot, signal.SIGHUP)
        self.say(f"groups reading to the end (at most {timeout:g} s)")
        last = [time.monotonic()]

        def tick() -> None:
            if time.monotonic() - last[0] > 10:
                last[0] = time.monotonic()
                self.progress()

        stuck = self.slots.wait_exit(readers, timeout, tick)
        for slot in stuck:
            self.say(f"{slot.ident} did not finish reading in time")
        self.progress()
        return not stuck

    def close(self) -> None:
        """Stop the sampler and the coordinators (SIGTERM, then SIGKILL)."""
        self._sampling.set()
        coordinators = [s for s in self.slots.slots.values() if s.kind == "coordinator"]
        for slot in coordinators:
            self.slots.signal(slot, signal.SIGTERM)
        for slot in self.slots.wait_exit(coordinators, 20.0, lambda: None):
            self.slots.signal(slot, signal.SIGKILL)
        self.log.close()
