"""A three-member ZooKeeper ensemble (``ordered cluster up --zookeepers 3``) under faults.

The test starts its own cluster (it kills ZooKeeper servers, so it never shares the
session cluster). An ``OrderedProducer`` and an ``OrderedConsumer`` (the verifiable
ones, whose histories the checker judges) run on an adopted topic while:

- one member, the leader, is SIGKILLed; the topic expands while it is down; ``ordered
  cluster up`` starts it again: traffic never stops;
- two of the three are SIGKILLed (quorum lost): the producer holds (its documented
  behaviour: ``produce`` raises ``LayoutUnavailableError``, a ``BufferError``, while
  its session is suspended; the verifiable producer polls and retries), nothing is
  delivered out of order; ``ordered cluster up`` starts them again, the producer goes
  on, the topic expands once more;

and the checker then finds 0 order violations and 0 lost records.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures import consumer_config
from helpers import create_topic, kill_process, run_cli, wait_until

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster
from ordered.devcluster.cluster import ClusterState
from ordered.devcluster.ensemble import member_roles, modes
from ordered.devcluster.process import ProcessRecord, is_alive
from ordered.verify import VerifiableProducer, VerifiableReader, check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(400)]

ROLES = member_roles(3)
KEYS = [f"k{i:02d}" for i in range(20)]


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A cluster of its own: one broker, a three-member ZooKeeper ensemble."""
    directory = tmp_path_factory.mktemp("zk-ensemble") / f"c-{uuid.uuid4().hex[:8]}"
    devcluster.up(directory, zookeepers=3, timeout=180)
    try:
        yield directory
    finally:
        devcluster.down(directory)


def _state(directory: Path) -> ClusterState:
    return devcluster.status(directory)


def _member(directory: Path, role: str) -> ProcessRecord:
    [record] = [p for p in _state(directory).processes if p.role == role]
    return record


def _modes(directory: Path) -> dict[str, str]:
    return modes(_state(directory).zookeeper_connect, ROLES)


def _leader(directory: Path) -> str:
    found: list[str] = []

    def elected() -> bool:
        found[:] = [r for r, m in _modes(directory).items() if m == "leader"]
        return len(found) == 1

    wait_until(elected, 60, what=lambda: f"one leader ({_modes(directory)})")
    return found[0]


def _kill(directory: Path, roles: list[str]) -> None:
    records = [_member(directory, role) for role in roles]
    for record in records:
        kill_process(record.pid)
    for record in records:
        wait_until(lambda r=record: not is_alive(r), 30, what=f"{record.role} to die")


def test_up_records_every_member_and_status_shows_the_quorum(ensemble: Path) -> None:
    status = run_cli("cluster", "status", "--dir", str(ensemble), "--json")
    assert status.returncode == 0, status.stderr
    payload = json.loads(status.stdout)
    assert payload["zookeepers"] == 3
    hosts = payload["zookeeper.connect"].split(",")
    assert len(hosts) == 3 and len(set(hosts)) == 3
    assert [p["role"] for p in payload["processes"]] == [*ROLES, "broker-1"]
    assert sorted(payload["zookeeper.modes"].values()) == ["follower", "follower", "leader"]
    env = run_cli("cluster", "env", "--dir", str(ensemble))
    assert f"ORDERED_ZOOKEEPER_CONNECT={payload['zookeeper.connect']}" in env.stdout
    # Each member has its own data directory and id.
    for i, role in enumerate(ROLES, start=1):
        assert (ensemble / role / "data" / "myid").read_text().strip() == str(i)
    even = run_cli("cluster", "up", "--dir", str(ensemble), "--zookeepers", "2")
    assert even.returncode == 2 and "expected 1, 3 or 5" in even.stderr


