"""The one session state machine (coordinator.kernel.session), as watcher and producer use it."""

from __future__ import annotations

import pytest
from kazoo.client import KazooState

from coordinator.kernel.errors import StateTransitionError
from coordinator.kernel.session import SESSION_TRANSITIONS, SessionMachine, SessionState
from ordered.producer.session import ProducerSession


def test_every_illegal_move_raises_state_transition_error() -> None:
    for old in SessionState:
        for new in SessionState:
            if new is old or new in SESSION_TRANSITIONS[old]:
                continue
            machine = SessionMachine("m")
            machine._state = old
            with pytest.raises(StateTransitionError, match=r"m: session state .* not a transition"):
                machine._set_state(new)


def test_reconnects_count_generations_and_stop_is_terminal() -> None:
    machine = SessionMachine("m")
    machine.on_kazoo(KazooState.SUSPENDED)
    machine.on_kazoo(KazooState.CONNECTED)
    machine.on_kazoo(KazooState.LOST)
    machine.on_kazoo(KazooState.CONNECTED)
    assert machine.generation == 2
    machine.stop()
    machine.stop()
    assert machine.stopped and machine.on_kazoo(KazooState.CONNECTED) is False


def test_the_producer_and_the_watcher_share_the_machine() -> None:
    import coordinator.kernel.history as history

    assert issubclass(ProducerSession, SessionMachine)
    assert issubclass(history._WatcherSession, SessionMachine)
    assert history._TRANSITIONS is SESSION_TRANSITIONS
