"""What a Kafka operator needs from ``ordered``: list, dry runs, guarded unadopt, describe
with Kafka down, groups with lag and members, JSON-only stderr, honest barrier progress."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import Consumer, TopicPartition
from fixtures import producer_record, snapshot
from helpers import closed_port, run_cli, wait_until
from kit import Kit

from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


@pytest.fixture
def silent_server() -> Iterator[str]:
    """A loopback server that accepts connections and never answers (a hung broker)."""
    server = socket.create_server(("127.0.0.1", 0))
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(server.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    stop.set()
    thread.join(5)
    for s in held:
        s.close()
    server.close()


def test_list_and_json_stderr(
    ordered_cli: Callable[..., Any], topic_factory: Callable[..., str]
) -> None:
    empty = ordered_cli("list")
    assert empty.returncode == 0 and "no adopted topic under the store root" in empty.stdout
    first, second = topic_factory(2), topic_factory(3)
    assert ordered_cli("adopt", first).returncode == 0
    assert ordered_cli("adopt", second, "--unordered").returncode == 0
    expanded = ordered_cli("expand", first, "--to", "3", "--json")
    assert expanded.returncode == 0, expanded.stderr
    # --json: nothing human-readable on stderr, only JSON lines.
    lines = expanded.stderr.strip().splitlines()
    assert lines and all(json.loads(line)["level"] == "info" for line in lines)
    assert any("published" in json.loads(line)["message"] for line in lines)

    listed = json.loads(ordered_cli("list", "--json").stdout)
    by_name = {t["name"]: t for t in listed["topics"]}
    assert set(by_name) == {first, second}
    assert (by_name[first]["active"], by_name[first]["epoch"]) == (3, 1)
    assert by_name[first]["state"] == "sealed" and by_name[second]["state"] == "unordered"
    text = ordered_cli("list").stdout.splitlines()
    assert text[0].split() == ["TOPIC", "INITIAL", "ACTIVE", "EPOCH", "STATE", "ALGORITHM"]
    assert [first, "2", "3", "1", "sealed", "murmur3"] in [line.split() for line in text]


def test_dry_runs_show_the_plan_and_write_nothing(kit: Kit) -> None:
    topic = kit.topic_factory(3)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    assert kit.ordered_cli("expand", topic, "--to", "5").returncode == 0
    before = snapshot(kit.zk, kit.zk_root)

    grow = kit.ordered_cli("expand", topic, "--to", "7", "--dry-run", "--json")
    assert grow.returncode == 0, grow.stderr
    plan = json.loads(grow.stdout)
    assert plan["dry_run"] and (plan["from_active"], plan["to_active"], plan["epoch"]) == (5, 7, 2)
    assert plan["edges"] == [[0, 6], [2, 5]]
    assert (plan["receive"], plan["give"], plan["retire"]) == ([5, 6], [0, 2], [])
    assert plan["create"] == [5, 6]
    text = kit.ordered_cli("expand", topic, "--to", "7", "--dry-run").stdout
    assert "edges 0->6, 2->5" in text and "receive 5, 6" in text and "give 0, 2" in text

    cut = json.loads(kit.ordered_cli("shrink", topic, "--to", "3", "--dry-run", "--json").stdout)
    assert cut["edges"] == [[3, 0], [4, 1]]
    assert (cut["retire"], cut["give"], cut["receive"]) == ([3, 4], [3, 4], [0, 1])
    refused = kit.ordered_cli("shrink", topic, "--to", "2", "--dry-run")
    assert refused.returncode == 1 and "below its initial partition count 3" in refused.stderr

    gone = json.loads(kit.ordered_cli("unadopt", topic, "--dry-run", "--json").stdout)
    assert gone["dry_run"] and gone["adopted"] and gone["epochs"] == 2
    assert snapshot(kit.zk, kit.zk_root) == before
    assert KafkaAdmin(kit.bootstrap).partition_count(topic) == 5


def test_unadopt_refuses_while_producers_are_registered_unless_forced(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    producer = kit.kazoo_factory()
    LayoutStore(producer, kit.zk_root).register_producer(
        topic, producer_record("p-web-1-0", host="web-1", pid=77, client_id="orders")
    )
    before = snapshot(kit.zk, kit.zk_root)
    refused = kit.ordered_cli("unadopt", topic)
    assert refused.returncode == 1, refused.stderr
    assert "refusing to unadopt" in refused.stderr
    assert "p-web-1-0 (host web-1, pid 77, client.id orders)" in refused.stderr
    assert "loses its order" in refused.stderr and "--force" in refused.stderr
    assert snapshot(kit.zk, kit.zk_root) == before

    forced = kit.ordered_cli("unadopt", topic, "--force", "--json")
    assert forced.returncode == 0, forced.stderr
    assert json.loads(forced.stdout)["unadopted"] is True
    assert json.loads(forced.stdout)["producers"] == ["p-web-1-0"]
    warning = [json.loads(line) for line in forced.stderr.strip().splitlines()]
    assert any(w["level"] == "warning" and "loses its order" in w["message"] for w in warning)
    close_client(producer)


def test_describe_summary_and_kafka_down(kit: Kit, silent_server: str) -> None:
    topic = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    assert kit.ordered_cli("expand", topic, "--to", "3").returncode == 0
    producer = kit.kazoo_factory()
    LayoutStore(producer, kit.zk_root).register_producer(
        topic, producer_record("p-silent", 60000, host="h")
    )
    waiting = kit.ordered_cli("expand", topic, "--to", "4", "--timeout", "1")
    assert waiting.returncode == 1

    text = kit.ordered_cli("describe", topic).stdout.splitlines()
    assert text[0] == f"{topic}: 4 active partitions (initial 2, 4 in Kafka), epoch 2, murmur3"
    assert text[1].startswith("pending: epoch 2 (3 -> 4), published ")
    assert "waits for 1 of 1 producer(s) to ack: p-silent" in text[1]
    described = json.loads(kit.ordered_cli("describe", topic, "--json").stdout)
    assert described["summary"][0] == text[0] and described["kafka"]["reachable"] is True
    assert described["topic"]["pending"] == 2 and described["pending_acks"] == []

    # Kafka stopped (nothing listens): the ZooKeeper layout at once, with a note.
    started = time.monotonic()
    down = kit.ordered_cli("describe", topic, "--json", kafka=f"127.0.0.1:{closed_port()}")
    assert down.returncode == 0, down.stderr
    payload = json.loads(down.stdout)
    assert payload["kafka"]["reachable"] is False and "refused" in payload["kafka"]["error"]
    assert payload["topic"]["active"] == 4 and payload["kafka_partitions"] is None
    assert "Kafka is unreachable" in payload["summary"][1]
    assert time.monotonic() - started < 15

    # Kafka hung (connects, never answers): --kafka-timeout bounds the wait.
    started = time.monotonic()
    hung = kit.ordered_cli("describe", topic, "--kafka-timeout", "3", kafka=silent_server)
    took = time.monotonic() - started
    assert hung.returncode == 0, hung.stderr
    assert "Kafka is unreachable" in hung.stdout and "epoch 2 pending: 3 -> 4" in hung.stdout
    # 3 s of Kafka timeout plus the interpreter's start (seconds on a loaded machine).
    assert 3 <= took < 12, took
    close_client(producer)

    servers = ["--zookeeper", kit.zk_hosts, "--bootstrap-servers", kit.bootstrap]
    wrong = run_cli("describe", topic, *servers, "--root", kit.zk_root + "-wrong", timeout=60)
    assert wrong.returncode == 0, wrong.stderr
    assert "not adopted" in wrong.stdout and "hint: the store root" in wrong.stdout


def test_describe_group_lag_members_and_all_groups(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    assert kit.ordered_cli("adopt", topic).returncode == 0
    from confluent_kafka import Producer

    producer = Producer({"bootstrap.servers": kit.bootstrap})
    for i in range(10):
        producer.produce(topic, b"v", partition=i % 2)
    producer.flush(30)

    nobody = json.loads(
        kit.ordered_cli("describe", topic, "--group", kit.group_factory(), "--json").stdout
    )
    assert nobody["exists"] is False and nobody["members"] == []

    group = kit.group_factory()
    consumer = Consumer(
        {
            "bootstrap.servers": kit.bootstrap,
            "group.id": group,
            "client.id": "lag-probe",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    try:
        consumer.subscribe([topic])
        wait_until(lambda: consumer.poll(0.5) is not None or consumer.assignment(), timeout=60)
        member = json.loads(kit.ordered_cli("describe", topic, "--group", group, "--json").stdout)
        assert member["exists"] is True and member["committed_any"] is False
        assert [m["client_id"] for m in member["members"]] == ["lag-probe"]
        text = kit.ordered_cli("describe", topic, "--group", group).stdout
        assert "has never committed" in text and "lag-probe" in text

        consumer.commit(offsets=[TopicPartition(topic, 0, 2)], asynchronous=False)
        status = json.loads(kit.ordered_cli("describe", topic, "--group", group, "--json").stdout)
        parts = {p["partition"]: p for p in status["partitions"]}
        assert (parts[0]["committed"], parts[0]["end"], parts[0]["lag"]) == (2, 5, 3)
        assert parts[1]["lag"] is None and status["lag"] == 3
        assert parts[0]["client_id"] == "lag-probe" and parts[0]["host"]
        assert parts[0]["consumer_id"] == status["members"][0]["consumer_id"]
        table = kit.ordered_cli("describe", topic, "--group", group).stdout.splitlines()
        assert ["0", "active", "2", "5", "3", "open"] in [line.split() for line in table]

        every = json.loads(kit.ordered_cli("describe", topic, "--all-groups", "--json").stdout)
        assert [g["group"] for g in every["groups"]] == [group]
    finally:
        consumer.close()


def test_barrier_progress_counts_down_and_the_seal_counts_the_epoch_age(
    kit: Kit, tmp_path: Any
) -> None:
    topic = kit.topic_factory(2)
    servers = kit.cli_servers
    assert run_cli("adopt", topic, *servers, timeout=60).returncode == 0
    silent, leaving = kit.kazoo_factory(), kit.kazoo_factory()
    LayoutStore(silent, kit.zk_root).register_producer(topic, producer_record("p-silent", 2000))
    LayoutStore(leaving, kit.zk_root).register_producer(topic, producer_record("p-leaving", 15000))
    log = tmp_path / "expand.log"
    with log.open("wb") as out:
        expand = subprocess.Popen(
            [
                *(sys.executable, "-m", "ordered.cli", "expand", topic, "--to", "3"),
                *(*servers, "--session-timeout", "2", "--timeout", "9"),
            ],
            stdout=subprocess.DEVNULL,
            stderr=out,
        )
    try:
        wait_until(lambda: "published" in log.read_text(), timeout=60, what="the publish")
        close_client(leaving)  # gone: waited out for its delivery timeout
        assert expand.wait(timeout=60) == 1
    finally:
        if expand.poll() is None:
            expand.kill()
    waits = [line for line in log.read_text().splitlines() if "waiting for" in line]
    # Who is waited for, with countdowns; never the same line twice.
    assert len(waits) == len(set(waits)) and len(waits) >= 2, waits
    assert all("gives up in" in line for line in waits), waits
    assert any("1 gone, waiting out their delivery timeout (" in line for line in waits), waits
    assert "s left)" in waits[-1]

    close_client(silent)
    resumed = run_cli("expand", topic, "--to", "3", *servers, "--session-timeout", "2", timeout=120)
    assert resumed.returncode == 0, resumed.stderr
    [sealed] = [line for line in resumed.stderr.splitlines() if "sealed:" in line]
    # "in X s" counts from the publish (at least the 9 s of the first run), and the
    # resuming run's own share is shown apart.
    age = float(sealed.split(" partitions in ")[1].split(" s")[0])
    run = float(sealed.split("(this run ")[1].split(" s)")[0])
    assert age - run >= 9 - 0.5, sealed
