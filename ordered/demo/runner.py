"""``ordered demo``: a whole ordered-kafka deployment in one command, checked end to end.

The run:

1. uses the local dev cluster, starting it when none runs (and stopping it at the end);
2. creates a topic with 2 partitions and adopts it;
3. starts a coordinator daemon, consumer processes (one ``OrderedConsumer`` group)
   and producer processes (:mod:`ordered.demo.worker`);
4. runs the script :data:`SCRIPT` spread over ``--duration`` seconds: two expansions,
   a shrink, the trim of the retired partitions (done by the daemon's drain monitor
   once the group has committed them), and an expansion over the trimmed partitions;
5. stops the producers, lets the group read everything, stops every process it started;
6. checks the order end to end (:func:`ordered.verify.check`), draws the timeline
   (:mod:`ordered.demo.timeline`) and returns the summary.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Final

from coordinator.control.controller import Controller
from coordinator.groups.group_status import group_status
from coordinator.kernel.errors import ClusterError, OrderedError
from coordinator.kernel.identity import random_token
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import DEFAULT_ROOT, LayoutStore
from coordinator.kernel.zk import close_client, make_client, start_client
from coordinator.trims.retention import Sweeper
from ordered import devcluster, verify
from ordered.demo import timeline
from ordered.demo.monitor import Monitor, Sample
from ordered.demo.view import View, make_view

__all__ = ["INITIAL_PARTITIONS", "MIN_DURATION", "SCRIPT", "DemoOptions", "run_demo"]

INITIAL_PARTITIONS: Final = 2
"""Partitions of the demo topic at adoption."""

SCRIPT: Final = (("expand", 3), ("expand", 4), ("shrink", 2), ("trim", 0), ("expand", 4))
"""The layout changes, in order: ``(step, active count)``."""

SPARK: Final = "spark"
"""The Spark reader's process name and its group in the history."""

MIN_DURATION: Final = 15.0
"""The shortest ``--duration`` (seconds) that leaves each step time to show."""

_log = logging.getLogger("ordered.demo")
_rdkafka_log = logging.getLogger("ordered.demo.librdkafka")


@dataclass(frozen=True, slots=True)
class DemoOptions:
    """What ``ordered demo`` was asked for.

    Attributes:
        duration: Seconds of traffic over which the script runs.
        spark: Also read the topic with a Spark query on the ``ordered-kafka`` source.
        as_json: Print the summary as JSON (and nothing human-readable on stderr).
        cluster_dir: The dev cluster's directory (``None``: the default one).
        out: Directory for the timeline PNG and the workers' logs.
        root: The layout store's root znode.
        producers: Producer processes.
        consumers: Consumer processes (members of one group).
        rate: Records per second per producer.
    """

    duration: float = 60.0
    spark: bool = False
    as_json: bool = False
    cluster_dir: Path | None = None
    out: Path = Path("ordered-demo")
    root: str = DEFAULT_ROOT
    producers: int = 2
    consumers: int = 2
    rate: float = 200.0


@dataclass
class _Run:
    """Everything one run started, so that it can all be stopped."""

    options: DemoOptions
    view: View
    workdir: Path
    processes: dict[str, subprocess.Popen[bytes]] = field(default_factory=dict)
    steps: list[dict[str, Any]] = field(default_factory=list)
    marks: list[timeline.Mark] = field(default_factory=list)
    t0: float = 0.0


def _say(run: _Run, text: str) -> None:
    run.view.step(text)


def _spawn(run: _Run, name: str, argv: list[str]) -> None:
    log = (run.workdir / f"{name}.log").open("wb")
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    # A session of its own: Ctrl-C reaches the demo only, which stops everything in order.
    run.processes[name] = subprocess.Popen(
        argv, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
    )
    log.close()


def _stop(run: _Run, names: list[str], timeout: float = 30.0) -> list[str]:
    """SIGTERM the named processes, wait for them, SIGKILL stragglers; return those."""
    procs = {n: run.processes[n] for n in names if n in run.processes}
    for proc in procs.values():
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    deadline = time.monotonic() + timeout
    killed = []
    for name, proc in procs.items():
        try:
            proc.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            killed.append(name)
        run.processes.pop(name, None)
    return killed


