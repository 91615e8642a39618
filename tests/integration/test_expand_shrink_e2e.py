"""End to end (issue 4): producers in subprocesses keep writing while the topic grows and
shrinks; everything in Kafka is then checked against the layouts and sealed boundaries.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures import consume_all, epoch_of, run_in_background
from helpers import kill_process, wait_until
from kit import Kit

from coordinator.control.controller import TransitionResult
from coordinator.kernel.store import EpochRecord
from linear_hash import partition_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

ROOT = Path(__file__).resolve().parents[2]
KEYS = 40

# One producer process: keyed records "name:key:seq" with a sequence number per key,
# until SIGTERM; then flush, close and print what was delivered.
PRODUCER = r"""
import json, signal, sys, time
from ordered.producer import OrderedProducer

config, name, topic, keys = json.loads(sys.argv[1]), sys.argv[2], sys.argv[3], int(sys.argv[4])
stop = False

def on_term(*_):
    global stop
    stop = True

signal.signal(signal.SIGTERM, on_term)
producer = OrderedProducer(config)
seq = [0] * keys
counts = {"delivered": 0, "failed": 0, "unavailable": 0}

def report(err, msg):
    counts["delivered" if err is None else "failed"] += 1

i = 0
while not stop:
    j = i % keys
    try:
        producer.produce(topic, f"{name}:{j}:{seq[j]}".encode(), f"k{j}", on_delivery=report)
    except BufferError as exc:
        if type(exc).__name__ == "LayoutUnavailableError":
            counts["unavailable"] += 1
        producer.poll(0.02)
        continue
    if i == 0:
        print("READY " + producer.producer_id, flush=True)
    seq[j] += 1
    i += 1
    if i % 50 == 0:
        producer.poll(0)
        time.sleep(0.004)
