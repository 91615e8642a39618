"""The relay's and the daemon's watch-kept caches, and the commit tail, against real servers."""

from __future__ import annotations

import re
import socket
import threading
import time

import pytest
from confluent_kafka import Consumer, TopicPartition
from helpers import wait_until
from kazoo.client import KazooClient
from kit import Kit

from coordinator.daemon import CoordinatorDaemon, Role
from coordinator.daemon.topic_cache import TopicCache
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.positions import PositionService
from coordinator.kernel.store import LayoutStore, paths
from coordinator.relay.commit_tail import CommitTail
from coordinator.relay.position_relay import PositionRelay
from coordinator.relay.wait_cache import WaitCache, read_waits

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _commit(bootstrap: str, group: str, topic: str, partition: int, offset: int) -> None:
    """Commit as a plain consumer would (nothing is published to the position service)."""
    plain = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        plain.commit(offsets=[TopicPartition(topic, partition, offset)], asynchronous=False)
    finally:
        plain.close()


def test_wait_cache_follows_declares_clears_and_new_groups(
    store: LayoutStore, zk_root: str
) -> None:
    changed: list[str] = []
    cache = WaitCache(store.client, zk_root, changed.append)
    cache.start()  # before any group exists: {root}/groups is created later
    try:
        first = PositionService(store.client, zk_root, "g/one")
        second = PositionService(store.client, zk_root, "g two")
        first.declare("t1", "m-1", {0: 10, 1: 20})
        first.declare("t1", "m-2", {0: 5})
        first.declare("t2", "m-1", {3: 7})
        second.declare("t1", "m-9", {2: 1})
        want = {"g/one": {"t1": {0: 5, 1: 20}, "t2": {3: 7}}, "g two": {"t1": {2: 1}}}
        wait_until(lambda: cache.waits() == want, timeout=10, what="the declared waits")
        assert read_waits(store.client, zk_root) == want
        assert set(changed) == {"g/one", "g two"}

        first.declare("t1", "m-2", {0: 8})  # a changed wait
        first.declare("t2", "m-1", {})  # a cleared one
        want = {"g/one": {"t1": {0: 8, 1: 20}}, "g two": {"t1": {2: 1}}}
        wait_until(lambda: cache.waits() == want, timeout=10, what="the changes")
        assert read_waits(store.client, zk_root) == want

        store.client.delete(f"{zk_root}/groups/g%20two", recursive=True)  # a group removed
        want = {"g/one": {"t1": {0: 8, 1: 20}}}
        wait_until(lambda: cache.waits() == want, timeout=10, what="the removed group")
    finally:
        cache.stop()
    assert cache.waits() == {}


def test_topic_cache_follows_records_and_its_check_repairs_a_missed_event(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    cache = TopicCache(kit.store, lambda: None)
    cache.start()
    try:
        cache.refresh()
        assert topic not in cache.topics()
        kit.controller.adopt(topic)
        wait_until(lambda: (cache.refresh(), topic in cache.topics())[1], timeout=10, what="adopt")
        record = cache.topics()[topic]
        assert record == kit.store.get_topic(topic)
        assert topic not in cache.with_child(paths.AUTOSCALE_NODE)
        kit.store.client.create(paths.autoscale_path(kit.store.root, topic), b"")  # a policy node
        wait_until(
            lambda: topic in cache.with_child(paths.AUTOSCALE_NODE), timeout=10, what="policy"
        )

        # Lose the watch behind the cache's back: a change it cannot see.
        cache._watches[topic].stop()
        kit.controller.expand(topic, 3)
        time.sleep(0.5)
        assert cache.topics()[topic] == record  # stale: nothing told the cache
        fresh = cache.check()
        assert fresh[topic] == kit.store.get_topic(topic) != record
        wait_until(
            lambda: cache.topics()[topic] == fresh[topic], timeout=10, what="the repaired cache"
        )
    finally:
        cache.stop()


def test_commit_tail_sees_a_plain_commit_at_once(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    group = kit.group_factory()
    _commit(kit.bootstrap, kit.group_factory(), topic, 0, 1)  # __consumer_offsets exists from here
    seen: list[tuple[str, str, int]] = []
    stop = threading.Event()
    tail = CommitTail({"bootstrap.servers": kit.bootstrap}, lambda *c: seen.append(c))
    thread = threading.Thread(target=tail.run, args=(stop.is_set,), daemon=True)
    thread.start()
    try:
        # The tail starts at the end: repeat until its assignment has taken effect.
        def committed() -> bool:
            _commit(kit.bootstrap, group, topic, 1, 5)
            return (group, topic, 1) in seen

        wait_until(committed, timeout=30, what="the commit seen by the tail")
    finally:
        stop.set()
        thread.join(10)
    assert not thread.is_alive()


@pytest.mark.parametrize("tail", [True, False])
def test_relay_publishes_a_plain_commit_without_waiting_for_its_interval(
    kit: Kit, tail: bool
) -> None:
    """With a 60 s interval, only the commit tail can relay a commit within seconds."""
    topic = kit.topic_factory(2)
    group = kit.group_factory()
    _commit(kit.bootstrap, kit.group_factory(), topic, 0, 1)  # __consumer_offsets exists
    service = PositionService(kit.store.client, kit.zk_root, group)
    admin = KafkaAdmin(kit.bootstrap)
    relay = PositionRelay(kit.store.client, admin, kit.zk_root, interval=60.0, tail_commits=tail)
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop.is_set,), daemon=True)
    seen: list[int] = []
    service.watch(topic, 1, lambda progress: seen.append(progress.offset))
    thread.start()
    try:
        service.declare(topic, "waiter", {1: 3})
        # The declaration itself makes a full round (nothing committed yet).
        wait_until(lambda: (group, topic) in relay.targets, timeout=10, what="the wait")
        time.sleep(1.0)  # the tail's assignment takes effect
        _commit(kit.bootstrap, group, topic, 1, 4)
        if tail:
            wait_until(lambda: seen == [4], timeout=10, what="the relayed commit")
        else:
            time.sleep(5)
            assert seen == []  # the next round is a minute away
    finally:
        stop.set()
        relay.wake()
        thread.join(15)
        admin.close()
    assert not thread.is_alive()


