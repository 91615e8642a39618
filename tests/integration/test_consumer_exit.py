"""A program that never closes its OrderedConsumer exits promptly after the servers died.

The servers are a private dev cluster this test starts and stops (never the session's).
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from confluent_kafka import Producer
from helpers import create_topic, unique

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster
from ordered.devcluster.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]

PROGRAM = textwrap.dedent(
    """
    import sys, time
    from ordered import OrderedConsumer

    bootstrap, zookeeper, topic = sys.argv[1:4]
    consumer = OrderedConsumer({
        "bootstrap.servers": bootstrap,
        "group.id": "exit-" + topic + "-" + sys.argv[5].replace(" ", "-"),
        "auto.offset.reset": "earliest",
        # With auto-commit a plain confluent consumer itself takes ~45 s to exit
        # against a dead broker (librdkafka's final commit): measured the same way.
        "enable.auto.commit": False,
        "ordered.zookeeper.connect": zookeeper,
        "ordered.zookeeper.session.timeout.ms": 4000,
    })
    consumer.subscribe([topic])
    got = 0
    deadline = time.monotonic() + 60
    while got < 5 and time.monotonic() < deadline:
        got += len([m for m in consumer.consume(10, 0.5) if m.error() is None])
    print("ready", got, flush=True)
    sys.stdin.readline()  # the servers are stopped meanwhile
    # Calls against servers that are gone, past the ZooKeeper session timeout.
    end = time.monotonic() + float(sys.argv[4])
    while time.monotonic() < end:
        consumer.consume(10, 0.5)
    if sys.argv[5] == "close":
        print("last", flush=True)
        consumer.close()
    else:
        print("last", flush=True)
        # ends here without consumer.close()
    """
)


def test_consumer_exits_promptly_after_servers_stop(
    private_cluster: tuple[ClusterState, Path],
) -> None:
    """Two programs, one that closes its consumer and one that does not, exit in seconds."""
    state, directory = private_cluster
    bootstrap, zookeeper = state.bootstrap_servers, state.zookeeper_connect
    topic = create_topic(bootstrap, unique("exit"), 2, 1, None)
    client = start_client(make_client(zookeeper), 15.0)
    try:
        Controller(LayoutStore(client), KafkaAdmin(bootstrap, timeout=10.0)).adopt(topic)
    finally:
        close_client(client)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(5):
        producer.produce(topic, key=f"k{i}", value=b"v")
    assert producer.flush(30) == 0

    endings = ("no close", "close")
    procs = {
        ending: subprocess.Popen(
            [sys.executable, "-c", PROGRAM, bootstrap, zookeeper, topic, "6", ending],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            text=True,
        )
        for ending in endings
    }
    took: dict[str, float] = {}
    try:
        for proc in procs.values():
            assert proc.stdout is not None
            assert proc.stdout.readline().split() == ["ready", "5"]
        devcluster.down(directory)
        for proc in procs.values():
            assert proc.stdin is not None
            proc.stdin.write("go\n")
            proc.stdin.flush()
        for ending, proc in procs.items():
            assert proc.stdout is not None
            assert proc.stdout.readline().strip() == "last"
            last_line = time.monotonic()
            proc.wait(timeout=60)
            took[ending] = time.monotonic() - last_line
            assert proc.returncode == 0, ending
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.kill()
                proc.wait()
    slow = {ending: round(t, 1) for ending, t in took.items() if t >= 5.0}
    assert not slow, f"seconds from the last line to exit: {slow}"
