"""Core.draining: which partitions can hand out stashed records (the stash look-up's guard)."""

from __future__ import annotations

import itertools
from types import SimpleNamespace
from typing import Any

import pytest
from test_consumer_gate import gate_in, kwargs_for

from coordinator.client.errors import StateTransitionError
from ordered.consumer.partition import GateEvent, GateState, PartState
from ordered.consumer.state import Core


class _Quiet:
    """Consumer and hooks: the calls Core.fire makes, doing nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return -1, -1  # none known yet


_CONFIG = SimpleNamespace(prefetch_records=100_000)


class _Layouts:
    def __init__(self) -> None:
        self.topics: dict[str, Any] = {}  # no layout: every partition's open limit is none


def _core_with(state: GateState) -> tuple[Core, PartState]:
    core = Core(_Quiet(), _CONFIG, _Layouts(), _Quiet(), None)  # type: ignore[arg-type]
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