left = producer.flush(30)
producer.close()
counts.update(sent=i, left=left)
print("DONE " + json.dumps(counts), flush=True)
"""


class ProducerProcess:
    """An OrderedProducer in a subprocess; killed in ``stop`` whatever happens."""

    def __init__(self, name: str, topic: str, config: dict[str, Any]) -> None:
        self.name = name
        self.proc = subprocess.Popen(
            [sys.executable, "-c", PRODUCER, json.dumps(config), name, topic, str(KEYS)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            cwd=ROOT,
        )
        self.producer_id = ""

    def ready(self, timeout: float = 30.0) -> str:
        line = self._line(timeout)
        assert line.startswith("READY "), line + self._stderr()
        self.producer_id = line.split()[1]
        return self.producer_id

    def _line(self, timeout: float) -> str:
        assert self.proc.stdout is not None
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            return ""
        return self.proc.stdout.readline().strip()

    def _stderr(self) -> str:
        if self.proc.poll() is None or self.proc.stderr is None:
            return ""
        return "\n" + self.proc.stderr.read()[-3000:]

    def finish(self, timeout: float = 60.0) -> dict[str, int]:
        """SIGTERM, then the final counts (every record flushed)."""
        self.proc.send_signal(signal.SIGTERM)
        out, err = self.proc.communicate(timeout=timeout)
        done = [line for line in out.splitlines() if line.startswith("DONE ")]
        assert self.proc.returncode == 0 and done, f"{self.name}: rc {self.proc.returncode}\n{err}"
        counts: dict[str, int] = json.loads(done[-1][5:])
        return counts

    def kill(self) -> None:
        if self.proc.poll() is None:
            kill_process(self.proc.pid)
        with contextlib.suppress(Exception):
            self.proc.communicate(timeout=5)


@pytest.fixture
def processes() -> Iterator[list[ProducerProcess]]:
    started: list[ProducerProcess] = []
    yield started
    for process in started:
        process.kill()


def producer_config(bootstrap: str, zk_hosts: str, zk_root: str, **extra: Any) -> dict[str, Any]:
    config = {
        "bootstrap.servers": bootstrap,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
        # Records linger in librdkafka long enough that an ack sent before they are
        # delivered would let the seal read B_give too early: the checks below see it.
        "linger.ms": 100,
        # The checker below reads each record's epoch from the header (off by default
        # since issue 11): an instrument of this test, not needed for the order.
        "ordered.epoch.header": True,
    }
    config.update(extra)
    return config


def check_log(
    records: list[Any],
    epochs: list[EpochRecord],
    algorithm: str,
    killed: frozenset[str] = frozenset(),
) -> dict[str, int]:
    """Check every record against the layouts and the sealed boundaries.

    Args:
        records: Everything in the topic.
        epochs: The topic's epochs.
        algorithm: The topic's hash.
        killed: Producers killed mid-stream: their sequences may have gaps (records
            lost in flight), never duplicates or reordering.

    Returns:
        Records per producer name.
    """
    assert epochs and all(e.sealed for e in epochs), [(e.epoch, e.state) for e in epochs]
    initial = epochs[0].initial
    active = {e.epoch: e.to_active for e in epochs}
    by_partition: dict[int, list[tuple[int, int]]] = defaultdict(list)  # (offset, epoch)
    per_key: dict[tuple[str, str], list[tuple[int, int, int, int]]] = defaultdict(list)
    per_producer: dict[str, int] = defaultdict(int)
    for msg in records:
        epoch = epoch_of(msg)
        key = msg.key()
        # Placement: the layout of the epoch in the header.
        assert msg.partition() == partition_for(key, initial, active[epoch], algorithm), (
            key,
            epoch,
            msg.partition(),
        )
        name, j, seq = msg.value().decode().split(":")
        assert key == f"k{j}".encode()
        by_partition[msg.partition()].append((msg.offset(), epoch))
        per_key[(name, j)].append((int(seq), epoch, msg.partition(), msg.offset()))
        per_producer[name] += 1
    # The safe side of every sealed boundary, against what is really in Kafka.
    for e in epochs[1:]:
        givers = {a for a, _ in e.edges}
        receivers = {b for _, b in e.edges}
        assert set(e.boundaries) == givers | receivers, (e.epoch, e.boundaries, e.edges)
        for p in givers:
            late = [(o, h) for o, h in by_partition[p] if h < e.epoch and o >= e.boundaries[p]]
            assert not late, f"epoch {e.epoch}: old records past B_give[{p}]: {late[:5]}"
        for p in receivers:
            early = [(o, h) for o, h in by_partition[p] if o < e.boundaries[p] and h >= e.epoch]
            assert not early, f"epoch {e.epoch}: new records below B_recv[{p}]: {early[:5]}"
    # Per producer and key: no gap, no duplicate, epochs never go back, and within one
    # partition the sequence follows the offsets.
    for (name, j), items in per_key.items():
        items.sort()
        seqs = [s for s, _, _, _ in items]
        if name in killed:
            assert len(set(seqs)) == len(seqs), (name, j)
        else:
            assert seqs == list(range(len(seqs))), (name, j, seqs[:10])
        epochs_seen = [h for _, h, _, _ in items]
        assert epochs_seen == sorted(epochs_seen), (name, j)
        last: dict[int, int] = {}
        for _, _, p, o in items:
            assert o > last.get(p, -1), (name, j, p, o)
            last[p] = o
    return dict(per_producer)


def test_three_producers_through_expand_expand_shrink(
    kit: Kit, processes: list[ProducerProcess]
) -> None:
    topic = kit.topic_factory(4)
    adopted = kit.controller.adopt(topic)
    config = producer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root)
    for name in ("A", "B", "C"):
        processes.append(ProducerProcess(name, topic, config))
    ids = {p.ready() for p in processes}
    time.sleep(0.5)
    results: list[TransitionResult] = []
    for step, to in (("expand", 6), ("expand", 8), ("shrink", 5)):
        results.append(getattr(kit.controller, step)(topic, to, timeout=30))
        time.sleep(0.5)
    for result in results:
        assert ids <= set(result.producers), (result.producers, ids)
        assert result.expired == {}
        # Live producers ack within a fraction of a second.
        assert result.seconds < 10, result
    counts = {p.name: p.finish() for p in processes}
    for name, c in counts.items():
        assert c["failed"] == 0 and c["left"] == 0 and c["delivered"] == c["sent"], (name, c)

    epochs = kit.store.epochs(topic)
    assert [e.to_active for e in epochs] == [4, 6, 8, 5]
    per_producer = check_log(consume_all(kit.bootstrap, topic), epochs, adopted.algorithm)
    assert per_producer == {name: c["delivered"] for name, c in counts.items()}
    assert all(c["delivered"] > 1000 for c in counts.values()), counts


def test_killed_producer_seals_after_expiry_and_grace(
    kit: Kit, processes: list[ProducerProcess]
) -> None:
    topic = kit.topic_factory(4)
    adopted = kit.controller.adopt(topic)
    config = producer_config(
        kit.bootstrap,
        kit.zk_hosts,
        kit.zk_root,
        **{"ordered.zookeeper.session.timeout.ms": 2000, "delivery.timeout.ms": 3000},
    )
    survivor = ProducerProcess("S", topic, config)
    victim = ProducerProcess("V", topic, config)
    processes += [survivor, victim]
    survivor.ready()
    victim_id = victim.ready()
    time.sleep(0.5)
    # Frozen first, so it cannot ack the epoch about to be published; killed inside it.
    os.kill(victim.proc.pid, signal.SIGSTOP)
    frozen = time.monotonic()
    expand = run_in_background(kit.controller.expand, topic, 6, timeout=60)
    wait_until(lambda: (t := kit.store.get_topic(topic)) is not None and t.pending == 1, timeout=20)
    victim.kill()
    result = expand.join(60)
    sealed_after = expand.finished_at - frozen

    assert victim_id in result.producers and set(result.expired) == {victim_id}
    epoch = kit.store.get_epoch(topic, 1)
    assert epoch.sealed and epoch.sealed_at is not None
    # Sealed no sooner than the delivery timeout (+1 s) after the session was seen gone.
    assert epoch.sealed_at - epoch.expired[victim_id] >= 3.0 + 1.0 - 0.05, epoch
    # ... which itself took the session timeout: well under 15 s in all.
    assert 2.0 + 3.0 <= sealed_after < 15.0, sealed_after
    survivor_counts = survivor.finish()
    records = consume_all(kit.bootstrap, topic)
    per_producer = check_log(records, kit.store.epochs(topic), adopted.algorithm, frozenset({"V"}))
    assert per_producer["S"] == survivor_counts["delivered"]
    assert per_producer.get("V", 0) > 0