@contextlib.contextmanager
def _cluster(run: _Run) -> Iterator[devcluster.ClusterState]:
    directory = (run.options.cluster_dir or devcluster.default_dir()).resolve()
    state = devcluster.load_state(directory) if directory.exists() else None
    if state is not None and len(state.running()) == len(state.processes):
        _say(run, f"using the running cluster in {directory} (Kafka {state.bootstrap_servers})")
        yield state
        return
    if state is not None and state.running():
        raise ClusterError(
            f"the cluster in {directory} is partly running; `ordered cluster down --dir "
            f"{directory}` first"
        )
    _say(run, f"starting the local cluster in {directory}")
    state = devcluster.up(directory, progress=lambda line: _log.info(line))
    _say(run, f"cluster up in {state.start_seconds:.1f} s (Kafka {state.bootstrap_servers})")
    try:
        yield state
    finally:
        devcluster.down(directory)
        _say(run, "stopped the local cluster")


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    # Its librdkafka lines go to logging, not stderr.
    admin = KafkaAdmin(bootstrap, timeout=30.0, config={"logger": _rdkafka_log})
    admin.create_topics([topic], partitions)


def _worker(run: _Run, role: str, name: str, common: list[str], extra: list[str]) -> None:
    files = ["--history", str(run.workdir / f"{name}.jsonl")]
    files += ["--stats", str(run.workdir / f"{name}.json")]
    argv = [sys.executable, "-m", "ordered.demo.worker", role, "--name", name, *files]
    _spawn(run, name, argv + common + extra)


def _stats(path: Path) -> dict[str, Any]:
    try:
        found: dict[str, Any] = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}  # the worker died before writing them; its history still counts
    return found


def _acked(workdir: Path, producers: list[str]) -> int:
    events = verify.read_events(workdir / f"{p}.jsonl" for p in producers)
    return len({(e["p"], e["s"]) for e in events if e.get("ev") == "ack"})


def _flowing(admin: KafkaAdmin, topic: str) -> bool:
    return sum(admin.end_offsets(topic, range(INITIAL_PARTITIONS)).values()) > 0


def _drained(status_of: Callable[[], Any]) -> bool:
    status = status_of()
    return all(
        p.end <= p.log_start or (p.committed is not None and p.committed >= p.end)
        for p in status.partitions
    )


def _wait(what: Callable[[], bool], timeout: float, poll: float = 0.25) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OrderedError):
            if what():
                return True
        time.sleep(poll)
    return False


def _behind(status_of: Callable[[], Any]) -> int | None:
    """The group's lag once it has committed on the topic (joined and reading), else None."""
    status = status_of()
    if not status.committed_any:
        return None
    return int(status.lag or 0)


def _script(
    run: _Run,
    controller: Controller,
    sweeper: Sweeper,
    store: LayoutStore,
    topic: str,
    behind: Callable[[], int | None] = lambda: 0,
) -> None:
    t0 = time.monotonic()
    gap = run.options.duration / (len(SCRIPT) + 1)
    done = t0
    for i, (kind, to) in enumerate(SCRIPT, start=1):
        if i == 1:
            # The demo's point: the first expansion while the group reads a backlog, so
            # the new partition's records wait at its gate (a red lane) for a few
            # seconds. Not on a clock: on a fresh machine the members take longer to
            # start, and a group already caught up at the expansion holds nothing.
            lag: int | None = None

            def joined() -> bool:
                nonlocal lag
                lag = behind()
                return lag is not None

            _wait(joined, 60.0)
            _say(
                run,
                "the group joined "
                + ("(no commit seen within 60 s)" if lag is None else f"{lag} records behind")
                + f": {kind} {to} now, while it reads its backlog",
            )
        else:
            # On schedule, but never sooner than half a gap after a late step: each
            # state stays long enough to be seen.
            time.sleep(max(0.0, t0 + i * gap - time.monotonic(), done + gap / 2 - time.monotonic()))
        started = time.monotonic()
        if kind == "trim":
            retired = _retired(store, topic)
            # The trim waits for every interested group, the Spark query's too (slow to start).
            patience = max(10.0, gap) + (240.0 if run.options.spark else 0.0)
            ok = _wait(partial(_trim, sweeper, store, topic, retired), patience)
            took = time.monotonic() - started
            text = (
                f"trim: retired partitions {retired} trimmed (DeleteRecords to their final "
                f"offsets) {took:.1f} s after the step began"
                if ok
                else f"trim: retired partitions {retired} not trimmed within {took:.0f} s"
            )
            run.steps.append(
                {"step": "trim", "partitions": retired, "ok": ok, "seconds": round(took, 3)}
            )
            run.marks.append(timeline.Mark(time.monotonic() - run.t0, "trimmed"))
            _say(run, text)
            done = time.monotonic()
            continue
        before = store.get_topic(topic)
        run.marks.append(timeline.Mark(started - run.t0))  # published here, pending until sealed
        run_step = controller.expand if kind == "expand" else controller.shrink
        result = run_step(topic, to, timeout=60.0)
        sealed = time.monotonic() - run.t0
        frm = before.active if before else result.from_active
        run.marks.append(timeline.Mark(sealed, f"epoch {result.epoch}: {frm}\u2192{to}"))
        run.steps.append(
            {
                "step": kind,
                "from": frm,
                "to": to,
                "epoch": result.epoch,
                "ok": True,
                "seconds": round(result.seconds, 3),
            }
        )
        _say(run, f"{kind} {frm} -> {to}: epoch {result.epoch} sealed in {result.seconds:.2f} s")
        done = time.monotonic()
    time.sleep(
        max(0.0, t0 + run.options.duration - time.monotonic(), done + gap - time.monotonic())
    )


