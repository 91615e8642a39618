"""A process of a chaos run: a verifiable producer, a verifiable reader or the EOS stage.

``python -m ordered.chaos.worker SPEC_JSON`` where the spec names the role
(``producer``, ``reader`` or ``pipeline``), its id, the cluster, the topic, its history and stats
files. Signals the run sends it:

* ``SIGTERM``: stop now, cleanly (a producer flushes and closes);
* ``SIGHUP``: drain: a producer stops sending, flushes and exits; a reader (or the
  exactly-once stage) reads on and exits once nothing came for ``idle_exit`` seconds;
* ``SIGUSR1``: expire this process's ZooKeeper session;
* ``SIGUSR2``: (reader) seek every assigned partition back to its log start.

Every second it rewrites its stats file (``sent``, ``acked``, ``delivered``...) for
the run's progress line.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import sys
import time
from pathlib import Path
from types import FrameType
from typing import Any

from coordinator.kernel.errors import OrderedError
from coordinator.kernel.zk import KAZOO_LOGGER, expire_session
from ordered.chaos.pipeline import run_pipeline
from ordered.chaos.spark_reader import exec_driver
from ordered.verify import HistoryWriter, VerifiableProducer, VerifiableReader

__all__ = ["main"]


class _Flags:
    def __init__(self) -> None:
        self.stop = False
        self.drain = False
        self.drain_at: float | None = None
        self.expire = False
        self.seek = False

    def drained(self, quiet_since: float, idle_exit: float, now: float | None = None) -> bool:
        """Whether a draining reader may exit: nothing came for ``idle_exit`` seconds.

        The quiet time counts from the later of the last record and the drain signal: a
        reader stopped (SIGSTOP) for a minute and drained as soon as it is continued has
        been quiet only since then, not since its last record before the stop; it
        still has to rejoin its group and catch up.
        """
        if self.drain_at is None:
            return False
        now = time.monotonic() if now is None else now
        return now - max(quiet_since, self.drain_at) > idle_exit

    def install(self) -> None:
        def on(sig: int, _frame: FrameType | None) -> None:
            if sig == signal.SIGTERM:
                self.stop = True
            elif sig == signal.SIGHUP:
                if self.drain_at is None:
                    self.drain_at = time.monotonic()
                self.drain = True
            elif sig == signal.SIGUSR1:
                self.expire = True
            elif sig == signal.SIGUSR2:
                self.seek = True

        for sig in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2):
            signal.signal(sig, on)
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the run stops us, not the terminal


def _write_stats(path: str, stats: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        json.dump(stats, handle)
    os.replace(tmp, path)


def _log(spec: dict[str, Any], text: str) -> None:
    print(f"{spec['id']}: {text}", file=sys.stderr, flush=True)


def _expire(client: Any, spec: dict[str, Any], fault_log: HistoryWriter) -> None:
    try:
        expire_session(client)
        fault_log.write({"ev": "expired", "who": spec["id"]})
        _log(spec, "ZooKeeper session expired on purpose")
    except OrderedError as exc:
        _log(spec, f"session expiry failed: {exc}")


def _run_producer(spec: dict[str, Any], flags: _Flags) -> None:
    config = {
        "bootstrap.servers": spec["bootstrap"],
        "ordered.zookeeper.connect": spec["zookeeper"],
        "ordered.zookeeper.root": spec["root"],
        "ordered.zookeeper.session.timeout.ms": 6000,
        "delivery.timeout.ms": 20000,
        "linger.ms": 5,
    }
    keys = [f"k{i:04d}" for i in range(int(spec["keys"]))]
    producer = VerifiableProducer(
        config,
        spec["id"],
        spec["topic"],
        spec["history"],
        keys,
        seed=int(spec["seed"]),
        padding=int(spec.get("padding", 64)),
    )
    events = HistoryWriter(spec["history"])
    rate = float(spec["rate"])
    next_stats = 0.0
    started = last = time.monotonic()
    credit = 0.0
    try:
        while not flags.stop and not flags.drain:
            now = time.monotonic()
            credit = min(credit + (now - last) * rate, max(rate, 1.0))
            last = now
            while credit >= 1.0 and not flags.stop:
                producer.send_one()
                credit -= 1.0
            producer.poll(0)
            if flags.expire:
                flags.expire = False
                _expire(producer.producer.zookeeper, spec, events)
            if now >= next_stats:
                next_stats = now + 1.0
                stats: dict[str, Any] = {"sent": producer.sent, "acked": producer.acked}
                stats.update(nacked=producer.nacked, up_s=round(now - started, 1))
                _write_stats(spec["stats"], stats)
            time.sleep(0.02)
    finally:
        producer.close(30.0)
        stats = {"sent": producer.sent, "acked": producer.acked, "nacked": producer.nacked}
        _write_stats(spec["stats"], {**stats, "done": True})
        events.close()


def _run_reader(spec: dict[str, Any], flags: _Flags) -> None:
    config = {
        "bootstrap.servers": spec["bootstrap"],
        "ordered.zookeeper.connect": spec["zookeeper"],
        "ordered.zookeeper.root": spec["root"],
        "ordered.zookeeper.session.timeout.ms": 6000,
        "auto.offset.reset": "earliest",
        "session.timeout.ms": 6000,
        "heartbeat.interval.ms": 500,
        "partition.assignment.strategy": "roundrobin",
        "topic.metadata.refresh.interval.ms": 2000,
        "ordered.gate.poll.interval.ms": 100,
        # Small fetches make librdkafka interleave partitions within a batch (as large
        # records do), so records of a key in several partitions race each other.
        "max.partition.fetch.bytes": 8192,
    }
    if spec.get("read_committed"):
        config["isolation.level"] = "read_committed"
    reader = VerifiableReader(config, spec["group"], spec["id"], spec["topic"], spec["history"])
    events = HistoryWriter(spec["history"])
    idle_exit = float(spec.get("idle_exit", 20.0))
    quiet_since = time.monotonic()
    next_stats = 0.0
    try:
        reader.subscribe()
        while not flags.stop:
            # A member between a revocation and its next assignment (a rebalance that a
            # stopped and resumed member waits out) has nothing to read yet: not idle.
            if reader.poll_once(0.5) or not reader.consumer.assignment():
                quiet_since = time.monotonic()
            elif flags.drained(quiet_since, idle_exit):
                break
            if flags.expire:
                flags.expire = False
                # The consumer keeps its kazoo client private; the fault needs it.
                _expire(reader.consumer._zk, spec, events)
            if flags.seek:
                flags.seek = False
                parts = reader.seek_to_beginning()
                _log(spec, f"sought partitions {parts} back to their log start")
            now = time.monotonic()
            if now >= next_stats:
                next_stats = now + 1.0
                _write_stats(spec["stats"], _reader_stats(reader))
    finally:
        final = {**_reader_stats(reader), "done": True}
        if flags.drain:
            # Why it stopped: what each gate says when nothing more came.
            _log(spec, f"drained: {json.dumps(final, sort_keys=True)}")
        reader.close()
        _write_stats(spec["stats"], final)
        events.close()


def _reader_stats(reader: VerifiableReader) -> dict[str, Any]:
    stats: dict[str, Any] = {"delivered": reader.delivered, "pass": reader.pass_no}
    try:
        consumer = reader.consumer
        stats["metrics"] = consumer.metrics
        stats["gates"] = {
            str(g.partition): f"{g.state.name} limit {g.limit} held {g.held}"
            for g in consumer.gate_status(waits=False)
        }
        positions = consumer.position(consumer.assignment())
        stats["positions"] = {str(tp.partition): tp.offset for tp in positions}
        # The consumer barrier's part (docs/consumer-barrier.md): checks it answered
        # without a request, and its state at the end.
        layouts = consumer._layouts
        stats["barrier"] = {
            "state": layouts.barrier.state.value,
            "virtual_checks": layouts.virtual_checks,
        }
    except Exception as exc:  # diagnostics only: never fail the reader for them
        stats["stats_error"] = repr(exc)
    return stats


def _run_pipeline(spec: dict[str, Any], flags: _Flags) -> None:
    last = {"copied": -1, "at": time.monotonic()}
    idle_exit = float(spec.get("idle_exit", 20.0))

    def report(stats: dict[str, Any]) -> None:
        if stats["copied"] != last["copied"]:
            last.update(copied=stats["copied"], at=time.monotonic())
        _write_stats(spec["stats"], stats)

    def stop() -> bool:
        return flags.stop or flags.drained(last["at"], idle_exit)

    run_pipeline(spec, stop, report)


def main(argv: list[str] | None = None) -> int:
    """Run the worker described by the JSON spec in ``argv[0]``."""
    args = sys.argv[1:] if argv is None else argv
    spec = json.loads(args[0])
    if spec.get("spark"):
        exec_driver(spec)  # the Spark driver (--spark): this process becomes it
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    # kazoo logs every refused connection while ZooKeeper restarts; the faults are logged.
    logging.getLogger(KAZOO_LOGGER).setLevel(logging.CRITICAL)
    flags = _Flags()
    flags.install()
    Path(spec["stats"]).parent.mkdir(parents=True, exist_ok=True)
    try:
        if spec["role"] == "producer":
            _run_producer(spec, flags)
        elif spec["role"] == "pipeline":
            _run_pipeline(spec, flags)
        else:
            _run_reader(spec, flags)
    except OrderedError as exc:
        _log(spec, f"failed: {exc}")
        return 1
    finally:
        # Done: a drain signal sent again now must not kill the exiting process (the
        # interpreter's shutdown restores the default action, which terminates).
        signal.signal(signal.SIGHUP, signal.SIG_IGN)
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
