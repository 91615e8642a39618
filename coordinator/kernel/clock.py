"""The one clock abstraction: what a part that measures time is given, so a test can
give it a fake.

A part that schedules or measures (the consumer's core, its log-start probe and its
check pacer; the retry policy, the supervisor, the topic-id check) takes a
:class:`Clock`; in use it is :data:`SYSTEM_CLOCK`, whose methods
are ``time.monotonic`` and ``time.time`` themselves (no call in between). A test passes
an object with the same two methods and moves its time by hand.
"""

from __future__ import annotations

import time as _time
from typing import Final, Protocol

__all__ = ["SYSTEM_CLOCK", "Clock", "SystemClock"]


class Clock(Protocol):
    """Where a part reads the time."""

    def monotonic(self) -> float:
        """Seconds of a clock that never goes back (for intervals and deadlines)."""
        ...

    def time(self) -> float:
        """Seconds since the epoch (for timestamps other processes read)."""
        ...


class SystemClock:
    """The process's clocks: ``time.monotonic`` and ``time.time``."""

    monotonic = staticmethod(_time.monotonic)
    time = staticmethod(_time.time)


SYSTEM_CLOCK: Final[Clock] = SystemClock()
"""The clock every part uses unless a test gives it another."""