class _Traffic:
    """A verifiable producer and reader, each polled by a thread of its own."""

    def __init__(self, state: ClusterState, root: str, topic: str, history: Path) -> None:
        config = {
            "bootstrap.servers": state.bootstrap_servers,
            "ordered.zookeeper.connect": state.zookeeper_connect,
            "ordered.zookeeper.root": root,
            "ordered.zookeeper.session.timeout.ms": 6000,
            "linger.ms": 5,
        }
        self.producer = VerifiableProducer(config, "p1", topic, history / "p1.jsonl", KEYS, seed=7)
        group = "g-" + topic
        self.group = group
        reader_config = consumer_config(
            state.bootstrap_servers,
            state.zookeeper_connect,
            root,
            group,
            **{"ordered.zookeeper.session.timeout.ms": 6000, "max.partition.fetch.bytes": 8192},
        )
        self.reader = VerifiableReader(reader_config, group, "r1", topic, history / "r1.jsonl")
        self.sending = threading.Event()
        self.sending.set()
        self.reading = threading.Event()
        self.reading.set()
        self.errors: list[BaseException] = []
        self._threads = [
            threading.Thread(target=self._produce, daemon=True),
            threading.Thread(target=self._read, daemon=True),
        ]

    def start(self) -> None:
        self.reader.subscribe()
        for thread in self._threads:
            thread.start()

    def _produce(self) -> None:
        try:
            self.producer.run(200.0, stop=lambda: not self.sending.is_set())
            self.producer.close(60.0)
        except BaseException as exc:  # reported by the test
            self.errors.append(exc)

    def _read(self) -> None:
        try:
            while self.reading.is_set():
                self.reader.poll_once(0.2)
        except BaseException as exc:
            self.errors.append(exc)

    def counts(self) -> tuple[int, int, int]:
        """(sent, acked, delivered)."""
        return self.producer.sent, self.producer.acked, self.reader.delivered

    def goes_on(self, seconds: float, what: str) -> None:
        """Assert that sends, acks and deliveries all advance within ``seconds``."""
        before = self.counts()
        wait_until(
            lambda: all(now > then for now, then in zip(self.counts(), before, strict=True)),
            seconds,
            what=lambda: (
                f"traffic to go on {what} (sent/acked/delivered {before} -> {self.counts()})"
            ),
        )

    def stop(self) -> None:
        self.sending.clear()
        self._threads[0].join(90)
        acked = self.producer.acked
        # Deliveries count duplicates (records read again after a rebalance): once there
        # are as many as acked records, read on until nothing came for 10 s.
        wait_until(
            lambda: self.reader.delivered >= acked,
            120,
            what=lambda: f"{acked} deliveries ({self.reader.delivered})",
        )
        last = [self.reader.delivered, time.monotonic()]

        def quiet() -> bool:
            if self.reader.delivered != last[0]:
                last[:] = [self.reader.delivered, time.monotonic()]
            return time.monotonic() - last[1] > 10

        wait_until(quiet, 120, what="the reader to read to the end")
        self.reading.clear()
        self._threads[1].join(30)
        self.reader.close()


def test_clients_keep_order_through_a_member_kill_and_a_quorum_loss(
    ensemble: Path, tmp_path: Path
) -> None:
    state = _state(ensemble)
    root = f"/ens-{uuid.uuid4().hex[:8]}"
    topic = create_topic(state.bootstrap_servers, f"ens-{uuid.uuid4().hex[:8]}", 2)
    client = start_client(
        make_client(state.zookeeper_connect, session_timeout_s=10.0, command_deadline_s=20.0),
        20.0,
    )
    controller = Controller(LayoutStore(client, root), KafkaAdmin(state.bootstrap_servers, 10.0))
    controller.adopt(topic)
    history = tmp_path / "history"
    traffic = _Traffic(state, root, topic, history)
    try:
        traffic.start()
        traffic.goes_on(30, "at the start")

        # One member down (the leader): the other two elect a new one; nothing stops.
        leader = _leader(ensemble)
        _kill(ensemble, [leader])
        traffic.goes_on(30, f"with {leader} killed")
        assert _leader(ensemble) != leader
        controller.expand(topic, 3)
        traffic.goes_on(30, "after an expansion with a member down")
        devcluster.up(ensemble)  # starts the dead member; waits until all three serve
        assert sorted(_modes(ensemble).values()) == ["follower", "follower", "leader"]
        traffic.goes_on(30, f"with {leader} back")

        # Two of three down: no quorum. The producer holds (its session is suspended:
        # produce raises LayoutUnavailableError, which the verifiable producer retries).
        leader = _leader(ensemble)
        lost = [leader, next(r for r in ROLES if r != leader)]
        _kill(ensemble, lost)
        survivor = next(r for r in ROLES if r not in lost)
        wait_until(
            lambda: _modes(ensemble)[survivor] == "not serving",
            30,
            what=lambda: f"{survivor} to stop serving ({_modes(ensemble)})",
        )
        held: list[int] = []

        def holds() -> bool:
            held.append(traffic.producer.sent)
            return len(held) > 6 and held[-1] == held[-6]  # 5 s without a send

        wait_until(holds, 30, what=lambda: f"the producer to hold (sent {held[-8:]})")
        time.sleep(5)
        assert traffic.producer.sent == held[-1], "the producer sent without a quorum"
        devcluster.up(ensemble)
        traffic.goes_on(60, "once the quorum is back")
        controller.expand(topic, 4)
        traffic.goes_on(30, "after an expansion with the quorum back")
        # Each phase above ends as soon as traffic moves, so on a fast run the producer may
        # have sent for only a few seconds in all: send on to a volume worth checking.
        wait_until(
            lambda: traffic.producer.acked > 1500,
            60,
            what=lambda: f"1500 acked records ({traffic.producer.acked})",
        )
        traffic.stop()
    finally:
        traffic.sending.clear()
        traffic.reading.clear()
        close_client(client)
    assert traffic.errors == []

    verdict = check(read_events(sorted(history.iterdir())), [traffic.group])
    result: dict[str, Any] = verdict.to_dict()
    assert verdict.records == traffic.producer.acked > 1000
    assert verdict.violation_count == 0, result["violation_samples"]
    assert verdict.lost_count == 0, result["lost_samples"]
    assert verdict.holds
    assert {e["tp"] for e in read_events(sorted(history.iterdir())) if e["ev"] == "dlv"} == {
        0,
        1,
        2,
        3,
    }
