"""The autoscaler's records: a topic's policy and its decision log.

``{root}/topics/{topic}/autoscale`` holds the :class:`AutoscalePolicy` set by
``ordered autoscale``; ``{root}/topics/{topic}/autoscale-status`` holds the
:class:`AutoscaleStatus` the leading coordinator writes: the last change it made and
its latest decisions with their inputs, so ``describe`` shows them and a new leader
keeps the cooldown. Both use the store's one record mechanism
(:mod:`coordinator.kernel.store.schema`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, Final, Literal, TypeAlias

from coordinator.kernel.store.schema import _Bad, _bool, _Record, _str, _time, _Upgrade

__all__ = [
    "AUTOSCALE_METRICS",
    "DECISION_LOG_SIZE",
    "AutoscalePolicy",
    "AutoscaleStatus",
]

AUTOSCALE_METRICS: Final = ("records", "bytes")
"""The values of :attr:`AutoscalePolicy.metric`."""

AutoscaleMetric: TypeAlias = Literal["records", "bytes"]

DECISION_LOG_SIZE: Final = 20
"""How many decisions :class:`AutoscaleStatus` keeps (the newest)."""

_DECISION_FIELDS: Final = frozenset(
    {
        "at",
        "action",
        "active",
        "to",
        "rate_up",
        "rate_down",
        "rule",
        "reason",
        "acted",
        "dry_run",
        "lag",
    }
)


def _metric(value: Any) -> str:
    if value not in AUTOSCALE_METRICS:
        raise _Bad(f"expected one of {', '.join(AUTOSCALE_METRICS)}, got {value!r}")
    return str(value)


def _positive_number(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise _Bad(f"expected a number > 0, got {value!r}")
    if value <= 0:
        raise _Bad(f"expected a number > 0, got {value!r}")
    return float(value)


def _count(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise _Bad(f"expected an integer >= 1, got {value!r}")
    return value


def _factor(value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 2:
        raise _Bad(f"expected an integer >= 2, got {value!r}")
    return value


def _opt_count(value: Any) -> int | None:
    return None if value is None else _count(value)


def _opt_unix(value: Any) -> float | None:
    return None if value is None else _time(value)


def _decisions(value: Any) -> tuple[dict[str, Any], ...]:
    if isinstance(value, str | bytes) or not isinstance(value, list | tuple):
        raise _Bad(f"expected a list of decisions, got {value!r}")
    out = []
    for item in value:
        if not isinstance(item, Mapping) or set(item) != _DECISION_FIELDS:
            raise _Bad(f"expected a decision with fields {sorted(_DECISION_FIELDS)}, got {item!r}")
        out.append(dict(item))
    return tuple(out)


def _status_v1(raw: dict[str, Any]) -> dict[str, Any]:
    """A version 1 status: its decisions predate ``lag`` (the lag was no signal then)."""
    decisions = raw.get("decisions")
    if isinstance(decisions, list):
        raw = {**raw, "decisions": [_with_lag(d) for d in decisions]}
    return raw


def _with_lag(decision: Any) -> Any:
    return {**decision, "lag": None} if isinstance(decision, Mapping) else decision


@dataclass(frozen=True)
class AutoscalePolicy(_Record):
    """A topic's autoscaling policy, at ``{root}/topics/{topic}/autoscale``.

    Attributes:
        topic: The Kafka topic.
        metric: ``records`` (records/s) or ``bytes`` (bytes/s) per active partition.
        target_per_s: The target rate per active partition.
        min_active: Never fewer active partitions (nor fewer than the topic's initial).
        max_active: Never more active partitions.
        up_window_s: Seconds the rate must stay above the target before a growth.
        down_window_s: Seconds the rate must stay below half the target before a shrink.
        cooldown_s: Seconds after any layout change before the autoscaler acts again.
        max_step_factor: At most this factor up or down per change (x2 or /2 by default).
        enabled: ``False``: the policy is kept but not applied.
        dry_run: Decide and log, never change the layout.
        updated_at: Unix time of the setting.
        max_lag: Consumer lag per active partition (records) above which the topic
            grows, and above half of which it never shrinks; ``None``: the lag is not a
            signal (version 1 records, written before the field existed, load so).
    """

    VERSION: ClassVar[int] = 2
    _UPGRADES: ClassVar[dict[int, _Upgrade]] = {1: lambda raw: {**raw, "max_lag": None}}

    topic: str
    metric: AutoscaleMetric
    target_per_s: float
    min_active: int
    max_active: int
    up_window_s: float
    down_window_s: float
    cooldown_s: float
    max_step_factor: int
    enabled: bool
    dry_run: bool
    updated_at: float
    max_lag: int | None = None

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "metric": _metric,
        "target_per_s": _positive_number,
        "min_active": _count,
        "max_active": _count,
        "up_window_s": _positive_number,
        "down_window_s": _positive_number,
        "cooldown_s": _positive_number,
        "max_step_factor": _factor,
        "enabled": _bool,
        "dry_run": _bool,
        "updated_at": _time,
        "max_lag": _opt_count,
    }

    def __post_init__(self) -> None:
        self._normalise()

    def _check_invariants(self) -> None:
        if self.max_active < self.min_active:
            raise ValueError(f"max_active {self.max_active} is below min_active {self.min_active}")


@dataclass(frozen=True)
class AutoscaleStatus(_Record):
    """What the autoscaler last did on a topic, at ``.../topics/{topic}/autoscale-status``.

    Attributes:
        topic: The Kafka topic.
        leader: The coordinator that wrote it.
        last_change_at: Unix time of the last layout change the autoscaler started.
        decisions: The newest decisions (at most :data:`DECISION_LOG_SIZE`), oldest
            first; each has ``at`` (unix time), ``action``, ``active``, ``to``,
            ``rate_up``, ``rate_down``, ``rule``, ``reason``, ``acted``, ``dry_run``
            and ``lag`` (consumer lag per active partition; ``null`` when off or
            unknown, and in decisions of version 1 records).
        updated_at: Unix time of the write.
    """

    VERSION: ClassVar[int] = 2
    _UPGRADES: ClassVar[dict[int, _Upgrade]] = {1: _status_v1}

    topic: str
    leader: str
    last_change_at: float | None
    decisions: tuple[dict[str, Any], ...]
    updated_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "leader": _str,
        "last_change_at": _opt_unix,
        "decisions": _decisions,
        "updated_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()
