"""``ordered coordinator`` completes what a killed controller left pending; failover."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from fixtures import expire_session, producer_record, run_in_background
from helpers import wait_until
from kazoo.client import KazooClient
from kit import Kit

from coordinator.control.controller import BarrierTimeoutError, Controller
from coordinator.daemon import CoordinatorDaemon, Role
from coordinator.kernel.errors import StoreError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import AckRecord, LayoutStore, paths
from coordinator.kernel.zk import close_client

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


class Processes:
    """Subprocesses started by a test; every one is killed at the end."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.started: list[subprocess.Popen[bytes]] = []

    def start(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        log = (self.directory / f"{name}.log").open("wb")
        proc = subprocess.Popen(
            [sys.executable, "-m", "ordered.cli", *args],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        self.started.append(proc)
        return proc

    def log(self, name: str) -> str:
        return (self.directory / f"{name}.log").read_text()

    def kill_all(self) -> None:
        for proc in self.started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)


@pytest.fixture
def procs(tmp_path: Path) -> Iterator[Processes]:
    p = Processes(tmp_path)
    try:
        yield p
    finally:
        p.kill_all()


@pytest.fixture
def zk(kazoo_factory: Callable[..., KazooClient]) -> KazooClient:
    return kazoo_factory(command_deadline_s=10.0)


def servers(zk_hosts: str, bootstrap: str, root: str) -> list[str]:
    return [
        "--zookeeper",
        zk_hosts,
        "--bootstrap-servers",
        bootstrap,
        "--root",
        root,
        "--session-timeout",
        "2",
    ]


def register(client: KazooClient, root: str, topic: str, pid: str, timeout_ms: int) -> None:
    record = producer_record(pid, timeout_ms, host=socket.gethostname(), pid=os.getpid())
    LayoutStore(client, root).register_producer(topic, record)


def sealed(store: LayoutStore, topic: str, epoch: int) -> bool:
    record = store.find_epoch(topic, epoch)
    return record is not None and record.sealed


def test_daemon_completes_the_epoch_of_a_killed_expand(kit: Kit, procs: Processes) -> None:
    topic = kit.topic_factory(2)
    store = LayoutStore(kit.zk, kit.zk_root)
    Controller(store, KafkaAdmin(kit.bootstrap)).adopt(topic)
    producer = kit.kazoo_factory()
    register(producer, kit.zk_root, topic, "p-1", 60000)
    cli = procs.start(
        "expand", "expand", topic, "--to", "4", *servers(kit.zk_hosts, kit.bootstrap, kit.zk_root)
    )
    wait_until(
        lambda: "waiting for 1 of 1 producers (p-1)" in procs.log("expand"),
        timeout=20,
        what="the expand to wait in the barrier",
    )
    cli.kill()  # SIGKILL mid-barrier: its lock lives until its session ends
    assert cli.wait(timeout=10) == -signal.SIGKILL
    record = store.get_topic(topic)
    assert record is not None and record.pending == 1 and record.active == 4

    daemon = procs.start(
        "daemon", "coordinator", *servers(kit.zk_hosts, kit.bootstrap, kit.zk_root)
    )
    wait_until(lambda: ": leader" in procs.log("daemon"), timeout=15, what="leadership")
    time.sleep(1.0)
    assert not sealed(store, topic, 1), "sealed without the ack"
    acked = time.monotonic()
    LayoutStore(producer, kit.zk_root).ack(
        topic, 1, AckRecord(id="p-1", epoch=1, last_offsets={}, acked_at=time.time())
    )
    # The killed run's lock goes with its 2 s session, then the daemon's resume seals.
    wait_until(lambda: sealed(store, topic, 1), timeout=20, what="the daemon to seal")
    assert time.monotonic() - acked < 10
    final = store.get_topic(topic)
    assert final is not None and final.pending is None and final.active == 4
    wait_until(lambda: "sealed epoch 1 of" in procs.log("daemon"), timeout=5)

    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    log = procs.log("daemon")
    assert "coordinator stopped" in log and "Traceback" not in log
    assert kit.zk.get_children(paths.election_path(kit.zk_root)) == []


def _leader_pid(zk: KazooClient, root: str) -> int:
    contenders = zk.Election(paths.election_path(root)).contenders()
    assert contenders, "no daemon in the election"
    return int(contenders[0].rsplit(":", 1)[1])


def test_second_daemon_takes_over_when_the_leader_is_killed(kit: Kit, procs: Processes) -> None:
    topic = kit.topic_factory(2)
    store = LayoutStore(kit.zk, kit.zk_root)
    controller = Controller(store, KafkaAdmin(kit.bootstrap))
    controller.adopt(topic)
    a = procs.start("a", "coordinator", *servers(kit.zk_hosts, kit.bootstrap, kit.zk_root))
    b = procs.start("b", "coordinator", *servers(kit.zk_hosts, kit.bootstrap, kit.zk_root))
    wait_until(
        lambda: len(kit.zk.Election(paths.election_path(kit.zk_root)).contenders()) == 2,
        timeout=15,
        what="both daemons in the election",
    )
    leader_pid = _leader_pid(kit.zk, kit.zk_root)
    leader, follower = (a, b) if leader_pid == a.pid else (b, a)
    follower_log = "b" if follower is b else "a"
    assert ": leader" not in procs.log(follower_log)

    producer = kit.kazoo_factory()
    register(producer, kit.zk_root, topic, "p-2", 1000)
    with pytest.raises(BarrierTimeoutError):
        controller.expand(topic, 3, timeout=0.5)
    # The leader now resumes the epoch and waits in the barrier too; kill it there.
    wait_until(
        lambda: "waiting for 1 of 1 producers (p-2)" in procs.log("a" if leader is a else "b"),
        timeout=10,
        what="the leader to resume the epoch",
    )
    leader.kill()
    assert leader.wait(timeout=10) == -signal.SIGKILL
    # The producer goes away too: the new leader seals after 1 s + 1 s grace.
    close_client(producer)
    gone = time.monotonic()
    wait_until(lambda: ": leader" in procs.log(follower_log), timeout=15, what="takeover")
    assert _leader_pid(kit.zk, kit.zk_root) == follower.pid
    wait_until(lambda: sealed(store, topic, 1), timeout=20, what="the new leader to seal")
    took = time.monotonic() - gone
    assert took < 12, took
    epoch = store.get_epoch(topic, 1)
    assert list(epoch.expired) == ["p-2"]
    follower.send_signal(signal.SIGTERM)
    assert follower.wait(timeout=15) == 0


def test_sigterm_while_the_leader_waits_in_a_barrier_stops_cleanly(
    kit: Kit, procs: Processes
) -> None:
    topic = kit.topic_factory(2)
    store = LayoutStore(kit.zk, kit.zk_root)
    controller = Controller(store, KafkaAdmin(kit.bootstrap))
    controller.adopt(topic)
    producer = kit.kazoo_factory()
    register(producer, kit.zk_root, topic, "p-3", 60000)
    with pytest.raises(BarrierTimeoutError):
        controller.expand(topic, 3, timeout=0.3)
    daemon = procs.start(
        "daemon",
        "coordinator",
        *servers(kit.zk_hosts, kit.bootstrap, kit.zk_root),
        "--resume-timeout",
        "60",
    )
    wait_until(
        lambda: "waiting for 1 of 1 producers (p-3)" in procs.log("daemon"),
        timeout=15,
        what="the daemon to wait in the barrier",
    )
    stopping = time.monotonic()
    daemon.send_signal(signal.SIGTERM)
    assert daemon.wait(timeout=15) == 0
    assert time.monotonic() - stopping < 3
    log = procs.log("daemon")
    assert "controller was stopped while waiting for producer(s) p-3" in log
    assert "coordinator stopped" in log and "Traceback" not in log
    record = store.get_topic(topic)
    assert record is not None and record.pending == 1  # left for the next leader
    assert kit.zk.get_children(f"{kit.zk_root}/topics/{topic}/lock") == []


def test_in_process_daemon_leads_again_after_its_session_expires(kit: Kit) -> None:
    client = kit.kazoo_factory(session_timeout_s=2.0, command_deadline_s=10.0)
    roles: list[str] = []
    daemon = CoordinatorDaemon(
        client, KafkaAdmin(kit.bootstrap), kit.zk_root, progress=roles.append, scan_interval=0.2
    )
    running = run_in_background(daemon.run)
    try:
        wait_until(lambda: daemon.role is Role.LEADER, timeout=10, what="leadership")
        expire_session(client, kit.zk_hosts)
        wait_until(
            lambda: any(r.endswith(": follower") for r in roles), timeout=10, what="step down"
        )
        wait_until(
            lambda: daemon.role is Role.LEADER and roles[-1].endswith(": leader"),
            timeout=15,
            what="leadership again after the new session",
        )
        # Leading again means completing epochs again, even next to a corrupted record.
        client.create(f"{kit.zk_root}/topics/bad-topic", b"garbage", makepath=True)
        topic = kit.topic_factory(2)
        store = LayoutStore(client, kit.zk_root)
        controller = Controller(store, KafkaAdmin(kit.bootstrap))
        controller.adopt(topic)
        other = kit.kazoo_factory(session_timeout_s=2.0)
        register(other, kit.zk_root, topic, "p-4", 60000)
        with pytest.raises(BarrierTimeoutError):
            controller.expand(topic, 3, timeout=0.3)
        LayoutStore(other, kit.zk_root).ack(
            topic, 1, AckRecord(id="p-4", epoch=1, last_offsets={}, acked_at=time.time())
        )
        wait_until(lambda: sealed(store, topic, 1), timeout=15, what="the seal")
        assert any(r.startswith("skipping bad-topic") for r in roles)
        close_client(other)
    finally:
        daemon.stop()
        running.join(15)
        close_client(client)
    assert daemon.role is Role.STOPPED


def test_controller_session_lost_mid_barrier_leaves_the_epoch_pending(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    client = kit.kazoo_factory(session_timeout_s=2.0, command_deadline_s=10.0)
    other = kit.kazoo_factory()
    store = LayoutStore(client, kit.zk_root)
    controller = Controller(store, KafkaAdmin(kit.bootstrap))
    controller.adopt(topic)
    register(other, kit.zk_root, topic, "p-5", 60000)
    expand = run_in_background(controller.expand, topic, 3, timeout=30)
    observer = LayoutStore(other, kit.zk_root)
    wait_until(lambda: observer.find_epoch(topic, 1) is not None, timeout=10)
    time.sleep(0.3)
    expire_session(client, kit.zk_hosts)
    with pytest.raises(StoreError, match="session lost"):
        expand.join(10)
    record = observer.get_topic(topic)
    assert record is not None and record.pending == 1
    # The lock went with the session: another controller can resume at once.
    observer.ack(topic, 1, AckRecord(id="p-5", epoch=1, last_offsets={}, acked_at=time.time()))
    result = Controller(observer, KafkaAdmin(kit.bootstrap)).resume(topic, timeout=10)
    assert result is not None and result.epoch == 1
