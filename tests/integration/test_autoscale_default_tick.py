"""The autoscaler grows a topic under 10 s windows at the daemon's default 10 s tick.

Issue 29: ``ordered autoscale T --target-records-per-s 400 --up-window 10 --down-window
30 --cooldown 10`` under about four times its target held at "within the target band"
for 100 s, because neither half of a 10 s up-window held two of the daemon's 10 s
samples. The decision rule now uses the samples that span a slice that short.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from autoscale_helpers import Traffic, daemon_running
from helpers import wait_until
from kazoo.client import KazooClient

from coordinator.autoscale import DEFAULT_AUTOSCALE_INTERVAL_S
from coordinator.kernel.store import LayoutStore
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
    # The daemon's own autoscale tick: 10 s.
    with (
        daemon_running(kazoo_factory, bootstrap, zk_root, tick=None) as lines,
        Traffic(make_producer(), topic) as traffic,
    ):
        traffic.rate = 800.0  # 400/s per partition at 2: four times the target
        wait_until(
            lambda: (r := store.get_topic(topic)) is not None and r.active >= 4,
            timeout=90,
            what=f"a growth from 2 (daemon log: {lines})",
        )
    decisions = store.autoscale_status(topic).decisions  # type: ignore[union-attr]
    assert any(d["action"] == "grow" and d["acted"] for d in decisions), decisions
    assert not any(d["rule"] == "band" for d in decisions), decisions
