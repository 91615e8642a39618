"""The consumer's core reads the time from the clock it is given (``Core.clock``): a gate's
wait and the re-check schedule, measured on a fake clock that moves only when told."""

from __future__ import annotations

from typing import Any

from fakes import FakeClock, Quiet, bare_core, gate_in

from ordered.consumer.judge import GateChecker
from ordered.consumer.partition import GateEvent, GateState, PartState
from ordered.consumer.state import Core


class _Events(Quiet):
    """The gate hooks, recorded."""

    def __init__(self) -> None:
        self.seen: list[tuple[str, float]] = []

    def gate_opened(self, topic: str, partition: int, wait_seconds: float) -> None:
        self.seen.append(("opened", wait_seconds))

    def gate_dropped(self, topic: str, partition: int, wait_seconds: float) -> None:
        self.seen.append(("dropped", wait_seconds))


def _core(clock: FakeClock, events: Any = None) -> Core:
    return bare_core(events=events, clock=clock)


def test_a_gate_wait_is_measured_on_the_core_clock() -> None:
    clock, events = FakeClock(), _Events()
    core = _core(clock, events)
    part = PartState("t", 0, gate_in(GateState.GATED))
    core.parts[("t", 0)] = part
    core.fire(part, GateEvent.GATE_CLOSED, held=10)
    clock.advance(2.5)
    core.fire(part, GateEvent.RECHECK_OPEN, cap=12)
    core.fire(part, GateEvent.GATE_CLOSED, held=12)
    clock.advance(4.0)
    core.dropped(part)
    assert events.seen == [("opened", 2.5), ("dropped", 4.0)]


def test_closed_gates_are_rechecked_when_the_core_clock_says_so() -> None:
    clock = FakeClock()
    core = _core(clock)
    checker = GateChecker(core, None, None, "m")  # type: ignore[arg-type]
    checker.service()  # due at once (nothing scheduled yet): the next one in 0.5 s
    assert core.next_check == 1000.5
    clock.advance(0.4)
    checker.service()
    assert core.next_check == 1000.5  # not due yet
    clock.advance(0.1)
    checker.service()
    assert core.next_check == 1001.0
