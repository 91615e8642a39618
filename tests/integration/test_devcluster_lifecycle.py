"""A dev cluster of its own, whose servers the tests stop: status, partial restarts,
ports kept across restarts, idempotent ``down``, and the daemon's exit while ZooKeeper
is stopped."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from helpers import kill_process, run_cli, wait_until

from ordered.devcluster.cluster import load_state
from ordered.devcluster.process import is_alive

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def cli(directory: Path, *args: str) -> Any:
    return run_cli("cluster", *args, "--dir", str(directory), timeout=240)


def process(directory: Path, role: str) -> Any:
    state = load_state(directory)
    assert state is not None
    [record] = [p for p in state.processes if p.role == role]
    return record


@pytest.fixture(scope="module")
def own_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    directory = tmp_path_factory.mktemp("lifecycle") / "c"
    up = cli(directory, "up", "--json")
    assert up.returncode == 0, up.stderr
    try:
        yield directory
    finally:
        run_cli("cluster", "down", "--dir", str(directory), timeout=120)


def test_status_fails_while_a_server_is_stopped_and_up_restarts_it(own_cluster: Path) -> None:
    healthy = cli(own_cluster, "status", "--json")
    assert healthy.returncode == 0, healthy.stderr
    before = json.loads(healthy.stdout)
    assert before["running"] is True
    zookeeper = process(own_cluster, "zookeeper")

    broker = process(own_cluster, "broker-1")
    kill_process(broker.pid)
    wait_until(lambda: not is_alive(broker), timeout=30, what="the broker to die")
    dead = cli(own_cluster, "status", "--json")
    assert dead.returncode == 1
    assert json.loads(dead.stdout)["running"] is False
    assert json.loads(dead.stdout)["stopped"] == ["broker-1"]
    assert "broker-1 stopped" in dead.stderr and "ordered cluster up" in dead.stderr
    text = cli(own_cluster, "status")
    assert text.returncode == 1 and f"process broker-1 pid {broker.pid} stopped" in text.stdout

    restarted = cli(own_cluster, "up", "--json")
    assert restarted.returncode == 0, restarted.stderr
    after = json.loads(restarted.stdout)
    assert after["bootstrap.servers"] == before["bootstrap.servers"]
    assert after["zookeeper.connect"] == before["zookeeper.connect"]
    assert "ZooKeeper on" in restarted.stderr and "is running" in restarted.stderr
    assert process(own_cluster, "zookeeper") == zookeeper  # left alone
    assert process(own_cluster, "broker-1").pid != broker.pid
    assert cli(own_cluster, "status").returncode == 0


def test_sigterm_stops_the_daemon_within_5_s_while_zookeeper_is_stopped(
    own_cluster: Path, tmp_path: Path
) -> None:
    state = load_state(own_cluster)
    assert state is not None
    log = tmp_path / "daemon.log"
    with log.open("wb") as out:
        daemon = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "ordered.cli",
                "coordinator",
                "--json",
                "--zookeeper",
                state.zookeeper_connect,
                "--bootstrap-servers",
                state.bootstrap_servers,
                "--session-timeout",
                "4",
            ],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    try:

        def lines() -> list[dict[str, Any]]:
            return [json.loads(line) for line in log.read_text().splitlines()]

        def said(text: str) -> bool:
            return any(text in line["message"] for line in lines())

        wait_until(lambda: said(": leader"), timeout=60, what="the daemon to lead")
        zookeeper = process(own_cluster, "zookeeper")
        kill_process(zookeeper.pid, signal.SIGTERM)
        wait_until(lambda: not is_alive(zookeeper), timeout=30, what="ZooKeeper to stop")
        wait_until(
            lambda: said("ZooKeeper connection lost"), timeout=30, what="the loss to be logged"
        )
        time.sleep(2)  # the daemon's calls now hang in ZooKeeper retries
        stopping = time.monotonic()
        daemon.send_signal(signal.SIGTERM)
        code = daemon.wait(timeout=30)
        took = time.monotonic() - stopping
        assert took < 5, took
        assert code == 0
        # JSON lines only (the --json daemon), none of them an empty relay message.
        messages = [line["message"] for line in lines()]
        assert "coordinator stopped" in messages
        assert not [m for m in messages if m.rstrip().endswith(":")]
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait(10)
    restored = cli(own_cluster, "up")
    assert restored.returncode == 0, restored.stderr


def test_down_is_idempotent_and_up_keeps_the_ports(own_cluster: Path) -> None:
    state = load_state(own_cluster)
    assert state is not None
    assert cli(own_cluster, "down").returncode == 0
    again = cli(own_cluster, "down", "--json")
    assert again.returncode == 0, again.stderr
    assert json.loads(again.stdout)["stopped"] == []
    assert "not running; nothing to stop" in cli(own_cluster, "down").stdout
    assert cli(own_cluster, "status").returncode == 1

    warm = cli(own_cluster, "up", "--json")
    assert warm.returncode == 0, warm.stderr
    settings = json.loads(warm.stdout)
    assert settings["bootstrap.servers"] == state.bootstrap_servers
    assert settings["zookeeper.connect"] == state.zookeeper_connect
    assert settings["cluster.id"] == state.cluster_id
