"""Supervision of long-lived loops: restart with backoff, count failures, report health.

A background thread that dies on an unexpected exception stops doing its job while
the process looks healthy (a daemon that stays leader and never trims again). A
:class:`Supervisor` runs one loop function instead of a bare thread target:

* an exception the loop lets out is logged with its traceback, reported to the hooks
  (``on_thread_restart``; Prometheus counts ``ordered_thread_restarts_total{thread}``)
  and the loop is called again after a bounded exponential backoff
  (:func:`backoff_delay`);
* ``max_failures`` failures within ``window`` seconds make it unhealthy until the
  window holds fewer again;
* the loop reports progress through its :class:`Heartbeat` (``beat()`` once per
  round); a running loop with no progress for ``stuck_after`` seconds is *stuck*. A loop
  that waits on purpose for something outside (a follower contending for leadership)
  says so with ``idle()``: no progress is due until its next ``beat()``.

The loop returning normally ends the supervisor (the loop's own stop condition).
:meth:`Supervisor.health` says how it is now, computed from the clock passed in, so
the rules are tested with a fake clock.

States (:class:`LoopState`; only :meth:`Supervisor._set_state` changes it)::

    READY -> RUNNING          started
    RUNNING -> BACKOFF        the loop raised; it is called again after the backoff
    BACKOFF -> RUNNING        the backoff ended
    READY|RUNNING|BACKOFF -> STOPPED   the loop returned, or stop was asked

Tests inject faults through :func:`inject_faults`: the function given is called with
the loop's name at every ``beat()`` and may raise, as a bug in the loop would.
"""

from __future__ import annotations

import collections
import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from typing import Final

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock
from coordinator.kernel.hooks import ThreadEvents

__all__ = [
    "Heartbeat",
    "LoopHealth",
    "LoopState",
    "SupervisionSettings",
    "Supervisor",
    "backoff_delay",
    "inject_faults",
    "unhealthy",
]

_log = logging.getLogger(__name__)

_fault: Callable[[str], None] | None = None


@contextmanager
def inject_faults(fault: Callable[[str], None]) -> Iterator[None]:
    """Test hook: call ``fault(name)`` at every ``beat()`` of every loop while inside."""
    global _fault
    previous, _fault = _fault, fault
    try:
        yield
    finally:
        _fault = previous


class LoopState(Enum):
    """Where a supervised loop is.

    Attributes:
        READY: Made, not started.
        RUNNING: The loop function runs.
        BACKOFF: It raised; waiting to call it again.
        STOPPED: It returned, or stop was asked; final.
    """

    READY = "ready"
    RUNNING = "running"
    BACKOFF = "backoff"
    STOPPED = "stopped"


_ALLOWED: Final = {
    (LoopState.READY, LoopState.RUNNING),
    (LoopState.RUNNING, LoopState.BACKOFF),
    (LoopState.BACKOFF, LoopState.RUNNING),
    (LoopState.READY, LoopState.STOPPED),
    (LoopState.RUNNING, LoopState.STOPPED),
    (LoopState.BACKOFF, LoopState.STOPPED),
}


@dataclass(frozen=True)
class SupervisionSettings:
    """How a supervisor restarts a loop and when it calls it unhealthy.

    Attributes:
        backoff_s: The pause after the first failure; it doubles with each failure
            in a row (a round with progress starts it again from here).
        max_backoff_s: The longest pause.
        max_failures: Failures within ``window_s`` that make the loop unhealthy.
        window_s: The window those failures are counted in.
        stuck_intervals: A running loop with no progress for this many of its
            intervals is stuck ...
        min_stuck_s: ... but never sooner than this (a round may wait on Kafka or
            ZooKeeper's own timeouts).
    """

    backoff_s: float = 0.5
    max_backoff_s: float = 30.0
    max_failures: int = 3
    window_s: float = 300.0
    stuck_intervals: float = 5.0
    min_stuck_s: float = 120.0

    def stuck_after(self, interval: float) -> float:
        """Seconds without progress after which a loop of ``interval`` is stuck."""
        return max(self.stuck_intervals * interval, self.min_stuck_s)


def backoff_delay(settings: SupervisionSettings, failures_in_a_row: int) -> float:
    """The pause before calling a loop again after its ``failures_in_a_row``-th failure."""
    exponent = min(max(failures_in_a_row - 1, 0), 32)  # 2**32 * any backoff is past any cap
    return float(min(settings.max_backoff_s, settings.backoff_s * 2.0**exponent))


@dataclass(frozen=True)
class LoopHealth:
    """One loop's health, as :meth:`Supervisor.health` saw it.

    Attributes:
        name: The loop's name (the ``thread`` label).
        state: Its state.
        healthy: Whether it is alive and progressing (``problem`` says why not).
        problem: ``""``, or what is wrong (``failing: ...``, ``stuck: ...``, ``dead: ...``).
        restarts: Times the loop was called again after a failure.
        last_progress: Wall-clock time of its last progress (its start before any).
        last_error: The last exception it raised (``""`` if none).
    """

    name: str
    state: LoopState
    healthy: bool
    problem: str
    restarts: int
    last_progress: float
    last_error: str

    def describe(self) -> str:
        """One line: name, state and, if unhealthy, why."""
        text = f"{self.name}: {self.state.value}, {self.restarts} restarts"
        if self.problem:
            text += f": {self.problem}"
        if self.last_error:
            text += f" (last error: {self.last_error})"
        return text


def unhealthy(healths: Sequence[LoopHealth]) -> list[LoopHealth]:
    """The loops of ``healths`` that are not healthy."""
    return [h for h in healths if not h.healthy]


