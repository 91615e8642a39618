"""Core.draining: which partitions can hand out stashed records (the stash look-up's guard)."""

from __future__ import annotations

import itertools

import pytest
from fakes import bare_core, gate_in, kwargs_for

from coordinator.kernel.errors import StateTransitionError
from ordered.consumer.partition import GateEvent, GateState, PartState
from ordered.consumer.state import Core


def _core_with(state: GateState) -> tuple[Core, PartState]:
    core = bare_core()
    part = PartState("t", 0, gate_in(state))
    core.parts[("t", 0)] = part
    if state is GateState.DRAINING:
        core.draining.add(("t", 0))  # as the fire that drove it there would have
    return core, part


@pytest.mark.parametrize(("state", "event"), list(itertools.product(GateState, GateEvent)), ids=str)
def test_draining_lists_exactly_the_draining_gates_after_any_event(
    state: GateState, event: GateEvent
) -> None:
    core, part = _core_with(state)
    if event is GateEvent.STASH_DELIVERED and state is GateState.DRAINING:
        part.gate.take(10)
    try:
        core.fire(part, event, **kwargs_for(event))  # type: ignore[arg-type]
    except StateTransitionError:
        return  # not a listed transition: nothing changed
    assert (("t", 0) in core.draining) == (part.gate.state is GateState.DRAINING)


def test_a_gate_that_reopens_with_a_stash_is_listed_until_it_is_delivered() -> None:
    core, part = _core_with(GateState.BLOCKED)
    core.fire(part, GateEvent.STASHED, **kwargs_for(GateEvent.STASHED))  # type: ignore[arg-type]
    assert not core.draining  # a blocked gate hands nothing out
    core.fire(part, GateEvent.RECHECK_OPEN, cap=12)
    assert part.gate.state is GateState.DRAINING and core.draining == {("t", 0)}
    assert part.gate.take(10)
    core.fire(part, GateEvent.STASH_DELIVERED)
    assert not core.draining
