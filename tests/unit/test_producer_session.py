"""The producer's session state machine and worker events (pure)."""

from __future__ import annotations

import pytest
from kazoo.client import KazooState

from coordinator.kernel.history import SessionState
from ordered.producer.session import SESSION_TRANSITIONS, Event, EventKind, ProducerSession


def test_every_pair_is_a_transition_or_an_error() -> None:
    for old in SessionState:
        for new in SessionState:
            session = ProducerSession()
            session._state = old
            if new is old:
                assert session._set_state(new) is False
            elif new in SESSION_TRANSITIONS[old]:
                assert session._set_state(new) is True and session.state is new
            else:
                with pytest.raises(RuntimeError, match="not a transition"):
                    session._set_state(new)


def test_usable_only_after_resync() -> None:
    session = ProducerSession()
    assert session.usable and not session.needs_resync and not session.needs_register
    session.on_kazoo(KazooState.SUSPENDED)
    assert not session.usable and not session.needs_resync
    session.on_kazoo(KazooState.CONNECTED)
    assert not session.usable and session.needs_resync and not session.needs_register
    generation, losses = session.generation, session.losses
    assert session.synced(generation, losses) and session.usable


def test_lost_session_needs_register_and_a_reconnect_during_resync_restarts_it() -> None:
    session = ProducerSession()
    session.on_kazoo(KazooState.LOST)
    session.on_kazoo(KazooState.CONNECTED)
    assert session.needs_register and session.needs_resync
    generation, losses = session.generation, session.losses
    session.on_kazoo(KazooState.SUSPENDED)  # while re-reading
    session.on_kazoo(KazooState.CONNECTED)
    assert not session.synced(generation, losses) and not session.usable
    assert session.synced(session.generation, session.losses)
    assert session.usable and not session.needs_register


def test_stopped_ignores_kazoo() -> None:
    session = ProducerSession()
    session.stop()
    assert session.on_kazoo(KazooState.CONNECTED) is False
    assert session.state is SessionState.STOPPED and not session.usable


def test_events_are_typed() -> None:
    event = Event(EventKind.TOPIC_CHANGED, "t")
    assert event.kind is EventKind.TOPIC_CHANGED and event.ack is None
    assert Event(EventKind.STOP).topic == ""
