"""Pacing of the consumer's layout checks: a token bucket.

``ordered.layout.check.max.requests.per.s`` bounds the ZooKeeper requests the checks of
fetched batches send. The bound holds on average: one check per slot (its requests at
the configured rate), and up to :data:`CHECK_BURST` checks back to back after a quiet
spell. A new assignment's first batches each need a check (their partitions' high
watermarks arrive in different fetch responses); a strict one-per-slot pace made the
second of them wait a whole slot.
"""

from __future__ import annotations

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock

__all__ = ["CHECK_BURST", "CheckPacer"]

CHECK_BURST = 2
"""Checks that may go back to back (the bucket's size)."""


class CheckPacer:
    """A token bucket of :data:`CHECK_BURST` checks, refilled at one per slot.

    Args:
        clock: Where the time is read (its ``monotonic``; a test's fake).
    """

    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._tokens = float(CHECK_BURST)
        self._at = clock.monotonic()

    def due_in(self, slot: float) -> float:
        """Seconds until a check may be sent (0: now), with one check per ``slot``."""
        if slot <= 0:
            return 0.0
        missing = 1.0 - self._refill(slot)
        return missing * slot if missing > 1e-9 else 0.0

    def sent(self, slot: float) -> None:
        """A check was sent: it takes a token (a debt, when sent before its slot)."""
        if slot > 0:
            self._tokens = self._refill(slot) - 1.0

    def _refill(self, slot: float) -> float:
        now = self._clock.monotonic()
        self._tokens = min(float(CHECK_BURST), self._tokens + (now - self._at) / slot)
        self._at = now
        return self._tokens
