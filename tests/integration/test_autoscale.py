"""The autoscaler against the real cluster: it grows under load, shrinks back after the
down-window, leaves a noisy flat load alone, and every key stays in order."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from autoscale_helpers import KeyOrder, Traffic, daemon_running, fast_policy
from helpers import unique, wait_until
from kit import Kit

from coordinator.kernel.store import LayoutStore

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]


def test_autoscaler_grows_shrinks_and_ignores_noise(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    store: LayoutStore = kit.controller.store
    store.set_autoscale_policy(fast_policy(topic))
    with (
        daemon_running(kit.kazoo_factory, kit.bootstrap, kit.zk_root) as lines,
        Traffic(kit.make_producer(), topic) as traffic,
    ):
        # Ramp up: 700 records/s is 350/s per partition at 2, 175/s at 4, 87.5/s at 8.
        traffic.rate = 700.0
        wait_until(
            lambda: (r := store.get_topic(topic)) is not None and r.active == 4,
            timeout=60,
            what="a first growth to 4",
        )
        wait_until(
            lambda: (r := store.get_topic(topic)) is not None and r.active == 8 and not r.pending,
            timeout=60,
            what="a second growth to 8",
        )
        grown = store.get_topic(topic)
        assert grown is not None and grown.epoch >= 2, "grew in steps"
        time.sleep(5)  # at 8 the rate is below the target: it stays
        assert store.get_topic(topic).active == 8  # type: ignore[union-attr]
        # Traffic falls: 100 records/s is 12.5/s per partition, below half the target.
        traffic.rate = 100.0
        wait_until(
            lambda: (r := store.get_topic(topic)) is not None and r.active == 2 and not r.pending,
            timeout=90,
            what="the shrink back to 2",
        )
        shrunk = store.get_topic(topic)
        assert shrunk is not None
        # A noisy flat load: 120/s +-40% is 60/s per partition, inside the band.
        traffic.rate = 120.0
        traffic.noise = 0.4
        epoch = shrunk.epoch
        time.sleep(12)
        after = store.get_topic(topic)
        assert after is not None and (after.active, after.epoch) == (2, epoch), lines
    actions = [(d["action"], d["active"], d["to"]) for d in store.autoscale_status(topic).decisions]  # type: ignore[union-attr]
    assert ("grow", 2, 4) in actions, actions
    grows = [a for a in actions if a[0] == "grow"]
    assert all(to <= 2 * active for _, active, to in grows), actions
    assert grows[-1][2] == 8, actions
    assert next(a for a in actions if a[0] == "shrink")[1] == 8, actions

    # Every key in order, nothing lost: an ordered group reads it all back.
    consumer = kit.make_consumer(unique("g"))
    consumer.subscribe([topic])
    order = KeyOrder()
    order.read(consumer, total=sum(traffic.sent))
    order.check_all(traffic)

    # The decisions show in describe --json.
    out = kit.ordered_cli("describe", topic, "--json")
    assert out.returncode == 0, out.stderr
    described = json.loads(out.stdout)["autoscale"]
    assert described["policy"]["target_per_s"] == 100.0
    assert any(d["action"] == "shrink" and d["acted"] for d in described["decisions"])


def test_dry_run_decides_without_acting(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    out = kit.ordered_cli(
        "autoscale",
        topic,
        "--target-records-per-s",
        "50",
        "--up-window",
        "2",
        "--down-window",
        "4",
        "--cooldown",
        "2",
        "--dry-run",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    recorded = Recorder()
    store: LayoutStore = kit.controller.store
    with (
        daemon_running(kit.kazoo_factory, kit.bootstrap, kit.zk_root, (recorded,)),
        Traffic(kit.make_producer(), topic) as traffic,
    ):
        traffic.rate = 600.0
        wait_until(
            lambda: any(
                d["action"] == "grow" for d in (store.autoscale_status(topic) or _none()).decisions
            ),
            timeout=60,
            what="a dry-run growth decision",
        )
    record = kit.controller.store.get_topic(topic)
    assert record is not None and (record.active, record.epoch) == (2, 0)
    decision = next(d for d in store.autoscale_status(topic).decisions if d["action"] == "grow")  # type: ignore[union-attr]
    assert decision["dry_run"] and not decision["acted"]
    # Every tick's decision reaches the daemon's hooks (and so its /metrics).
    grows = [d for d in recorded.decisions if d[0] == topic and d[1] == "grow"]
    assert grows and not any(d[5] for d in grows), recorded.decisions
    assert all(d[3] == 2 and d[4] > 2 for d in grows)


class Recorder:
    """A hook that keeps the autoscaler's decisions."""

    def __init__(self) -> None:
        self.decisions: list[tuple[str, str, float, int, int, bool]] = []

    def on_autoscale_decision(
        self, topic: str, action: str, active: int, to: int, rate: float, acted: bool
    ) -> None:
        self.decisions.append((topic, action, rate, active, to, acted))


class _none:
    decisions: tuple[dict[str, Any], ...] = ()


@pytest.mark.parametrize(
    ("args", "message", "code"),
    [
        (["--target-records-per-s", "0"], "must be a finite number >= 0.001", 2),
        # Wrong for this topic (its state), not for the command line: exit 1.
        (["--target-records-per-s", "10", "--min", "1"], "below the topic's initial", 1),
        (["--target-records-per-s", "10", "--max", "1"], "below the minimum", 1),
        (["--target-records-per-s", "10", "--max-step-factor", "1"], "must be >= 2", 2),
        (["--target-records-per-s", "10", "--down-window", "5"], "shorter than --up-window", 2),
        (["--target-records-per-s", "10", "--target-bytes-per-s", "5"], "not allowed with", 2),
        (["--target-records-per-s", "10", "--max-lag", "0"], "must be >= 1", 2),
        (["--target-records-per-s", "10", "--max-lag", "1e3"], "expected an integer", 2),
    ],
)
def test_bad_policies_are_refused_before_any_write(
    kit: Kit, args: list[str], message: str, code: int
) -> None:
    topic = kit.adopted_topic(2)
    out = kit.ordered_cli("autoscale", topic, *args)
    assert out.returncode == code, (out.stdout, out.stderr)
    assert message in out.stderr
    assert "Traceback" not in out.stderr
    shown = kit.ordered_cli("autoscale", topic, "--json")
    assert json.loads(shown.stdout)["autoscale"] is None


def test_a_policy_needs_an_adopted_topic(
    topic_factory: Callable[..., str], ordered_cli: Callable[..., Any]
) -> None:
    topic = topic_factory(2)
    out = ordered_cli("autoscale", topic, "--target-records-per-s", "10")
    assert out.returncode != 0
    assert "not adopted" in out.stderr
