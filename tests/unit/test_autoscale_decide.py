"""The autoscaler's decision rule: windows, steps, limits, cooldown, noise."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.autoscale.decide import (
    SHRINK_HEADROOM,
    Action,
    RateSample,
    Thresholds,
    decide,
    rate_between,
)

T = Thresholds(
    target=100.0,
    min_active=2,
    max_active=32,
    up_window_s=60.0,
    down_window_s=240.0,
    cooldown_s=120.0,
    max_step_factor=2,
)


def steady(rate_total: float, seconds: float, active: int, step: float = 5.0) -> list[RateSample]:
    """Samples of a constant total rate ending at t = seconds."""
    n = int(seconds / step)
    return [RateSample(i * step, rate_total * i * step, active) for i in range(n + 1)]


def run(samples: list[RateSample], active: int, **kw: object) -> object:
    args = {"initial": 2, "active": active, "pending": False, "last_change_at": None} | kw
    return decide(samples, samples[-1].at, thresholds=T, **args)  # type: ignore[arg-type]


def test_rate_between_needs_a_sample_old_enough() -> None:
    samples = steady(10.0, 30.0, 2)
    assert rate_between(samples, 0.0, 30.0) == pytest.approx(10.0)
    assert rate_between(samples, -5.0, 30.0) is None


def test_grows_when_the_whole_window_is_above_target() -> None:
    d = run(steady(4 * 250.0, 300.0, 4), 4)
    assert d.action is Action.GROW
    assert d.to == 8  # wants 10, capped at x2
    assert d.rule == "above"


def test_grow_is_sized_to_the_rate() -> None:
    d = run(steady(4 * 130.0, 300.0, 4), 4)
    assert (d.action, d.to) == (Action.GROW, 6)


def test_a_burst_at_the_window_start_does_not_grow() -> None:
    # 30 s at 10x the target, then 30 s idle: the window's average is above the
    # target, its second half is not.
    samples = [RateSample(float(t), 0.0, 2) for t in range(0, 61, 5)]
    total = 0.0
    out = []
    for s in samples:
        if s.at <= 30:
            total = s.at * 2000.0
        out.append(RateSample(s.at, total, 2))
    assert run(out, 2).action is Action.HOLD


def test_never_above_max() -> None:
    d = run(steady(32 * 1000.0, 300.0, 24), 24)
    assert (d.action, d.to) == (Action.GROW, 32)
    assert run(steady(32 * 1000.0, 300.0, 32), 32).action is Action.HOLD


def test_shrinks_only_after_the_down_window_below_half() -> None:
    low = steady(8 * 20.0, 300.0, 8)
    d = run(low, 8)
    assert d.action is Action.SHRINK
    assert d.to == 4  # /2 at most
    # Only 100 s of low load: the down-window (240 s) is not covered yet.
    assert run(steady(8 * 20.0, 100.0, 8), 8).action is Action.HOLD


def test_shrink_keeps_headroom() -> None:
    # 8 partitions at 45/s each: below half the target; 360/s total needs
    # ceil(360 / 75) = 5 partitions to stay at <= 3/4 of the target.
    d = run(steady(8 * 45.0, 300.0, 8), 8)
    assert (d.action, d.to) == (Action.SHRINK, 5)
    assert 8 * 45.0 / d.to <= T.target * SHRINK_HEADROOM


def test_never_below_initial_or_min() -> None:
    assert run(steady(0.0, 300.0, 2), 2).action is Action.HOLD
    d = decide(
        steady(0.0, 300.0, 4),
        300.0,
        thresholds=T,
        initial=3,
        active=4,
        pending=False,
        last_change_at=None,
    )
    assert (d.action, d.to) == (Action.SHRINK, 3)


def test_pending_epoch_and_cooldown_hold() -> None:
    busy = steady(4 * 500.0, 300.0, 4)
    assert run(busy, 4, pending=True).rule == "pending"
    assert run(busy, 4, last_change_at=250.0).rule == "cooldown"
    assert run(busy, 4, last_change_at=100.0).action is Action.GROW


def test_gathering_before_a_window_of_samples() -> None:
    assert run(steady(10_000.0, 20.0, 2), 2).rule == "gathering"


def test_noisy_flat_load_never_changes() -> None:
    rng = random.Random(7)
    active = 4
    total = 0.0
    samples = [RateSample(0.0, 0.0, active)]
    for i in range(1, 400):
        # 60% of the target per partition, +-35% noise every 5 s.
        total += 5.0 * active * 60.0 * (1 + rng.uniform(-0.35, 0.35))
        samples.append(RateSample(i * 5.0, total, active))
        d = decide(
            samples,
            i * 5.0,
            thresholds=T,
            initial=2,
            active=active,
            pending=False,
            last_change_at=None,
        )
        assert d.action is Action.HOLD, d


@settings(max_examples=300, deadline=None)
@given(
    active=st.integers(1, 64),
    initial=st.integers(1, 8),
    rate=st.floats(0, 1e6, allow_nan=False),
    factor=st.integers(2, 4),
    max_active=st.integers(1, 128),
)
def test_steps_stay_within_factor_and_bounds(
    active: int, initial: int, rate: float, factor: int, max_active: int
) -> None:
    initial = min(initial, active)
    t = Thresholds(100.0, 1, max(max_active, initial), 60.0, 120.0, 30.0, factor)
    d = decide(
        steady(rate, 300.0, active),
        300.0,
        thresholds=t,
        initial=initial,
        active=active,
        pending=False,
        last_change_at=None,
    )
    if d.action is Action.GROW:
        assert active < d.to <= min(t.max_active, active * factor)
    elif d.action is Action.SHRINK:
        assert max(initial, -(-active // factor)) <= d.to < active
    else:
        assert d.to == active
