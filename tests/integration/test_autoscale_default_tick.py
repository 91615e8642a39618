"""The autoscaler grows a topic under 10 s windows at the daemon's default 10 s tick.

Issue 29: ``ordered autoscale T --target-records-per-s 400 --up-window 10 --down-window
30 --cooldown 10`` under about four times its target held at "within the target band"
for 100 s, because neither half of a 10 s up-window held two of the daemon's 10 s
samples. The decision rule now uses the samples that span a slice that short.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest
from autoscale_helpers import Traffic
from helpers import wait_until
from kazoo.client import KazooClient

from coordinator.autoscale import DEFAULT_AUTOSCALE_INTERVAL_S
from coordinator.client.store import LayoutStore
from coordinator.daemon import CoordinatorDaemon
from coordinator.kafka.kafka_admin import KafkaAdmin
from ordered import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_ten_second_windows_grow_at_the_default_tick(
    kazoo_factory: Callable[..., KazooClient],
    zk_root: str,
    bootstrap: str,
    topic_factory: Callable[..., str],
    controller: Any,
    make_producer: Callable[..., OrderedProducer],
    ordered_cli: Callable[..., Any],
) -> None:
    assert DEFAULT_AUTOSCALE_INTERVAL_S == 10.0
    topic = topic_factory(2)
    controller.adopt(topic)
    store: LayoutStore = controller.store
    out = ordered_cli(
        "autoscale",
        topic,
        *("--target-records-per-s", "100", "--up-window", "10"),
        *("--down-window", "30", "--cooldown", "10"),
    )
    assert out.returncode == 0, out.stderr
    lines: list[str] = []
    daemon = CoordinatorDaemon(  # the daemon's own autoscale tick: 10 s
        kazoo_factory(command_deadline_s=10.0),
        KafkaAdmin(bootstrap, timeout=10.0),
        root=zk_root,
        progress=lines.append,
        relay_interval=0,
        sweep_interval=0,
    )
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        with Traffic(make_producer(), topic) as traffic:
            traffic.rate = 800.0  # 400/s per partition at 2: four times the target
            wait_until(
                lambda: (r := store.get_topic(topic)) is not None and r.active >= 4,
                timeout=90,
                what=f"a growth from 2 (daemon log: {lines})",
            )
    finally:
        daemon.stop()
        runner.join(30)
    decisions = store.autoscale_status(topic).decisions  # type: ignore[union-attr]
    assert any(d["action"] == "grow" and d["acted"] for d in decisions), decisions
    assert not any(d["rule"] == "band" for d in decisions), decisions