class Heartbeat:
    """What a supervised loop reports its progress through."""

    def __init__(self, supervisor: Supervisor) -> None:
        self._supervisor = supervisor

    def beat(self) -> None:
        """One round made progress (call once per round)."""
        self._supervisor._progress(idle=False)
        fault = _fault
        if fault is not None:
            fault(self._supervisor.name)

    def idle(self) -> None:
        """The loop now waits on purpose for something outside; no progress is due."""
        self._supervisor._progress(idle=True)

    @property
    def stopping(self) -> bool:
        """Whether :meth:`Supervisor.stop` was asked."""
        return self._supervisor.stopping


class Supervisor:
    """Run ``loop(heartbeat)`` and call it again whenever it raises (see the module doc).

    Args:
        name: The loop's name (log lines, the ``thread`` label, the thread's name).
        loop: The loop function; it returns when its own stop condition holds.
        interval: The loop's nominal round time (for stuck detection).
        settings: Backoff and health rules.
        hooks: Objects that receive ``on_thread_restart`` and ``on_thread_state``
            (:mod:`coordinator.kernel.hooks`).
        clock: Where the time is read: ``monotonic`` for the rules, ``time`` for
            ``last_progress`` (a fake one in tests).
    """

    def __init__(
        self,
        name: str,
        loop: Callable[[Heartbeat], None],
        interval: float,
        settings: SupervisionSettings | None = None,
        hooks: Sequence[object] = (),
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.name = name
        self._loop = loop
        self._settings = settings or SupervisionSettings()
        self._stuck_after = self._settings.stuck_after(interval)
        self._events = ThreadEvents(hooks)
        self._clock = clock
        self._lock = threading.Lock()
        self._state = LoopState.READY
        self._stop = threading.Event()
        self._failures: collections.deque[float] = collections.deque()
        self._in_a_row = 0
        self._restarts = 0
        self._last_error = ""
        self._progress_at = clock.monotonic()
        self._progress_wall = clock.time()
        self._idle = False
        self.thread: threading.Thread | None = None

    @property
    def state(self) -> LoopState:
        """The current state."""
        return self._state

    @property
    def stopping(self) -> bool:
        """Whether :meth:`stop` was asked."""
        return self._stop.is_set()

    def _set_state(self, state: LoopState) -> None:
        """The one place the state changes; rejects transitions not listed above."""
        with self._lock:
            if state is self._state:
                return
            previous = self._state
            if (previous, state) not in _ALLOWED:
                raise AssertionError(f"{self.name}: {previous.value} -> {state.value}")
            self._state = state
        self._events.thread_state(self.name, previous.value, state.value)

    def _progress(self, idle: bool, reset: bool = True) -> None:
        with self._lock:
            self._progress_at = self._clock.monotonic()
            self._progress_wall = self._clock.time()
            self._idle = idle
            if reset and not idle:
                self._in_a_row = 0  # a round made progress: the backoff starts again

    def start(self, daemon: bool = True, thread_name: str | None = None) -> threading.Thread:
        """Run the loop in a new thread (named ``thread_name``, or after the loop)."""
        thread = threading.Thread(target=self.run, name=thread_name or self.name, daemon=daemon)
        self.thread = thread
        thread.start()
        return thread

    def run(self) -> None:
        """Run the loop here, calling it again after each failure, until it returns."""
        beat = Heartbeat(self)
        try:
            while not self._stop.is_set():
                self._progress(idle=False, reset=False)  # a (re)start counts as progress
                self._set_state(LoopState.RUNNING)
                try:
                    self._loop(beat)
                    self._stop.set()  # the loop's own stop condition: not a death
                    return
                except Exception as exc:
                    delay = self._failed(exc)
                self._set_state(LoopState.BACKOFF)
                if self._stop.wait(delay):
                    return
                self._restarts += 1
        finally:
            self._set_state(LoopState.STOPPED)

    def _failed(self, exc: Exception) -> float:
        """Log and count one failure; return the backoff before the next call."""
        now = self._clock.monotonic()
        with self._lock:
            self._failures.append(now)
            self._in_a_row += 1
            self._last_error = f"{type(exc).__name__}: {exc}"
            in_a_row = self._in_a_row
        delay = backoff_delay(self._settings, in_a_row)
        _log.error(
            "%s: unexpected error (failure %d in a row); restarting in %.1f s",
            self.name,
            in_a_row,
            delay,
            exc_info=exc,
        )
        self._events.thread_restart(self.name, type(exc).__name__)
        return delay

    def stop(self) -> None:
        """Ask for no further restart (the loop's own stop condition ends a running one)."""
        self._stop.set()

    def join(self, timeout: float | None = None) -> None:
        """Wait for the thread :meth:`start` made (if any)."""
        if self.thread is not None:
            self.thread.join(timeout)

    def health(self) -> LoopHealth:
        """How the loop is now (computed at the call, from the clock)."""
        now = self._clock.monotonic()
        settings = self._settings
        with self._lock:
            while self._failures and self._failures[0] <= now - settings.window_s:
                self._failures.popleft()
            failures = len(self._failures)
            state = self._state
            quiet = now - self._progress_at
            idle = self._idle
            problem = ""
            if state is LoopState.STOPPED and not self._stop.is_set():
                problem = "dead: the thread ended on an error it could not catch"
            elif failures >= settings.max_failures:
                problem = f"failing: {failures} failures in the last {settings.window_s:g} s"
            elif state is LoopState.RUNNING and not idle and quiet > self._stuck_after:
                problem = f"stuck: no progress for {quiet:.0f} s"
            health = LoopHealth(
                name=self.name,
                state=state,
                healthy=not problem,
                problem=problem,
                restarts=self._restarts,
                last_progress=self._progress_wall,
                last_error=self._last_error,
            )
        return health
