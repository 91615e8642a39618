"""The consumer's gate and announcement state machines, driven with fake messages."""

from __future__ import annotations

import itertools
import math

import pytest
from fakes import Msg, gate_in, kwargs_for

from coordinator.kernel.errors import StateTransitionError
from ordered.consumer.partition import (
    ANNOUNCE_TRANSITIONS,
    HOLD_ALL,
    PAUSED,
    TRANSITIONS,
    AnnounceEvent,
    Announcement,
    AnnounceState,
    GateEvent,
    GateState,
    PartitionGate,
)


@pytest.mark.parametrize(("state", "event"), list(itertools.product(GateState, GateEvent)), ids=str)
def test_every_state_event_pair_is_a_listed_transition_or_an_error(
    state: GateState, event: GateEvent
) -> None:
    gate = gate_in(state)
    if event is GateEvent.STASH_DELIVERED and state is GateState.DRAINING:
        gate.take(10)  # the stash went out: the one way this event is legal
    allowed = TRANSITIONS.get((state, event))
    if allowed is None:
        with pytest.raises(StateTransitionError, match=f"{event.name}.*{state.name}"):
            gate.fire(event, 10, **kwargs_for(event))  # type: ignore[arg-type]
        assert gate.state is state  # a refused event changes nothing
        return
    change = gate.fire(event, 10, **kwargs_for(event))  # type: ignore[arg-type]
    assert change.old is state
    assert change.new in allowed
    assert gate.state is change.new
    # librdkafka's pause follows the state exactly.
    if change.new in PAUSED and state not in PAUSED:
        assert change.pause is True
    elif change.new not in PAUSED and state in PAUSED:
        assert change.pause is False
    else:
        assert change.pause is None
    if gate.state is GateState.BLOCKED:
        assert gate.limit == HOLD_ALL and gate.held is not None
    else:
        assert gate.held is None


def test_the_table_names_only_states_and_events() -> None:
    for (state, event), targets in TRANSITIONS.items():
        assert isinstance(state, GateState) and isinstance(event, GateEvent)
        assert targets and all(isinstance(t, GateState) for t in targets)


def test_closed_gate_stashes_then_drains_in_offset_order() -> None:
    gate = PartitionGate("t", 3, open_limit=5)
    assert gate.fire(GateEvent.GATE_CLOSED, 5, held=5).pause is True
    gate.fire(GateEvent.STASHED, 5, records=[Msg(0, 7), Msg(0, 5), Msg(0, 6)])
    gate.fire(GateEvent.STASHED, 5, records=[Msg(0, 6), Msg(0, 8)])  # a refetch merges
    assert [m.offset() for m in gate.stash] == [5, 6, 7, 8]
    assert gate.take(10) == []  # nothing leaves a blocked gate
    change = gate.fire(GateEvent.RECHECK_OPEN, math.inf, cap=5)
    assert change.new is GateState.DRAINING and change.pause is None
    assert gate.limit == 5  # the held record runs the crossing again
    assert [m.offset() for m in gate.take(3)] == [5, 6, 7]
    assert [m.offset() for m in gate.take(3)] == [8]
    change = gate.fire(GateEvent.STASH_DELIVERED, math.inf)
    assert (change.new, change.pause) == (GateState.FREE, False)


def test_stash_delivered_with_records_left_is_an_error() -> None:
    gate = gate_in(GateState.DRAINING)
    with pytest.raises(StateTransitionError, match="records left"):
        gate.fire(GateEvent.STASH_DELIVERED, 10)


def test_a_user_pause_is_never_resumed_by_the_gate() -> None:
    gate = gate_in(GateState.BLOCKED)
    gate.user_paused = True
    change = gate.fire(GateEvent.RECHECK_OPEN, math.inf)
    assert change.new is GateState.FREE and change.pause is None
    gate.fire(GateEvent.STASHED, math.inf, records=[Msg(0, 1)])
    assert gate.take(5) == []  # a draining gate the application paused waits
    gate.user_paused = False
    assert [m.offset() for m in gate.take(5)] == [1]


def test_seek_drops_the_stash_and_reopens() -> None:
    gate = gate_in(GateState.BLOCKED)
    gate.fire(GateEvent.STASHED, 10, records=[Msg(0, 10)])
    change = gate.fire(GateEvent.SOUGHT, 10)
    assert (change.new, change.pause, gate.stash) == (GateState.GATED, False, [])


