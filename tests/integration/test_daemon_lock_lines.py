"""The daemon meets another controller's lock of a pending epoch: one line, no spinning."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from fixtures import producer_record
from helpers import wait_until
from kit import Kit

from coordinator.kernel.store import LayoutStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_LOCKED = "another controller holds the lock"


def test_a_held_lock_is_logged_once(kit: Kit, tmp_path: Path) -> None:
    topic = kit.adopted_topic(2)
    waiter = kit.kazoo_factory()
    record = producer_record("p-1", 60000, host=socket.gethostname(), pid=os.getpid())
    LayoutStore(waiter, kit.zk_root).register_producer(topic, record)  # never acks
    servers = [*kit.cli_servers, "--session-timeout", "2"]
    started: list[subprocess.Popen[bytes]] = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        with (tmp_path / f"{name}.log").open("wb") as log:
            proc = subprocess.Popen(
                [sys.executable, "-m", "ordered.cli", *args, *servers],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        started.append(proc)
        return proc

    def log(name: str) -> str:
        return (tmp_path / f"{name}.log").read_text()

    try:
        start("expand", "expand", topic, "--to", "3", "--timeout", "60")
        wait_until(
            lambda: "waiting for 1 of 1 producers (p-1)" in log("expand"),
            timeout=30,
            what="the expand to hold the lock in its barrier",
        )
        start("daemon", "coordinator", "--scan-interval", "0.2")
        wait_until(lambda: _LOCKED in log("daemon"), timeout=30, what="the daemon to meet the lock")
        time.sleep(5.0)  # the old daemon logged ~10 lines a second here
        lines = [line for line in log("daemon").splitlines() if _LOCKED in line]
        assert len(lines) == 1, lines[:5]
    finally:
        for proc in started:
            if proc.poll() is None:
                proc.kill()
                proc.wait(10)
