"""Hook dispatch, the ``ordered.hooks`` setting, the counters and the Prometheus hook (pure)."""

from __future__ import annotations

import logging
import urllib.request

import pytest
from prometheus_client import CollectorRegistry

from coordinator.kernel.errors import ConfigError, OrderedError
from coordinator.kernel.hooks import ConsumerEvents, CoordinatorEvents, ProducerEvents, check_hooks
from coordinator.metrics.daemon_metrics import DaemonMetrics, open_metrics, parse_metrics_address
from ordered.consumer.counters import METRICS, ConsumerCounters
from ordered.consumer_config import split_consumer_config
from ordered.hooks import PrometheusHooks
from ordered.producer.config import split_producer_config

CONNECT = {"ordered.zookeeper.connect": "zk:2181"}


class Blocked:
    def __init__(self) -> None:
        self.seen: list[tuple[str, str, int, int]] = []

    def on_gate_blocked(self, group: str, topic: str, partition: int, offset: int) -> None:
        self.seen.append((group, topic, partition, offset))


def test_a_hook_gets_only_the_events_it_implements() -> None:
    hook = Blocked()
    events = ConsumerEvents([hook], "g")
    events.gate_blocked("t", 2, 7)
    events.gate_opened("t", 2, 0.5)  # not implemented: nothing happens
    events.violation("t", 0, 1, "misplaced")
    assert hook.seen == [("g", "t", 2, 7)]


def test_ordered_hooks_is_one_setting_of_both_clients() -> None:
    hook = Blocked()
    consumer = split_consumer_config({**CONNECT, "ordered.hooks": [hook]})
    producer = split_producer_config({**CONNECT, "ordered.hooks": (hook,)})
    assert consumer.ordered.hooks == producer.ordered.hooks == (hook,)
    assert "ordered.hooks" not in consumer.kafka and "ordered.hooks" not in producer.kafka
    assert split_consumer_config(CONNECT).ordered.hooks == ()


@pytest.mark.parametrize("bad", ["prometheus", Blocked(), [object()], [Blocked(), 3]])
def test_ordered_hooks_refuses_what_is_not_a_list_of_hooks(bad: object) -> None:
    with pytest.raises(ConfigError, match=r"ordered\.hooks"):
        split_consumer_config({**CONNECT, "ordered.hooks": bad})
    with pytest.raises(ConfigError, match=r"ordered\.hooks"):
        check_hooks("ordered.hooks", bad)


def test_a_misspelt_hook_method_is_refused() -> None:
    class Typo:
        def on_gate_block(self, group: str, topic: str, partition: int, offset: int) -> None:
            """Misspelt: on_gate_blocked."""

    with pytest.raises(ConfigError, match="implements no hook"):
        split_producer_config({**CONNECT, "ordered.hooks": [Typo()]})


