"""Committed-offset reads of the coordinator while the broker restarts (real Kafka).

The coordinator daemon's consumed-retention sweep reads every interested group's
committed offsets every few seconds (``KafkaAdmin.group_offsets``). Through the admin
API's ``list_consumer_group_offsets``, librdkafka 2.16 crashed the process (an
``rd_kafka_enq_once_del_source_return`` assertion or a segfault) when such reads timed
out while a broker restarted. A child process reads as the sweep does, with a short
timeout, through two restarts of a private cluster's broker: it must live on, and
read the committed offsets right once the broker is back.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import create_topic, unique, wait_until

from coordinator.kernel.errors import OrderedKafkaError
from coordinator.kernel.kafka_admin import KafkaAdmin
from ordered.devcluster.cluster import ClusterState
from ordered.devcluster.restart import restart_node

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]

# Reads eight groups' offsets in a loop (one group has commits) until the stop file
# exists, then prints "calls failures offsets-of-the-first-group".
READER = textwrap.dedent(
    """
    import json, pathlib, sys
    from coordinator.kernel.errors import OrderedKafkaError
    from coordinator.kernel.kafka_admin import KafkaAdmin
    bootstrap, topic, stop = sys.argv[1], sys.argv[2], pathlib.Path(sys.argv[3])
    admin = KafkaAdmin(bootstrap, timeout=1.0)
    calls = failures = 0
    while not stop.exists():
        for g in range(8):
            try:
                admin.group_offsets(f"{topic}-g{g}", topic, [0, 1])
            except OrderedKafkaError:
                failures += 1
            calls += 1
    admin.close()
    final = KafkaAdmin(bootstrap, timeout=30.0)
    print(calls, failures, json.dumps(final.group_offsets(f"{topic}-g0", topic, [0, 1])))
    final.close()
    """
)


def test_group_offsets_live_through_broker_restarts(
    private_cluster: tuple[ClusterState, Path], tmp_path: Path
) -> None:
    state, directory = private_cluster
    bootstrap = state.bootstrap_servers
    topic = create_topic(bootstrap, unique("restart"), 2, 1)
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": f"{topic}-g0"})
    committer.commit(
        offsets=[TopicPartition(topic, 0, 3), TopicPartition(topic, 1, 5)], asynchronous=False
    )
    committer.close()

    stop, log = tmp_path / "stop", tmp_path / "reader.log"
    with log.open("w") as stderr:  # a file: librdkafka's logs must not fill a pipe
        reader = subprocess.Popen(
            [sys.executable, "-c", READER, bootstrap, topic, str(stop)],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
    probe = KafkaAdmin(bootstrap, timeout=5.0)
    try:
        for _ in range(2):
            restart_node(directory, "broker-1", down_s=8.0)

            def back() -> bool:
                try:
                    return probe.committed_offsets(f"{topic}-g0", topic, [0, 1]) == {0: 3, 1: 5}
                except OrderedKafkaError:
                    return False

            wait_until(back, timeout=120.0, interval=0.5, what="the broker back")
            assert reader.poll() is None, f"the reader died: {log.read_text()[-1500:]}"
    finally:
        probe.close()
        stop.touch()
        out, _ = reader.communicate(timeout=120)
    assert reader.returncode == 0, f"exit {reader.returncode}: {log.read_text()[-1500:]}"
    calls, failures, offsets = out.split(maxsplit=2)
    # The restarts were seen (reads failed meanwhile), and the reads recovered.
    assert int(failures) > 0 and int(calls) > int(failures)
    assert offsets.strip() == '{"0": 3, "1": 5}'
