"""``ordered adopt|expand|shrink|describe`` as a user runs them, against the real servers."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from fixtures import producer_record, snapshot
from helpers import closed_port, run_cli, unique
from kit import Kit

from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client
from ordered.devcluster.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def test_adopt_expand_shrink_describe(kit: Kit) -> None:
    topic = kit.topic_factory(4)
    adopted = kit.ordered_cli("adopt", topic, "--json")
    assert adopted.returncode == 0, adopted.stderr
    assert json.loads(adopted.stdout)["initial"] == 4
    again = kit.ordered_cli("adopt", topic)
    assert again.returncode == 0 and "initial 4, active 4" in again.stdout

    expanded = kit.ordered_cli("expand", topic, "--to", "6", "--json")
    assert expanded.returncode == 0, expanded.stderr
    result = json.loads(expanded.stdout)
    assert (result["epoch"], result["from_active"], result["to_active"]) == (1, 4, 6)
    assert set(result["boundaries"]) == {"0", "1", "4", "5"}
    assert "epoch 1 of" in expanded.stderr and "sealed" in expanded.stderr

    shrunk = kit.ordered_cli("shrink", topic, "--to", "5")
    assert shrunk.returncode == 0, shrunk.stderr
    assert "epoch 2 sealed, 6 -> 5 partitions" in shrunk.stdout

    described = kit.ordered_cli("describe", topic, "--json")
    assert described.returncode == 0, described.stderr
    d = json.loads(described.stdout)
    assert d["topic"]["active"] == 5 and d["kafka_partitions"] == 6
    assert [e["state"] for e in d["epochs"]] == ["sealed"] * 3
    text = kit.ordered_cli("describe", topic)
    assert "epoch 2 sealed: 6 -> 5, edges 5->1" in text.stdout
    assert KafkaAdmin(kit.bootstrap).partition_count(topic) == 6


def test_refusals_exit_1_usage_errors_exit_2_and_nothing_is_written(kit: Kit) -> None:
    topic = kit.topic_factory(4)
    not_adopted = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    assert kit.ordered_cli("expand", topic, "--to", "6").returncode == 0
    before = snapshot(kit.zk, kit.zk_root)
    admin = KafkaAdmin(kit.bootstrap)

    # 1: the request does not fit the state (as Kafka's tools exit on such errors).
    refusals = [
        (("expand", topic, "--to", "6"), "expand needs --to above the active partition count 6"),
        (("expand", topic, "--to", "5"), "above the active partition count 6"),
        (("shrink", topic, "--to", "3"), "below its initial partition count 4"),
        (("shrink", topic, "--to", "6"), "below the active partition count 6"),
        (("expand", not_adopted, "--to", "4"), f"topic {not_adopted} is not adopted"),
        (("shrink", not_adopted, "--to", "1"), "is not adopted"),
        (("expand", unique("missing"), "--to", "4"), "does not exist in Kafka"),
        (("adopt", unique("missing")), "does not exist in Kafka"),
    ]
    # 2: the command line itself is wrong; nothing is asked of the servers.
    usage = [
        (("expand", topic, "--to", "0"), "must be >= 1"),
        (("expand", topic, "--to", "many"), "expected a partition count"),
        (("expand", topic), "--to"),
        (("expand", topic, "--to", "1000000"), "must be <= 10000"),
        (("describe", ""), "a topic name must not be empty"),
        (("adopt", "a/b"), "is not a legal topic name"),
        (("describe", topic, "--kafka-timeout", "0.001"), "between 0.01 and 300"),
    ]
    for cases, code in ((refusals, 1), (usage, 2)):
        for args, message in cases:
            done = kit.ordered_cli(*args)
            assert done.returncode == code, (args, done.stdout, done.stderr)
            assert message in done.stderr, (args, done.stderr)
            assert "Traceback" not in done.stderr
    garbage = kit.ordered_cli("describe", topic, zookeeper="garbage:::99")
    assert garbage.returncode == 2 and "bad ZooKeeper host" in garbage.stderr
    assert "Traceback" not in garbage.stderr

    as_json = kit.ordered_cli("shrink", topic, "--to", "3", "--json")
    assert as_json.returncode == 1
    assert json.loads(as_json.stdout)["error"]["kind"] == "LayoutError"

    assert snapshot(kit.zk, kit.zk_root) == before
    assert admin.partition_count(topic) == 6
    assert admin.partition_count(not_adopted) == 2


@pytest.mark.serial  # a bound on a CLI call's wall time: the parallel workers' load breaks it
def test_zookeeper_down_fails_fast_with_exit_1(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    zookeeper = f"127.0.0.1:{closed_port()}"
    for args in (("expand", topic, "--to", "3"), ("describe", topic)):
        started = time.monotonic()
        done = kit.ordered_cli(*args, "--connect-timeout", "2", zookeeper=zookeeper)
        assert done.returncode == 1, done.stderr
        assert f"cannot connect to ZooKeeper at {zookeeper} within 2 s" in done.stderr
        assert time.monotonic() - started < 8
    assert KafkaAdmin(kit.bootstrap).partition_count(topic) == 2


@pytest.mark.serial  # a bound on a CLI call's wall time: the parallel workers' load breaks it
def test_kafka_down_fails_fast_with_exit_1_and_writes_nothing(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    before = snapshot(kit.zk, kit.zk_root)
    kafka = f"127.0.0.1:{closed_port()}"
    for args in (("adopt", unique("t")), ("expand", topic, "--to", "3")):
        started = time.monotonic()
        done = kit.ordered_cli(*args, "--kafka-timeout", "2", kafka=kafka)
        assert done.returncode == 1, done.stderr
        assert f"Kafka at {kafka}" in done.stderr and "transport failure" in done.stderr
        assert time.monotonic() - started < 8
    assert snapshot(kit.zk, kit.zk_root) == before


def test_corrupted_topic_record_exits_1_naming_the_znode(kit: Kit) -> None:
    topic = kit.topic_factory(3)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    path = f"{kit.zk_root}/topics/{topic}"
    kit.zk.set(path, b"{not json")
    before = snapshot(kit.zk, kit.zk_root)
    for args in (("expand", topic, "--to", "4"), ("describe", topic), ("adopt", topic)):
        done = kit.ordered_cli(*args)
        assert done.returncode == 1, done.stderr
        assert f"{path}: not a JSON TopicRecord record" in done.stderr
    kit.zk.set(path, json.dumps({"version": 3, "topic": topic}).encode())
    done = kit.ordered_cli("expand", topic, "--to", "4")
    assert done.returncode == 1 and "version 3" in done.stderr
    kit.zk.set(path, b"{not json")
    assert snapshot(kit.zk, kit.zk_root) == {**before, path: (b"{not json", before[path][1] + 2)}
    assert KafkaAdmin(kit.bootstrap).partition_count(topic) == 3


def test_second_request_while_pending_or_locked_is_transition_in_progress(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    producer = kit.kazoo_factory()
    try:
        LayoutStore(producer, kit.zk_root).register_producer(
            topic, producer_record("silent", 1000, host="h", client_id="c")
        )
        waiting = kit.ordered_cli("expand", topic, "--to", "3", "--timeout", "1")
        assert waiting.returncode == 1
        assert "waiting for 1 of 1 producers (silent)" in waiting.stderr
        assert "epoch 1 of" in waiting.stderr and "is still pending" in waiting.stderr
        other = kit.ordered_cli("expand", topic, "--to", "4")
        assert other.returncode == 1
        assert "transition in progress: epoch 1" in other.stderr
        shrink = kit.ordered_cli("shrink", topic, "--to", "2")
        assert shrink.returncode == 1 and "transition in progress" in shrink.stderr

        lock = LayoutStore(kit.zk, kit.zk_root).lock(topic, "test")
        assert lock.acquire(timeout=5)
        try:
            locked = kit.ordered_cli("expand", topic, "--to", "3")
            assert locked.returncode == 1
            assert "transition in progress: another controller holds the lock" in locked.stderr
        finally:
            lock.release()
    finally:
        close_client(producer)  # the session ends: the barrier passes after its grace
    # The same target resumes the pending epoch: the producer's session is gone, so
    # it passes once its 1 s delivery timeout and the 1 s grace are over.
    resumed = kit.ordered_cli("expand", topic, "--to", "3", "--json")
    assert resumed.returncode == 0, resumed.stderr
    result = json.loads(resumed.stdout)
    assert result["resumed"] and result["epoch"] == 1 and list(result["expired"]) == ["silent"]
    assert "resuming" in resumed.stderr


def test_servers_from_environment_or_the_dev_cluster_state(
    kit: Kit, cluster: ClusterState, tmp_path: Path
) -> None:
    topic = kit.topic_factory(2)
    from_env = run_cli(
        "adopt",
        topic,
        "--root",
        kit.zk_root,
        env={
            "ORDERED_ZOOKEEPER_CONNECT": kit.zk_hosts,
            "ORDERED_BOOTSTRAP_SERVERS": kit.bootstrap,
            "ORDERED_CLUSTER_DIR": str(tmp_path / "none"),
        },
        timeout=60,
    )
    assert from_env.returncode == 0, from_env.stderr
    from_state = run_cli(
        "describe",
        topic,
        "--root",
        kit.zk_root,
        env={
            "ORDERED_ZOOKEEPER_CONNECT": "",
            "ORDERED_BOOTSTRAP_SERVERS": "",
            "ORDERED_CLUSTER_DIR": cluster.directory,
        },
        timeout=60,
    )
    assert from_state.returncode == 0, from_state.stderr
    assert f"topic {topic}: initial 2" in from_state.stdout
    nowhere = run_cli(
        "describe",
        topic,
        env={
            "ORDERED_ZOOKEEPER_CONNECT": "",
            "ORDERED_BOOTSTRAP_SERVERS": "",
            "ORDERED_CLUSTER_DIR": str(tmp_path / "none"),
        },
        timeout=60,
    )
    assert nowhere.returncode == 2 and "no ZooKeeper to talk to" in nowhere.stderr
