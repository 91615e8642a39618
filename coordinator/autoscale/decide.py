"""The autoscaler's decision rule: pure functions over rate samples and a policy.

Nothing here does I/O; :mod:`coordinator.autoscale.runner` feeds it samples of Kafka's
end offsets and carries out what it decides.

The rule (defaults and their reasons are in ``docs/autoscale.md``):

- The write rate of a topic is the growth of the sum of its end offsets over a window
  (every physical partition counts, so the sum only grows across layout changes and
  trims); the rate per active partition divides it by the active count.
- **Grow** when the rate per active partition over the whole up-window is above the
  target, and so is the rate over the window's second half (a burst at the window's
  start alone does not grow a topic). The new count is the one that brings the rate
  back to the target, at most ``max_step_factor`` times the current count and never
  above ``max_active``.
- **Shrink** when the rate per active partition over the whole down-window is below
  half the target, and so is every quarter of that window. The new count keeps the
  rate at no more than 3/4 of the target (so a shrink does not invite the next
  growth), is at least the current count divided by ``max_step_factor``, and never
  goes below the topic's initial count or ``min_active``.
- With ``max_lag`` set, each sample also carries the largest consumer lag of the
  topic's interested groups (records). **Grow** too when the lag per active partition
  is above ``max_lag`` in every sample of the up-window and the lag did not fall over
  it (the group is not catching up), even if the rate alone would hold: to the current
  count times ``max_step_factor``, never above ``max_active``. **Never shrink** while
  any sample of the down-window has a lag per active partition above ``max_lag / 2``.
  A lag that could not be read is unknown: it never grows a topic and it vetoes a
  shrink (a shrink on a guess could strand a lagging group with fewer partitions).
- Nothing happens while an epoch is pending, within ``cooldown_s`` of the last change,
  or before a window's worth of samples exists.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, Final

__all__ = [
    "SHRINK_HEADROOM",
    "Action",
    "Decision",
    "RateSample",
    "Thresholds",
    "decide",
    "lag_grows",
    "lag_vetoes_shrink",
    "rate_between",
]

SHRINK_HEADROOM: Final = 0.75
"""After a shrink, the rate per partition is at most this fraction of the target."""


class Action(Enum):
    """What one decision does."""

    GROW = "grow"
    SHRINK = "shrink"
    HOLD = "hold"


@dataclass(frozen=True)
class RateSample:
    """One sample of a topic: when, the sum of its end offsets (or bytes), its active count.

    Attributes:
        at: Monotonic seconds.
        total: Sum over every physical partition of its end offset (records), or the
            estimated bytes written so far (``bytes`` policies).
        active: The active partition count at that moment.
        lag: The largest consumer lag (records) of the topic's interested groups at
            that moment; ``None`` when not read (no ``max_lag``) or unknown (the read
            failed).
    """

    at: float
    total: float
    active: int
    lag: float | None = None

    @property
    def lag_per_partition(self) -> float | None:
        """The lag divided by the active count (``None`` when the lag is unknown)."""
        return None if self.lag is None else self.lag / self.active


@dataclass(frozen=True)
class Thresholds:
    """The part of a policy the rule reads.

    Attributes:
        target: Target rate per active partition (records/s or bytes/s).
        min_active: Never below this many active partitions (nor the initial count).
        max_active: Never above this many.
        up_window_s: Seconds of sustained load above the target before growing.
        down_window_s: Seconds of sustained load below half the target before shrinking.
        cooldown_s: Seconds after any layout change before the next decision to act.
        max_step_factor: At most this factor up, or down, per change.
        max_lag: Consumer lag per active partition (records) above which the topic
            grows; ``None``: the lag is not a signal.
    """

    target: float
    min_active: int
    max_active: int
    up_window_s: float
    down_window_s: float
    cooldown_s: float
    max_step_factor: int
    max_lag: float | None = None


@dataclass(frozen=True)
class Decision:
    """One decision and the inputs it was made from.

    Attributes:
        action: Grow, shrink or hold.
        active: The active count when deciding.
        to: The new active count (``active`` for a hold).
        rate_up: Rate per active partition over the up-window (``None``: not enough data).
        rate_down: Rate per active partition over the down-window (``None``: not enough).
        rule: Which rule decided, a stable word (``pending``, ``cooldown``,
            ``gathering``, ``band``, ``minimum``, ``maximum``, ``above``, ``below``,
            ``lag``, ``lagging``, ``burst``: above the target over the up-window but not
            over its second half, ``dip``: below half the target over the down-window
            but not in every quarter).
        reason: Why, in words, with the numbers.
        lag: Consumer lag per active partition in the newest sample (``None``: not a
            signal of the policy, or unknown).
    """

    action: Action
    active: int
    to: int
    rate_up: float | None
    rate_down: float | None
    rule: str
    reason: str
    lag: float | None = None

    def to_dict(self) -> dict[str, Any]:
        """The decision as a JSON-ready dict."""
        return {
            "action": self.action.value,
            "active": self.active,
            "to": self.to,
            "rate_up": None if self.rate_up is None else round(self.rate_up, 3),
            "rate_down": None if self.rate_down is None else round(self.rate_down, 3),
            "rule": self.rule,
            "reason": self.reason,
            "lag": None if self.lag is None else round(self.lag, 3),
        }


def _at_or_before(samples: Sequence[RateSample], at: float) -> RateSample | None:
    """The newest sample taken at or before ``at`` (samples are in time order)."""
    found = None
    for sample in samples:
        if sample.at > at:
            break
        found = sample
    return found


def rate_between(samples: Sequence[RateSample], start: float, end: float) -> float | None:
    """Total rate (per second) between the samples nearest ``start`` and ``end``.

    Returns ``None`` when no sample is old enough to cover ``start`` or the span is empty.
    """
    first = _at_or_before(samples, start)
    last = _at_or_before(samples, end)
    if first is None or last is None or last.at <= first.at:
        return None
    return max(0.0, (last.total - first.total) / (last.at - first.at))


def _window(samples: Sequence[RateSample], now: float, window: float) -> list[RateSample] | None:
    """The samples covering the last ``window`` seconds, from the newest one at or before
    its start; ``None`` when no sample is that old."""
    first = _at_or_before(samples, now - window)
    if first is None:
        return None
    return [s for s in samples if first.at <= s.at <= now]


def lag_grows(samples: Sequence[RateSample], now: float, window: float, max_lag: float) -> bool:
    """Whether the lag per active partition is above ``max_lag`` in every sample of the
    window and the lag (records) did not fall across it: the group is not catching up.

    An unknown lag in the window, or too few samples, never grows.
    """
    covered = _window(samples, now, window)
    if covered is None or len(covered) < 2:
        return False
    per = [s.lag_per_partition for s in covered]
    if any(p is None or p <= max_lag for p in per):
        return False
    first, last = covered[0].lag, covered[-1].lag
    return first is not None and last is not None and last >= first


def lag_vetoes_shrink(
    samples: Sequence[RateSample], now: float, window: float, max_lag: float
) -> str | None:
    """Why the lag forbids a shrink over the window, or ``None`` when it does not.

    A sample whose lag per active partition is above ``max_lag / 2``, or unknown,
    vetoes (a shrink is not taken on a guess).
    """
    covered = _window(samples, now, window) or []
    for s in covered:
        per = s.lag_per_partition
        if per is None:
            return "the consumer lag is unknown within the down-window"
        if per > max_lag / 2:
            return (
                f"consumer lag {per:.0f}/partition within the down-window is above half "
                f"the maximum {max_lag:g}"
            )
    return None


def _per_partition(rate: float | None, active: int) -> float | None:
    return None if rate is None else rate / active


def _ceil_capped(value: float, cap: int) -> int:
    """``ceil(value)``, at most ``cap`` (an infinite or huge quotient of a tiny target
    is not a partition count, and ``math.ceil`` of infinity raises)."""
    return cap if not value < cap else max(0, math.ceil(value))


def _at_or_after(samples: Sequence[RateSample], at: float) -> RateSample | None:
    """The oldest sample taken at or after ``at`` (samples are in time order)."""
    for sample in samples:
        if sample.at >= at:
            return sample
    return None


def _spanning_rate(samples: Sequence[RateSample], start: float, end: float) -> float | None:
    """Total rate between the newest sample at or before ``start`` and the oldest at or
    after ``end`` (the newest sample when none is that new): the finest rate the samples
    give over a slice that holds no pair of its own (a slice shorter than the tick)."""
    first = _at_or_before(samples, start)
    last = _at_or_after(samples, end) or (samples[-1] if samples else None)
    if first is None or last is None or last.at <= first.at:
        return None
    return max(0.0, (last.total - first.total) / (last.at - first.at))


def _windows(
    samples: Sequence[RateSample], now: float, window: float, parts: int
) -> list[float] | None:
    """Total rates over ``parts`` equal slices of the last ``window`` seconds.

    A slice too short to hold two samples (the window is shorter than ``parts`` ticks)
    takes the rate between the samples that span it: the rule decides with what it has
    instead of finding no slice (which once fell through to "within the target band").
    ``None`` when a slice has no sample old enough (still gathering).
    """
    step = window / parts
    out = []
    for i in range(parts):
        start, end = now - window + i * step, now - window + (i + 1) * step
        rate = rate_between(samples, start, end)
        if rate is None:
            rate = _spanning_rate(samples, start, end)
        if rate is None:
            return None
        out.append(rate)
    return out


def decide(
    samples: Sequence[RateSample],
    now: float,
    *,
    thresholds: Thresholds,
    initial: int,
    active: int,
    pending: bool,
    last_change_at: float | None,
) -> Decision:
    """Decide whether to grow, shrink or hold a topic.

    Args:
        samples: Samples of the topic in time order (older ones beyond the longest
            window may be dropped by the caller).
        now: The current monotonic time (the time base of ``samples``).
        thresholds: The policy's numbers.
        initial: The topic's initial partition count (a shrink never goes below it).
        active: The active partition count now.
        pending: Whether an epoch is pending (then nothing changes).
        last_change_at: Monotonic time of the last layout change, if known.

    Returns:
        The decision with the rates it saw.
    """
    t = thresholds
    up_total = rate_between(samples, now - t.up_window_s, now)
    down_total = rate_between(samples, now - t.down_window_s, now)
    rate_up = _per_partition(up_total, active)
    rate_down = _per_partition(down_total, active)
    lag = samples[-1].lag_per_partition if samples and t.max_lag is not None else None

    def make(action: Action, to: int, rule: str, reason: str) -> Decision:
        return Decision(action, active, to, rate_up, rate_down, rule, reason, lag)

    def hold(rule: str, reason: str) -> Decision:
        return make(Action.HOLD, active, rule, reason)

    if pending:
        return hold("pending", "an epoch is pending")
    if last_change_at is not None and now - last_change_at < t.cooldown_s:
        left = t.cooldown_s - (now - last_change_at)
        return hold("cooldown", f"cooling down ({left:.0f} s left)")
    floor = max(initial, t.min_active)
    if active < floor:
        to = min(floor, active * t.max_step_factor)
        return make(Action.GROW, to, "minimum", f"{active} active is below the minimum {floor}")
    if active > t.max_active:
        to = max(floor, t.max_active, math.ceil(active / t.max_step_factor))
        if to < active:
            return make(
                Action.SHRINK, to, "maximum", f"{active} active is above the maximum {t.max_active}"
            )
    if t.max_lag is not None and lag_grows(samples, now, t.up_window_s, t.max_lag):
        # Lag is a grow signal of its own: the write rate may be fine while the
        # consumers fall behind, and more partitions spread them over more members.
        to = min(t.max_active, active * t.max_step_factor)
        if to > active:
            return make(
                Action.GROW,
                to,
                "lag",
                f"consumer lag {lag:.0f}/partition above {t.max_lag:g} for {t.up_window_s:g} s",
            )
        return hold("maximum", f"consumers lag but at the maximum {t.max_active}")
    uneven: tuple[str, str] | None = None
    if rate_up is not None and up_total is not None and rate_up > t.target:
        halves = _windows(samples, now, t.up_window_s, 2)
        if halves is None:
            return hold("gathering", "gathering samples over the up-window")
        if halves[1] / active > t.target:
            wanted = _ceil_capped(up_total / t.target, t.max_active + 1)
            to = min(t.max_active, active * t.max_step_factor, max(active + 1, wanted))
            if to > active:
                return make(
                    Action.GROW,
                    to,
                    "above",
                    f"{rate_up:.1f}/s per partition over {t.up_window_s:g} s is above the "
                    f"target {t.target:g}",
                )
            return hold("maximum", f"above the target but at the maximum {t.max_active}")
        uneven = (
            "burst",
            f"{rate_up:.1f}/s per partition over {t.up_window_s:g} s is above the target "
            f"{t.target:g}, but not over the window's second half ({halves[1] / active:.1f}/s)",
        )
    if rate_down is not None and down_total is not None and rate_down < t.target / 2:
        quarters = _windows(samples, now, t.down_window_s, 4)
        if quarters is None:
            return hold("gathering", "gathering samples over the down-window")
        if all(q / active < t.target / 2 for q in quarters):
            wanted = _ceil_capped(down_total / (t.target * SHRINK_HEADROOM), active)
            to = max(floor, math.ceil(active / t.max_step_factor), wanted)
            veto = (
                None
                if t.max_lag is None or to >= active
                else lag_vetoes_shrink(samples, now, t.down_window_s, t.max_lag)
            )
            if veto is not None:
                return hold("lagging", f"below half the target, but {veto}")
            if to < active:
                return make(
                    Action.SHRINK,
                    to,
                    "below",
                    f"{rate_down:.1f}/s per partition over {t.down_window_s:g} s is below "
                    f"half the target {t.target:g}",
                )
            return hold("minimum", f"below half the target but at the minimum {floor}")
        uneven = uneven or (
            "dip",
            f"{rate_down:.1f}/s per partition over {t.down_window_s:g} s is below half the "
            f"target {t.target:g}, but not in every quarter of the window",
        )
    if rate_up is None:
        return hold("gathering", "gathering samples")
    if uneven is not None:
        return hold(*uneven)
    return hold("band", "within the target band")
