"""Windows shorter than two of the daemon's ticks decide with the samples there are.

Issue 29: a policy with 10 s windows under the daemon's default 10 s tick held at
"within the target band" under a load of four times its target, because neither half
of the up-window held a pair of samples. These tests sample exactly as the daemon does
(one sample per tick, slightly late each time) and fail on that rule.
"""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.autoscale.decide import Action, RateSample, Thresholds, decide
from coordinator.autoscale.runner import DEFAULT_AUTOSCALE_INTERVAL_S

TICK = DEFAULT_AUTOSCALE_INTERVAL_S


def policy(up: float, down: float, **changes: float) -> Thresholds:
    fields: dict[str, float] = {
        "target": 400.0,
        "min_active": 2,
        "max_active": 64,
        "up_window_s": up,
        "down_window_s": down,
        "cooldown_s": 10.0,
        "max_step_factor": 2,
    }
    fields.update(changes)
    return Thresholds(**fields)  # type: ignore[arg-type]


def ticks(rate_total: float, count: int, active: int, late: float = 0.003) -> list[RateSample]:
    """One sample per daemon tick, each a little late (a tick waits, then samples)."""
    out = []
    at = 0.0
    for _ in range(count):
        out.append(RateSample(at, rate_total * at, active))
        at += TICK + late
    return out


def decide_now(samples: list[RateSample], t: Thresholds, active: int = 2) -> object:
    return decide(
        samples,
        samples[-1].at,
        thresholds=t,
        initial=2,
        active=active,
        pending=False,
        last_change_at=None,
    )


def test_ten_second_windows_grow_at_the_default_tick() -> None:
    # The run: 3,000 records/s on 2 partitions, target 400, windows 10/30 s.
    d = decide_now(ticks(3000.0, 5, 2), policy(10.0, 30.0))
    assert d.action is Action.GROW, d  # type: ignore[attr-defined]
    assert d.to == 4  # type: ignore[attr-defined]
    assert d.rule == "above"  # type: ignore[attr-defined]


def test_ten_second_windows_shrink_at_the_default_tick() -> None:
    d = decide_now(ticks(100.0, 6, 8), policy(10.0, 30.0), active=8)
    assert d.action is Action.SHRINK, d  # type: ignore[attr-defined]


def test_a_window_shorter_than_a_tick_still_decides() -> None:
    d = decide_now(ticks(3000.0, 5, 2), policy(3.0, 6.0))
    assert d.action is Action.GROW, d  # type: ignore[attr-defined]


def test_a_late_tick_leaves_a_gap_and_the_rule_still_decides() -> None:
    # A transition held the previous tick for 25 s: the up-window's first half is empty.
    samples = ticks(3000.0, 4, 2)
    last = samples[-1]
    samples.append(RateSample(last.at + 25.0, last.total + 3000.0 * 25.0, 2))
    d = decide_now(samples, policy(20.0, 40.0))
    assert d.action is Action.GROW, d  # type: ignore[attr-defined]


def test_a_burst_is_named_not_called_the_band() -> None:
    # 60 s above the target, then 60 s idle: the whole window is above, its second half not.
    samples = [RateSample(float(t), 3000.0 * min(t, 60), 2) for t in range(0, 121, 10)]
    d = decide_now(samples, policy(120.0, 240.0))
    assert d.action is Action.HOLD  # type: ignore[attr-defined]
    assert d.rule == "burst", d  # type: ignore[attr-defined]


def test_a_tiny_target_is_capped_not_a_crash() -> None:
    # math.ceil(inf) raises OverflowError: a target of 1e-320 must not kill the tick.
    d = decide_now(ticks(1e9, 5, 2), policy(10.0, 30.0, target=1e-320))
    assert d.action is Action.GROW and d.to == 4  # type: ignore[attr-defined]


@settings(max_examples=300, deadline=None)
@given(
    tick=st.floats(0.5, 60.0),
    up_ticks=st.floats(0.2, 8.0),
    late=st.floats(0.0, 0.5),
    factor=st.floats(1.5, 20.0),
)
def test_a_sustained_load_above_the_target_always_grows(
    tick: float, up_ticks: float, late: float, factor: float
) -> None:
    """Whatever the window-to-tick ratio, a constant load above the target grows once a
    window's worth of samples exists (never "within the target band")."""
    up = max(0.1, up_ticks * tick)
    t = policy(up, up * 2, target=100.0)
    count = math.ceil(up * 2 / tick) + 3
    samples = [
        RateSample(i * (tick + late), 200.0 * factor * i * (tick + late), 2) for i in range(count)
    ]
    d = decide_now(samples, t)
    assert d.action is Action.GROW, d  # type: ignore[attr-defined]


@pytest.mark.parametrize("late", [0.0, 0.003, 0.4])
def test_a_steady_load_in_the_band_holds_in_the_band(late: float) -> None:
    d = decide_now(ticks(2 * 300.0, 8, 2, late), policy(10.0, 30.0))
    assert (d.action, d.rule) == (Action.HOLD, "band")  # type: ignore[attr-defined]