def _requests_of(client: KazooClient, zk_hosts: str) -> int:
    """Requests ZooKeeper received from ``client``'s session (the ``cons`` command)."""
    host, port = zk_hosts.split(",")[0].rsplit(":", 1)
    with socket.create_connection((host, int(port)), timeout=5) as sock:
        sock.sendall(b"cons")
        text = b"".join(iter(lambda: sock.recv(65536), b"")).decode()
    session = f"sid=0x{client.client_id[0]:x},"
    for line in text.splitlines():
        if session in line:
            return int(re.search(r"recved=(\d+)", line).group(1))  # type: ignore[union-attr]
    raise AssertionError(f"session {session} not listed by cons")


def test_relay_rounds_read_nothing_from_zookeeper_while_nothing_changes(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    groups = [kit.group_factory() for _ in range(3)]
    for group in groups:
        PositionService(kit.store.client, kit.zk_root, group).declare(topic, "waiter", {0: 1_000})
    client = kit.kazoo_factory(session_timeout_s=30.0)  # pings every 10 s at most
    admin = KafkaAdmin(kit.bootstrap)
    relay = PositionRelay(
        client, admin, kit.zk_root, interval=0.05, tail_commits=False, check_interval=3600.0
    )
    stop = threading.Event()
    thread = threading.Thread(target=relay.run, args=(stop.is_set,), daemon=True)
    thread.start()
    try:
        wait_until(
            lambda: relay.targets == {(g, topic) for g in groups}, timeout=10, what="the waits"
        )
        time.sleep(0.5)  # the cache's first reads are answered
        before = _requests_of(client, kit.zk_hosts)
        time.sleep(2.0)  # about 40 rounds
        during = _requests_of(client, kit.zk_hosts) - before
    finally:
        stop.set()
        relay.wake()
        thread.join(15)
        admin.close()
    # Reading the waits every round cost 1 + 3 x 3 requests a round (~400 here).
    assert during <= 3, f"{during} requests in 2 s of rounds"


def test_an_idle_daemon_scans_without_reading_zookeeper(kit: Kit) -> None:
    for _ in range(3):
        kit.controller.adopt(kit.topic_factory(2))
    client = kit.kazoo_factory(session_timeout_s=30.0)
    admin = KafkaAdmin(kit.bootstrap)
    daemon = CoordinatorDaemon(
        client,
        admin,
        kit.zk_root,
        scan_interval=0.05,
        relay_interval=0,
        sweep_interval=0,
        autoscale_interval=0,
        check_interval=3600.0,
    )
    thread = threading.Thread(target=daemon.run, daemon=True)
    thread.start()
    try:
        wait_until(lambda: daemon.role is Role.LEADER, timeout=15, what="leadership")
        time.sleep(1.0)  # the first scan's reads and watches are answered
        before = _requests_of(client, kit.zk_hosts)
        time.sleep(2.0)  # about 40 scans
        during = _requests_of(client, kit.zk_hosts) - before
    finally:
        daemon.stop()
        thread.join(15)
        admin.close()
    # Reading every record each scan cost 1 + 2 x 3 requests a scan (~280 here).
    assert during <= 3, f"{during} requests in 2 s of scans"