def _retired(store: LayoutStore, topic: str) -> list[int]:
    record = store.get_topic(topic)
    return [] if record is None else list(range(record.active, record.physical))


def _trim(sweeper: Sweeper, store: LayoutStore, topic: str, partitions: list[int]) -> bool:
    """One round of the drain monitor on ``topic``: trims what the group has committed."""
    sweeper.sweep_topic(topic)
    stored = store.retired(topic)
    return all(p in stored and stored[p].state == "trimmed" for p in partitions)


def run_demo(options: DemoOptions) -> dict[str, Any]:
    """Run the demo and return its summary (see :mod:`ordered.demo`)."""
    if options.duration < MIN_DURATION:
        raise ValueError(f"--duration must be at least {MIN_DURATION:g} s")
    token = random_token()
    topic = group = f"ordered-demo-{token}"
    workdir = (options.out / token).resolve()
    workdir.mkdir(parents=True, exist_ok=True)
    view = make_view(options.as_json, f"ordered demo: topic {topic}")
    run = _Run(options, view, workdir)
    began = time.monotonic()
    try:
        with _cluster(run) as state:
            summary = _with_cluster(run, state, topic, group)
    finally:
        _stop(run, list(run.processes))
        view.close()
    summary["seconds"] = round(time.monotonic() - began, 1)
    return summary


def _with_cluster(
    run: _Run, state: devcluster.ClusterState, topic: str, group: str
) -> dict[str, Any]:
    options = run.options
    bootstrap, zookeeper = state.bootstrap_servers, state.zookeeper_connect
    client = make_client(zookeeper, session_timeout_s=10.0)
    start_client(client, 15.0)
    admin = KafkaAdmin(bootstrap, timeout=10.0)
    try:
        store = LayoutStore(client, options.root)
        _create_topic(bootstrap, topic, INITIAL_PARTITIONS)
        controller = Controller(store, admin, progress=lambda line: _log.info(line))
        controller.adopt(topic)
        _say(run, f"created and adopted topic {topic} ({INITIAL_PARTITIONS} partitions)")
        servers = ["--bootstrap-servers", bootstrap, "--zookeeper", zookeeper]
        _spawn(
            run,
            "coordinator",
            [
                sys.executable,
                "-m",
                "ordered.cli",
                "coordinator",
                *servers,
                "--root",
                options.root,
                "--sweep-interval",
                "0",
                "--scan-interval",
                "0.5",
            ],
        )
        common = ["--topic", topic, "--bootstrap", bootstrap, "--zookeeper", zookeeper]
        common += ["--root", options.root]
        consumers = [f"consumer-{i}" for i in range(options.consumers)]
        producers = [f"producer-{i}" for i in range(options.producers)]
        gap = options.duration / (len(SCRIPT) + 1)
        # The group can read twice what is written, but joins late: it is behind at the
        # first expansion, so that the gates have records to hold back.
        pace = 2.0 * options.rate * options.producers / options.consumers
        # Joining this late leaves a backlog of about (delay + start-up) seconds of
        # writes; read at twice the write rate, the first expansion's gate then holds
        # the new partition for about half of that: a few seconds.
        delay = max(4.0, gap * 0.5)
        if options.spark:  # first: Spark takes the longest to start
            _spawn(
                run,
                SPARK,
                [
                    *[
                        sys.executable,
                        "-m",
                        "ordered.verify.spark_query",
                        *common,
                        "--group",
                        SPARK,
                    ],
                    *["--commit-group", f"{group}-spark"],
                    *["--history", str(run.workdir / f"{SPARK}.jsonl")],
                    *["--stats", str(run.workdir / f"{SPARK}.json")],
                ],
            )
        for i, name in enumerate(producers):
            _worker(
                run, "producer", name, common, ["--rate", f"{options.rate:g}", "--seed", str(i)]
            )
        monitor = Monitor(store, admin, topic, group, on_sample=run.view.update)
        monitor.begin()
        run.t0 = monitor.start
        try:
            if not _wait(partial(_flowing, admin, topic), 60.0):
                raise ClusterError(f"no record reached {topic} within 60 s; see {run.workdir}")
            if options.spark and not _wait(lambda: bool(_stats(run.workdir / f"{SPARK}.json")), 60):
                raise ClusterError(f"the Spark reader did not start; see {run.workdir}/spark.log")
            for name in consumers:
                extra = ["--group", group, "--max-rate", f"{pace:g}"]
                _worker(run, "consumer", name, common, [*extra, "--start-delay", f"{delay:g}"])
            _say(
                run,
                f"records are flowing; started a coordinator daemon, {len(producers)} producer "
                f"and {len(consumers)} consumer processes (group {group}, joining late)",
            )
            # The daemon sweeps nothing on its own here: the trim is a step of the script.
            _script(
                run,
                controller,
                Sweeper(store, admin),
                store,
                topic,
                partial(_behind, lambda: group_status(store, admin, topic, group)),
            )
            _stop(run, producers, timeout=60)
            _say(run, "stopped the producers; the group reads the rest")
            drained = _wait(
                lambda: _drained(lambda: group_status(store, admin, topic, group)), 60.0
            )
            if not drained:
                _say(run, "the group did not read everything within 60 s")
            if options.spark:
                acked = _acked(run.workdir, producers)
                spark_ok = _wait(
                    lambda: (
                        _stats(run.workdir / "spark.json").get("rows", 0) >= acked
                        or "error" in _stats(run.workdir / "spark.json")
                    ),
                    180.0,
                    poll=1.0,
                )
                drained = drained and spark_ok
                _say(
                    run,
                    f"the Spark query read {_stats(run.workdir / f'{SPARK}.json').get('rows', 0)}"
                    " rows",
                )
            time.sleep(1.0)  # one more sample of the quiet topic for the picture
        finally:
            monitor.stop()
        _stop(run, consumers)
        _stop(run, [SPARK], timeout=60)
        _stop(run, ["coordinator"])
        _say(run, "stopped the consumers and the coordinator daemon")
        return _summarise(run, topic, group, monitor.samples, producers, consumers, drained)
    finally:
        admin.close()
        close_client(client)


