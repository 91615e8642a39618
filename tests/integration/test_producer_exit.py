"""Leaving: a program never hangs at exit, and a clean exit costs the barrier nothing.

Each test runs the producer in a child process, the way an application would, and
measures from the outside.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import create_topic, unique, wait_until
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.errors import ClusterError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster
from ordered.devcluster.cluster import ClusterState
from ordered.producer.config import DEFAULT_DELIVERY_TIMEOUT_MS

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]

# The child: produce, say "ready", wait for "go", produce more, then end WITHOUT close().
CHILD = textwrap.dedent(
    """
    import sys, time
    from ordered import OrderedProducer, LayoutUnavailableError

    bootstrap, zookeeper, root, topic, marker, seconds = sys.argv[1:7]
    producer = OrderedProducer({
        "bootstrap.servers": bootstrap,
        "ordered.zookeeper.connect": zookeeper,
        "ordered.zookeeper.root": root,
        "linger.ms": 50,
        "log_level": 0,
    })
    for i in range(200):
        producer.produce(topic, b"v", key=b"k%d" % i)
    assert producer.flush(20) == 0
    with open(marker, "w") as f:
        f.write("ready")
    while open(marker).read() != "go":
        time.sleep(0.02)
    # Traffic up to the last line: records are still queued when the program ends.
    end = time.monotonic() + float(seconds)
    i = 0
    while True:
        try:
            producer.produce(topic, b"v", key=b"k%d" % (i % 500))
        except BufferError:  # LayoutUnavailableError included: ZooKeeper is gone
            pass
        producer.poll(0)
        i += 1
        if time.monotonic() >= end and i >= 100:
            break
        time.sleep(0.001)
    print("last line", time.time(), flush=True)
    """
)


def run_child(
    bootstrap: str, zookeeper: str, root: str, topic: str, marker: Path, seconds: float
) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    marker.write_text("")
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, bootstrap, zookeeper, root, topic, str(marker), f"{seconds}"],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        env=env,
    )


def wait_for(marker: Path, text: str, proc: subprocess.Popen[str], timeout: float = 30) -> None:
    def written() -> bool:
        if marker.read_text() == text:
            return True
        assert proc.poll() is None, "the child died"
        return False

    wait_until(written, timeout, what=f"{text!r} from the child")


def exit_seconds(proc: subprocess.Popen[str], timeout: float = 60) -> float:
    """Seconds from the child's last line to its exit (which must be clean)."""
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("last line"), line
    last = float(line.split()[-1])
    assert proc.wait(timeout) == 0
    return time.time() - last


@pytest.fixture
def private_cluster(tmp_path: Path) -> Iterator[ClusterState]:
    """A cluster of this test's own, so it can be stopped (never the session's)."""
    state = devcluster.up(tmp_path / "cluster")
    try:
        yield state
    finally:
        with contextlib.suppress(ClusterError):  # the test may have stopped it
            devcluster.down(tmp_path / "cluster")


def adopt(bootstrap: str, zookeeper: str, root: str, partitions: int) -> str:
    topic = create_topic(bootstrap, unique("exit"), partitions)
    client = start_client(make_client(zookeeper), 10)
    try:
        Controller(LayoutStore(client, root), KafkaAdmin(bootstrap, timeout=10.0)).adopt(topic)
    finally:
        close_client(client)
    return topic


def test_unclosed_producer_exits_promptly_after_zookeeper_and_kafka_stopped(
    private_cluster: ClusterState, tmp_path: Path
) -> None:
    bootstrap, zookeeper = private_cluster.bootstrap_servers, private_cluster.zookeeper_connect
    topic = adopt(bootstrap, zookeeper, "/exit", 2)
    marker = tmp_path / "marker"
    proc = run_child(bootstrap, zookeeper, "/exit", topic, marker, 0.5)
    try:
        wait_for(marker, "ready", proc)
        devcluster.down(tmp_path / "cluster")
        marker.write_text("go")
        # Plain confluent-kafka exits within ~0.05 s here; the wrapper must not hang on
        # ZooKeeper or Kafka (it flushes for at most 1 s without progress, and skips
        # every ZooKeeper write while ZooKeeper is unreachable).
        assert exit_seconds(proc) < 4.0
    finally:
        proc.kill()


def test_clean_exit_mid_traffic_does_not_hold_up_the_next_expansion(
    kit: Kit, tmp_path: Path
) -> None:
    topic = create_topic(kit.bootstrap, unique("exit"), 2)
    kit.controller.adopt(topic)
    marker = tmp_path / "marker"
    proc = run_child(kit.bootstrap, kit.zk_hosts, kit.zk_root, topic, marker, 1.0)
    try:
        wait_for(marker, "ready", proc)
        (registration,) = kit.store.producers(topic).values()
        assert registration.delivery_timeout_ms == DEFAULT_DELIVERY_TIMEOUT_MS
        marker.write_text("go")
        assert exit_seconds(proc) < 5.0
        # The exit hook flushed, acked and unregistered: nothing for the barrier to
        # wait for (without it the registration lingers for the session timeout and
        # an expansion in that window waits out the delivery timeout, 60 s).
        assert kit.store.producers(topic) == {}
        started = time.monotonic()
        result: Any = kit.controller.expand(topic, 3, timeout=30)
        assert time.monotonic() - started < 3.0
        assert result.expired == {}
    finally:
        proc.kill()
