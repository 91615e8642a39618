"""The autoscaler's decision rule: windows, steps, limits, cooldown, noise."""

from __future__ import annotations

import random
from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.autoscale.decide import (
    SHRINK_HEADROOM,
    Action,
    Decision,
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


# --- the consumer lag as a second signal --------------------------------------------

LAGGED = Thresholds(**{**T.__dict__, "max_lag": 1000.0})


def lagging(
    rate_total: float,
    seconds: float,
    active: int,
    lag: Callable[[float], float | None],
    step: float = 5.0,
) -> list[RateSample]:
    """Samples of a constant total rate with the lag ``lag(t)`` at each time ``t``."""
    n = int(seconds / step)
    return [
        RateSample(i * step, rate_total * i * step, active, lag(i * step)) for i in range(n + 1)
    ]


def run_lag(samples: list[RateSample], active: int, **kw: object) -> Decision:
    args = {"initial": 2, "active": active, "pending": False, "last_change_at": None} | kw
    return decide(samples, samples[-1].at, thresholds=LAGGED, **args)  # type: ignore[arg-type]


def test_a_growing_lag_grows_a_topic_the_rate_would_hold() -> None:
    # 60/s per partition is inside the rate band; 4 partitions lag 1500..2700 each.
    samples = lagging(4 * 60.0, 300.0, 4, lambda t: 4 * (1500.0 + 4 * t))
    assert run(samples, 4).action is Action.HOLD  # the rate alone holds
    d = run_lag(samples, 4)
    assert (d.action, d.to, d.rule) == (Action.GROW, 8, "lag")
    assert d.reason == "consumer lag 2700/partition above 1000 for 60 s"
    assert d.lag == pytest.approx(2700.0)
    assert d.to_dict()["lag"] == pytest.approx(2700.0)


def test_a_lag_that_is_catching_up_does_not_grow() -> None:
    # Far above the limit, but falling over the up-window: the group is catching up.
    d = run_lag(lagging(4 * 60.0, 300.0, 4, lambda t: 4 * (5000.0 - 5 * t)), 4)
    assert (d.action, d.rule) == (Action.HOLD, "band")


def test_one_sample_at_or_below_the_limit_does_not_grow() -> None:
    d = run_lag(lagging(4 * 60.0, 300.0, 4, lambda t: 4 * (1000.0 if t == 270 else 3000.0)), 4)
    assert d.action is Action.HOLD
    # The same dip before the up-window does not count.
    d = run_lag(lagging(4 * 60.0, 300.0, 4, lambda t: 4 * (1000.0 if t == 200 else 3000.0)), 4)
    assert d.action is Action.GROW


def test_an_unknown_lag_never_grows() -> None:
    d = run_lag(lagging(4 * 60.0, 300.0, 4, lambda t: None if t == 280 else 4 * 9000.0), 4)
    assert d.action is Action.HOLD


def test_lag_growth_obeys_max_pending_and_cooldown() -> None:
    samples = lagging(32 * 60.0, 300.0, 24, lambda t: 24 * (2000.0 + t))
    assert (run_lag(samples, 24).action, run_lag(samples, 24).to) == (Action.GROW, 32)
    at_max = lagging(32 * 60.0, 300.0, 32, lambda t: 32 * (2000.0 + t))
    assert run_lag(at_max, 32).rule == "maximum"
    assert run_lag(samples, 24, pending=True).rule == "pending"
    assert run_lag(samples, 24, last_change_at=250.0).rule == "cooldown"


def test_a_lag_above_half_the_limit_vetoes_a_shrink() -> None:
    # 20/s per partition shrinks by rate; one sample of the down-window lags 600/partition.
    low = lagging(8 * 20.0, 300.0, 8, lambda t: 8 * (600.0 if t == 100 else 0.0))
    assert run(low, 8).action is Action.SHRINK  # the rate alone shrinks
    d = run_lag(low, 8)
    assert (d.action, d.rule) == (Action.HOLD, "lagging")
    assert "600/partition" in d.reason
    # Once the lagging sample is older than the down-window, the shrink happens.
    caught_up = lagging(8 * 20.0, 400.0, 8, lambda t: 8 * (600.0 if t == 100 else 0.0))
    assert (run_lag(caught_up, 8).action, run_lag(caught_up, 8).to) == (Action.SHRINK, 4)
    # At or below half the limit the lag is no veto.
    calm = lagging(8 * 20.0, 300.0, 8, lambda t: 8 * 500.0)
    assert run_lag(calm, 8).action is Action.SHRINK


def test_an_unknown_lag_vetoes_a_shrink() -> None:
    d = run_lag(lagging(8 * 20.0, 300.0, 8, lambda t: None if t == 200 else 0.0), 8)
    assert (d.action, d.rule) == (Action.HOLD, "lagging")
    assert "unknown" in d.reason
    assert d.lag == 0.0


def test_no_max_lag_ignores_the_lag() -> None:
    samples = lagging(4 * 60.0, 300.0, 4, lambda t: 4 * (9000.0 + t))
    d = run(samples, 4)
    assert d.action is Action.HOLD and d.lag is None
    low = lagging(8 * 20.0, 300.0, 8, lambda t: None)
    assert run(low, 8).action is Action.SHRINK


@st.composite
def lag_series(draw: st.DrawFn) -> list[float | None]:
    """Lags per partition over 300 s: a level, a trend, and a few dips or unknowns."""
    level = draw(st.sampled_from([0.0, 400.0, 600.0, 1200.0, 5000.0]))
    trend = draw(st.floats(-20.0, 20.0))
    lags: list[float | None] = [max(0.0, level + trend * i * 5.0) for i in range(61)]
    for index, value in draw(
        st.lists(st.tuples(st.integers(0, 60), st.sampled_from([None, 0.0, 900.0])), max_size=2)
    ):
        lags[index] = value
    return lags


@settings(max_examples=300, deadline=None)
@given(
    lags=lag_series(),
    active=st.integers(2, 16),
    rate=st.sampled_from([0.0, 20.0, 60.0, 300.0]),
)
def test_lag_grows_only_when_every_sample_lags_and_never_shrinks_a_lagging_topic(
    lags: list[float | None], active: int, rate: float
) -> None:
    samples = [
        RateSample(i * 5.0, active * rate * i * 5.0, active, None if lag is None else lag * active)
        for i, lag in enumerate(lags)
    ]
    d = run_lag(samples, active)
    up = [s.lag_per_partition for s in samples if s.at >= 300.0 - LAGGED.up_window_s]
    down = [s.lag_per_partition for s in samples if s.at >= 300.0 - LAGGED.down_window_s]
    # Below the maximum, the lag grows the topic exactly when every sample of the
    # up-window lags and the lag did not fall.
    lags_on = all(lag is not None and lag > 1000.0 for lag in up) and up[-1] >= up[0]  # type: ignore[operator]
    assert (d.rule == "lag") == lags_on, (d, up)
    if lags_on:
        assert (d.action, d.to) == (Action.GROW, 2 * active)
    if d.action is Action.SHRINK:
        assert all(lag is not None and lag <= 500.0 for lag in down)