def _longest_blocked(samples: list[Sample]) -> float:
    longest = 0.0
    since: dict[int, float] = {}
    for s in samples:
        for p, part in s.parts.items():
            if part.state == "blocked":
                since.setdefault(p, s.t)
                longest = max(longest, s.t - since[p])
            else:
                since.pop(p, None)
    return longest


def _summarise(
    run: _Run,
    topic: str,
    group: str,
    samples: list[Sample],
    producers: list[str],
    consumers: list[str],
    drained: bool,
) -> dict[str, Any]:
    workdir = run.workdir
    names = producers + consumers + ([SPARK] if run.options.spark else [])
    groups = [group] + ([SPARK] if run.options.spark else [])
    verdict = verify.check(
        verify.read_events(workdir / f"{n}.jsonl" for n in names), complete_groups=groups
    )
    produced = sum(_stats(workdir / f"{p}.json").get("sent", 0) for p in producers)
    members = {c: _stats(workdir / f"{c}.json") for c in consumers}
    gate_wait = max([m.get("longest_gate_wait_s", 0.0) for m in members.values()] + [0.0])
    delivered = verdict.groups.get(group, {}).get("delivered", 0)
    png = timeline.draw(
        samples,
        run.marks,
        workdir / "timeline.png",
        f"ordered demo: topic {topic}, {len(producers)} producers, group of {len(consumers)}",
    )
    epochs = [s for s in run.steps if "epoch" in s]
    summary: dict[str, Any] = {
        "topic": topic,
        "group": group,
        "produced": produced,
        "records": verdict.records,
        "delivered": delivered,
        "duplicates": verdict.duplicates,
        "violations": verdict.violation_count,
        "lost": verdict.lost_count,
        "violation_examples": [v.to_dict() for v in verdict.violations[:10]],
        "lost_examples": verdict.lost[:10],
        "epochs": max((s["epoch"] for s in epochs), default=0),
        "layout_changes": epochs,
        "steps": run.steps,
        # How long records waited at a closed gate (the operator's view, as `describe
        # --group` reports it, sampled); a member pauses a partition only once it has
        # fetched up to the gate, which can be much shorter.
        "longest_gate_wait_s": round(_longest_blocked(samples), 3),
        "longest_member_pause_s": round(gate_wait, 3),
        "consumers": members,
        "spark": (
            {**verdict.groups.get(SPARK, {}), **_stats(workdir / f"{SPARK}.json")}
            if run.options.spark
            else None
        ),
        "drained": drained,
        "png": str(png),
        "logs": str(workdir),
    }
    # The demo's point is a gate that held records back: without one it showed nothing.
    summary["gate_held"] = summary["longest_gate_wait_s"] > 0.0
    summary["ok"] = (
        summary["gate_held"]
        and summary["violations"] == 0
        and summary["lost"] == 0
        and drained
        and all(s["ok"] for s in run.steps)
        and verdict.holds
        and verdict.records > 0
    )
    return summary
