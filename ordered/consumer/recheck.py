"""Re-checks of held gates: when they run, and what the consumer declares it waits on.

A closed gate holds its partition ``BLOCKED``. :meth:`GateChecker.recheck_blocked`
asks the :class:`~ordered.consumer.decide.GateDecider` again, once per topic for all
its held partitions, every ``ordered.gate.poll.interval.ms``, or at once when the
position service (:mod:`coordinator.client.positions`) says that something a gate waits on
was committed. Only Kafka's committed offsets open a gate: the service only makes the
re-check prompt.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from ordered.consumer.decide import CommittedView, GateDecider
from ordered.consumer.partition import AnnounceState, GateEvent, GateState

if TYPE_CHECKING:
    from coordinator.client.positions import PositionService, Progress
    from ordered.consumer.partition import PartState
    from ordered.consumer.state import Core

__all__ = ["NOTIFY_SLICE", "CommittedView", "GateChecker"]

IDLE = AnnounceState.IDLE

NOTIFY_SLICE = 0.01
"""Longest inner poll while a gate waits on the position service (seconds)."""


class GateChecker:
    """Re-checks closed gates when due; declares what they wait on.

    Args:
        core: The shared state.
        decider: Decides the gates.
        positions: The position service, or ``None`` (``ordered.positions=false``).
        member: This consumer's member name in interest records.
        wake: Called (on kazoo's thread) with a position-service notice: the
            consumer's fast path hands over, so the re-check runs at the next call.
    """

    def __init__(
        self,
        core: Core,
        decider: GateDecider,
        positions: PositionService | None,
        member: str,
        wake: Callable[[], None] | None = None,
    ) -> None:
        self._core = core
        self._decider = decider
        self.positions = positions
        self._member = member
        self._interval = core.config.ordered.gate_poll_interval_ms / 1000.0
        self._declared: dict[str, dict[int, int]] = {}
        self._poked = threading.Event()  # set by a position-service watch (kazoo thread)
        # Whether a gate is paused or an announcement pending, as of Core.version: a gate
        # pauses only through Core.fire and an announcement becomes due only through
        # Announcer.check_marks, both of which bump it (one going idle unnoticed only keeps
        # the slices short a while longer).
        self._busy = False
        self._busy_version = -1
        self._wake = wake

    def quiet_until(self) -> float:
        """Until when :meth:`service` has nothing to do: the next re-check (0.0: a notice came)."""
        return 0.0 if self._poked.is_set() else self._core.next_check

    def service(self) -> None:
        """Re-check closed gates when due (at once after a position-service notice)."""
        if self._poked.is_set():
            self._poked.clear()
            self._core.check_gates_at(0.0)
        if time.monotonic() >= self._core.next_check:
            self.recheck_blocked()

    def recheck_blocked(self) -> None:
        """Re-check every ``BLOCKED`` partition from the committed offsets."""
        core = self._core
        core.check_gates_at(time.monotonic() + self._interval)
        if not core.layouts.usable:
            return
        by_topic: dict[str, list[PartState]] = {}
        for part in core.parts.values():
            if part.gate.state is GateState.BLOCKED:
                by_topic.setdefault(part.topic, []).append(part)
        for topic in [t for t in self._declared if t not in by_topic]:
            self._declare(topic, {})
        for topic, parts in by_topic.items():
            gates = core.layouts.topics[topic].gates
            if gates is None:
                for part in parts:
                    core.fire(part, GateEvent.RECHECK_OPEN, reason="not ordered")
                continue
            waits = self._decider.recheck(topic, gates, parts, self.positions is not None)
            if waits is not None:
                self._declare(topic, waits)

    def _declare(self, topic: str, waits: dict[int, int]) -> None:
        """Tell the position service what this consumer waits on, and watch it."""
        if self.positions is None or self._declared.get(topic, {}) == waits:
            return
        if waits:
            self._declared[topic] = waits
        else:
            self._declared.pop(topic, None)
        self.positions.declare(topic, self._member, waits)
        for partition in waits:
            self.positions.watch(topic, partition, self._on_progress)

    def _on_progress(self, _progress: Progress) -> None:
        # kazoo's thread: only raise a flag; the poll thread re-checks from Kafka.
        self._poked.set()
        if self._wake is not None:
            self._wake()

    def slice(self, deadline: float | None, dirty: bool) -> float:
        """How long the next inner poll may wait: short while a gate needs re-checks."""
        core = self._core
        if self._busy_version != core.version:  # a gate or an announcement may have moved
            self._busy_version = core.version
            self._busy = False
            for p in core.parts.values():
                if p.gate.paused or p.ann.state is not IDLE:
                    self._busy = True
                    break
        busy = self._busy
        step = self._interval if busy or dirty else 1.0
        if busy and self.positions is not None:
            # A progress notification is only seen between inner polls: keep them short.
            step = min(step, NOTIFY_SLICE)
        if deadline is None:
            return step
        return max(0.0, min(step, deadline - time.monotonic()))
