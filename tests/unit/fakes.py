"""Stand-ins the unit tests share: one of each, imported (``from fakes import ...``)."""

from __future__ import annotations

__all__ = ["FakeClock"]


class FakeClock:
    """A :class:`~coordinator.client.clock.Clock` that moves only when told (or slept on).

    ``now`` is its monotonic time; :meth:`time` is the epoch time at the same instant.
    Called, it returns ``now``: the form of the parts that take a bare ``clock``
    callable (``RetryPolicy.call``, the supervisor).
    """

    EPOCH = 1_700_000_000.0
    """The epoch time at monotonic 0."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.EPOCH + self.now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        """A pause that takes no real time: the clock moves by it."""
        self.slept.append(seconds)
        if seconds > 0:
            self.now += seconds
