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
    """

    at: float
    total: float
    active: int


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
    """

    target: float
    min_active: int
    max_active: int
    up_window_s: float
    down_window_s: float
    cooldown_s: float
    max_step_factor: int


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
            ``gathering``, ``band``, ``minimum``, ``maximum``, ``above``, ``below``).
        reason: Why, in words, with the numbers.
    """

    action: Action
    active: int
    to: int
    rate_up: float | None
    rate_down: float | None
    rule: str
    reason: str

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


def _per_partition(rate: float | None, active: int) -> float | None:
    return None if rate is None else rate / active


def _windows(samples: Sequence[RateSample], now: float, window: float, parts: int) -> list[float]:
    """Total rates over ``parts`` equal slices of the last ``window`` seconds."""
    step = window / parts
    out = []
    for i in range(parts):
        rate = rate_between(samples, now - window + i * step, now - window + (i + 1) * step)
        if rate is not None:
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

    def make(action: Action, to: int, rule: str, reason: str) -> Decision:
        return Decision(action, active, to, rate_up, rate_down, rule, reason)

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
    if rate_up is not None and up_total is not None and rate_up > t.target:
        halves = _windows(samples, now, t.up_window_s, 2)
        if len(halves) == 2 and halves[1] / active > t.target:
            wanted = math.ceil(up_total / t.target)
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
    if rate_down is not None and down_total is not None and rate_down < t.target / 2:
        quarters = _windows(samples, now, t.down_window_s, 4)
        if len(quarters) == 4 and all(q / active < t.target / 2 for q in quarters):
            wanted = math.ceil(down_total / (t.target * SHRINK_HEADROOM))
            to = max(floor, math.ceil(active / t.max_step_factor), wanted)
            if to < active:
                return make(
                    Action.SHRINK,
                    to,
                    "below",
                    f"{rate_down:.1f}/s per partition over {t.down_window_s:g} s is below "
                    f"half the target {t.target:g}",
                )
            return hold("minimum", f"below half the target but at the minimum {floor}")
    if rate_up is None:
        return hold("gathering", "gathering samples")
    return hold("band", "within the target band")