def test_layout_lost_checks_every_record_until_it_is_back() -> None:
    gate = gate_in(GateState.FREE)
    gate.fire(GateEvent.LAYOUT_LOST, math.inf)
    assert gate.state is GateState.FREE and gate.limit == HOLD_ALL
    gate.fire(GateEvent.UNAVAILABLE, math.inf, held=0)
    assert gate.state is GateState.BLOCKED
    gate2 = gate_in(GateState.GATED)
    gate2.fire(GateEvent.LAYOUT_LOST, 10)
    gate2.fire(GateEvent.LAYOUT_BACK, 10)
    assert gate2.limit == 10


@pytest.mark.parametrize(
    ("state", "event"), list(itertools.product(AnnounceState, AnnounceEvent)), ids=str
)
def test_every_announcement_pair_is_listed_or_an_error(
    state: AnnounceState, event: AnnounceEvent
) -> None:
    ann = Announcement()
    if state is not AnnounceState.IDLE:
        ann.reached(10, 10)
    if state is AnnounceState.TOLD:
        ann.told()
    assert ann.state is state
    target = ANNOUNCE_TRANSITIONS.get((state, event))
    act = {
        AnnounceEvent.REACHED: lambda: ann.reached(10, 11),
        AnnounceEvent.TOLD: ann.told,
        AnnounceEvent.COMMITTED: lambda: ann.committed(11),
        AnnounceEvent.RELEASED: ann.released,
        # withdraw() is a no-op while idle (a revoked partition with nothing due): the
        # table's writer itself is what this checks.
        AnnounceEvent.WITHDRAWN: lambda: ann._set_state(AnnounceEvent.WITHDRAWN),
    }[event]
    if target is None:
        with pytest.raises(StateTransitionError):
            act()
        assert ann.state is state
    else:
        act()
        assert ann.state is target


def test_a_withdrawal_takes_the_announcement_back_to_what_was_given() -> None:
    ann = Announcement()
    ann.withdraw(3)  # idle: nothing to take back
    assert ann.state is AnnounceState.IDLE
    ann.reached(10, 14)
    ann.withdraw(14)  # nothing past the position was taken back
    assert (ann.state, ann.position) == (AnnounceState.DUE, 14)
    ann.told()
    ann.withdraw(12)  # still past the boundary: due again, for what was given
    assert (ann.state, ann.position, ann.mark) == (AnnounceState.DUE, 12, 10)
    ann.withdraw(8)  # below the boundary: it was never reached
    assert (ann.state, ann.mark) == (AnnounceState.IDLE, None)
    assert ann.store_for(8, pending_giver=False) == 8


def test_stored_offset_stays_below_an_unannounced_boundary() -> None:
    ann = Announcement()
    assert ann.store_for(5, pending_giver=False) == 5
    assert ann.store_for(6, pending_giver=True) == 5  # a pending giver's offset waits
    ann.reached(10, 12)
    assert ann.store_for(12, pending_giver=False) == 9
    ann.told()
    ann.committed(12)
    assert (ann.state, ann.announced, ann.mark) == (AnnounceState.IDLE, 12, None)
    assert ann.store_for(13, pending_giver=False) == 13


def test_a_released_announcement_lets_the_stored_offset_pass_the_boundary() -> None:
    """Application commit mode: after maybe_revoked, the application's commit covers it."""
    ann = Announcement()
    ann.reached(10, 12)
    assert ann.store_for(12, pending_giver=False) == 9
    ann.told()
    assert ann.released() == 12
    assert (ann.state, ann.announced, ann.mark, ann.stored) == (AnnounceState.IDLE, 12, None, 12)
    assert ann.store_for(13, pending_giver=False) == 13


def test_the_state_writer_refuses_a_target_the_table_does_not_list() -> None:
    gate = gate_in(GateState.FREE)
    with pytest.raises(StateTransitionError, match="FREE --GATE_CLOSED--> DRAINING"):
        gate._set_state(GateEvent.GATE_CLOSED, GateState.DRAINING)
    assert gate.state is GateState.FREE


def test_paused_is_membership_in_paused_for_every_state() -> None:
    # PartitionGate.paused compares by identity (an Enum member's hash is Python code):
    # it must still say what PAUSED says.
    gate = PartitionGate("t", 0)
    for state in GateState:
        gate.state = state
        assert gate.paused is (state in PAUSED), state
