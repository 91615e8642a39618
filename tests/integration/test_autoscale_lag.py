"""The autoscaler's second signal against the real cluster: a group that stops reading
grows a topic whose write rate alone would hold, and a lagging group holds back a
shrink the write rate asks for until it catches up; every key stays in order."""

from __future__ import annotations

import json
import threading
import time
from typing import Any

import pytest
from autoscale_helpers import KeyOrder, Traffic, daemon_running, fast_policy
from fixtures import run_in_background
from helpers import unique, wait_until
from kit import Kit
from prometheus_client import CollectorRegistry

from coordinator.kernel.prometheus import PrometheusHooks
from coordinator.kernel.store import LayoutStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def decisions(store: LayoutStore, topic: str) -> list[dict[str, Any]]:
    status = store.autoscale_status(topic)
    return [] if status is None else list(status.decisions)


def test_a_stopped_group_grows_the_topic(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    store: LayoutStore = kit.controller.store
    group = unique("g")
    traffic = Traffic(kit.make_producer(), topic)
    order = KeyOrder()
    # 100 records/s is 50/s per partition: a tenth of the target, the rate never grows it.
    traffic.rate = 100.0
    reader = kit.make_consumer(group)
    reader.subscribe([topic])
    order.read(reader, total=100, commit=True)
    out = kit.ordered_cli(
        "autoscale",
        topic,
        *("--target-records-per-s", "1000", "--max", "4", "--up-window", "3"),
        *("--down-window", "6", "--cooldown", "3", "--max-lag", "100", "--json"),
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["autoscale"]["policy"]["max_lag"] == 100
    registry = CollectorRegistry()
    try:
        with daemon_running(
            kit.kazoo_factory, kit.bootstrap, kit.zk_root, (PrometheusHooks(registry),)
        ) as lines:
            # While the group keeps up (its lag is a batch or so), nothing changes.
            stop = threading.Event()
            keeping_up = run_in_background(order.read, reader, stop=stop, commit=True)
            wait_until(
                lambda: any(d["lag"] is not None for d in decisions(store, topic)),
                timeout=30,
                what="a decision with the lag",
            )
            time.sleep(4)
            stop.set()
            keeping_up.join()
            assert store.get_topic(topic).active == 2, lines  # type: ignore[union-attr]
            # The group stops reading: its lag grows by 100 records/s.
            reader.close()
            wait_until(
                lambda: (
                    (r := store.get_topic(topic)) is not None and r.active == 4 and not r.pending
                ),
                timeout=60,
                what="a growth to 4 on the consumer lag",
            )
            # The lag is exported as a metric too.
            exported = registry.get_sample_value(
                "ordered_coordinator_autoscale_consumer_lag_per_partition", {"topic": topic}
            )
            assert exported is not None and exported > 100, exported
    finally:
        traffic.stop()
    grows = [d for d in decisions(store, topic) if d["action"] == "grow"]
    assert [(d["active"], d["to"], d["rule"]) for d in grows] == [(2, 4, "lag")], grows
    assert grows[0]["acted"] and grows[0]["lag"] > 100, grows
    assert grows[0]["reason"].startswith("consumer lag "), grows
    assert "/partition above 100 for 3 s" in grows[0]["reason"], grows

    # The group comes back and reads everything, each key in order, across the growth.
    resumed = kit.make_consumer(group)
    resumed.subscribe([topic])
    order.read(resumed, total=sum(traffic.sent))
    order.check_all(traffic)

    shown = kit.ordered_cli("describe", topic, "--json")
    assert shown.returncode == 0, shown.stderr
    described = json.loads(shown.stdout)["autoscale"]
    assert described["policy"]["max_lag"] == 100
    assert any(d["rule"] == "lag" and d["lag"] > 100 for d in described["decisions"])
    text = kit.ordered_cli("autoscale", topic)
    assert "max lag 100 records per partition" in text.stdout, text.stdout


def test_a_lagging_group_holds_back_a_shrink_until_it_catches_up(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    kit.controller.expand(topic, 4)
    store: LayoutStore = kit.controller.store
    group = unique("g")
    traffic = Traffic(kit.make_producer(), topic)
    order = KeyOrder()
    traffic.write(200)
    first = kit.make_consumer(group)
    first.subscribe([topic])
    order.read(first, total=200, commit=True)
    first.close()
    # A backlog of 2500 records the group has not read: 625 per active partition,
    # above half the maximum lag (500) and below it (1000), so it neither grows the
    # topic nor lets it shrink.
    traffic.write(2500)
    store.set_autoscale_policy(fast_policy(topic, max_active=4, max_lag=1000))
    try:
        with daemon_running(kit.kazoo_factory, kit.bootstrap, kit.zk_root) as lines:
            # 20 records/s is 5/s per partition: far below half the target.
            traffic.rate = 20.0
            # Once a down-window of samples exists, the rate asks for a shrink.
            first = wait_until(
                lambda: next(
                    (d for d in decisions(store, topic) if d["rule"] in ("lagging", "below")), None
                ),
                timeout=60,
                what="a decision on a shrink",
            )
            assert first["rule"] == "lagging", ("shrank while the group lagged", first)
            epoch = store.get_topic(topic).epoch  # type: ignore[union-attr]
            time.sleep(6)  # another down-window: still held
            held = store.get_topic(topic)
            assert held is not None and (held.active, held.epoch) == (4, epoch), lines
            # The group catches up (and keeps reading): the shrink follows.
            resumed = kit.make_consumer(group)
            resumed.subscribe([topic])
            stop = threading.Event()
            reading = run_in_background(order.read, resumed, stop=stop, commit=True)
            wait_until(
                lambda: (
                    (r := store.get_topic(topic)) is not None and r.active == 2 and not r.pending
                ),
                timeout=60,
                what="the shrink once the group caught up",
            )
            stop.set()
            reading.join()
    finally:
        traffic.stop()
    log = decisions(store, topic)
    shrink = next(d for d in log if d["action"] == "shrink")
    assert (shrink["active"], shrink["to"], shrink["acted"]) == (4, 2, True), log
    assert shrink["lag"] is not None and shrink["lag"] <= 500, shrink
    held_back = next(d for d in log if d["rule"] == "lagging")
    assert held_back["action"] == "hold" and held_back["lag"] > 500, held_back
    order.read(resumed, total=sum(traffic.sent))
    order.check_all(traffic)