def test_a_raising_hook_is_logged_once_and_the_others_still_run(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Broken:
        def on_route_switch(self, topic: str, from_epoch: int, to_epoch: int) -> None:
            raise RuntimeError("boom")

    class Good:
        switches = 0

        def on_route_switch(self, topic: str, from_epoch: int, to_epoch: int) -> None:
            Good.switches += 1

    events = ProducerEvents([Broken(), Good()])
    with caplog.at_level(logging.ERROR, logger="coordinator.kernel.hooks"):
        for _ in range(3):
            events.route_switch("t", 0, 1)
    assert Good.switches == 3
    assert len([r for r in caplog.records if r.exc_info]) == 1


def test_counters_count_each_event_once() -> None:
    counters = ConsumerCounters()
    events = ConsumerEvents([counters], "g")
    events.records_delivered(5)
    events.records_held("t", 0, 2)
    events.gate_check("t", 0)
    events.gate_blocked("t", 0, 3)
    events.gate_opened("t", 0, 0.1)
    events.gate_dropped("t", 0, 0.1)
    events.announcement("t", 0, 3)
    events.violation("t", 0, 4, "x")
    events.layout_reload("t", 1)
    events.layout_check()
    events.tombstone_copy("t", 1, 9)
    snapshot = counters.as_dict()
    assert list(snapshot) == list(METRICS)
    assert snapshot == {
        "delivered": 5,
        "held": 2,
        "gate_checks": 1,
        "gates_opened": 1,
        "blocks": 1,
        "announcements": 1,
        "violations": 1,
        "layout_reloads": 1,
        "layout_checks": 1,
        "tombstone_copies_dropped": 1,
    }
    snapshot["violations"] = 99  # a snapshot: the counters stay as they are
    assert counters.violations == 1


def test_prometheus_hooks_follow_the_events() -> None:
    registry = CollectorRegistry()
    hooks = PrometheusHooks(registry)
    consumer = ConsumerEvents([hooks], "g")
    consumer.layout_reload("t", 2)
    consumer.layout_reload("u", -1)
    consumer.gate_blocked("t", 1, 10)
    consumer.gate_blocked("t", 2, 10)
    consumer.gate_opened("t", 1, 1.5)
    consumer.gate_dropped("t", 2, 0.2)
    consumer.violation("t", 0, 5, "x")
    producer = ProducerEvents([hooks])
    producer.route_switch("t", 1, 2)
    producer.barrier_ack("t", 2, 0.02)
    producer.tombstone_copy_sent("t", 0)
    daemon = CoordinatorEvents([hooks])
    daemon.epoch_published("t", 2, 2, 3)
    daemon.barrier_passed("t", 2, 0.3)
    daemon.epoch_sealed("t", 2, 0.4)
    daemon.trim("t", 3, 100, "drained", True)
    daemon.trim("t", 3, 100, "drained", False)
    daemon.relay_round(0.01, 2)
    daemon.session_state("suspended")
    daemon.leadership(True)

    def get(name: str, **labels: str) -> float | None:
        return registry.get_sample_value(name, labels)

    gt = {"group": "g", "topic": "t"}
    assert get("ordered_consumer_epoch", **gt) == 2
    assert get("ordered_consumer_epoch", group="g", topic="u") is None
    assert get("ordered_consumer_layout_reloads_total", group="g", topic="u") == 1
    assert get("ordered_consumer_blocked_partitions", **gt) == 0
    assert get("ordered_consumer_gate_blocks_total", **gt, partition="2") == 1
    assert get("ordered_consumer_gate_wait_seconds_count", **gt) == 1  # the dropped one: no
    assert get("ordered_consumer_gate_wait_seconds_sum", **gt) == 1.5
    assert get("ordered_consumer_violations_total", **gt, partition="0") == 1
    assert get("ordered_producer_route_switches_total", topic="t") == 1
    assert get("ordered_producer_barrier_ack_seconds_count", topic="t") == 1
    assert get("ordered_producer_tombstone_copies_total", topic="t") == 1
    assert get("ordered_coordinator_epochs_published_total", topic="t") == 1
    assert get("ordered_coordinator_epochs_sealed_total", topic="t") == 1
    assert get("ordered_coordinator_barrier_seconds_sum", topic="t") == 0.3
    assert get("ordered_coordinator_trims_total", topic="t", partition="3", reason="drained") == 1
    assert get("ordered_coordinator_trim_failures_total", topic="t", partition="3") == 1
    assert get("ordered_coordinator_relayed_positions_total") == 2
    assert get("ordered_coordinator_zookeeper_session_state", state="suspended") == 1
    assert get("ordered_coordinator_zookeeper_session_state", state="connected") == 0
    assert get("ordered_coordinator_leader") == 1


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("127.0.0.1:9465", ("127.0.0.1", 9465)),
        ("localhost:0", ("localhost", 0)),
        ("[::1]:80", ("::1", 80)),
        ("off", None),
        ("OFF", None),
    ],
)
def test_metrics_address(text: str, expected: tuple[str, int] | None) -> None:
    assert parse_metrics_address(text) == expected


@pytest.mark.parametrize("text", ["9465", ":9465", "host:", "host:99999", "host:x"])
def test_a_bad_metrics_address_is_a_config_error(text: str) -> None:
    with pytest.raises(ConfigError, match="--metrics-address"):
        parse_metrics_address(text)


def test_open_metrics_serves_and_refuses_a_taken_explicit_address() -> None:
    lines: list[str] = []
    metrics = open_metrics("127.0.0.1:0", lines.append)
    assert metrics is not None
    try:
        assert lines == [f"metrics: serving {metrics.url}"]
        assert metrics.address[1] > 0
        with urllib.request.urlopen(metrics.url, timeout=10) as response:
            assert b"ordered_coordinator_leader" in response.read()
        taken = f"127.0.0.1:{metrics.address[1]}"
        with pytest.raises(OrderedError, match=f"cannot serve metrics on {taken}"):
            open_metrics(taken, lines.append)
        assert open_metrics("off", lines.append) is None
    finally:
        metrics.close()
        metrics.close()  # idempotent


def test_the_default_address_taken_is_only_a_warning(monkeypatch: pytest.MonkeyPatch) -> None:
    holder = DaemonMetrics(("127.0.0.1", 0))
    try:
        taken = f"127.0.0.1:{holder.address[1]}"
        monkeypatch.setattr("coordinator.metrics.daemon_metrics.DEFAULT_METRICS_ADDRESS", taken)
        lines: list[str] = []
        assert open_metrics(None, lines.append) is None
        assert lines and lines[0].startswith(f"metrics: cannot serve on {taken}")
    finally:
        holder.close()
