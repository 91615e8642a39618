"""The ZooKeeper session as an explicit state machine, shared by every client of the layer.

A reader (:class:`~coordinator.kernel.history.HistoryWatcher`) and the producer
(``ordered.producer_session``) follow kazoo's session through one
:class:`SessionMachine`: an Enum of states (:class:`SessionState`), a transition table
(:data:`SESSION_TRANSITIONS`) and one checked writer (:meth:`SessionMachine._set_state`),
which raises :class:`~coordinator.kernel.errors.StateTransitionError` for a move the table does
not list.

Transitions::

    CONNECTED --(connection lost)--> SUSPENDED --(reconnected)--> CONNECTED
    CONNECTED | SUSPENDED --(session expired)--> LOST --(new session)--> CONNECTED
    any --(stop)--> STOPPED

Every reconnect (a move into ``CONNECTED``) increments :attr:`SessionMachine.generation`,
so an owner can tell that watches may have missed changes. A subclass adds what is its
own in :meth:`SessionMachine._entered` (run under the machine's lock).
"""

from __future__ import annotations

import enum
import threading
from typing import Any, Final

from kazoo.client import KazooState

from coordinator.kernel.errors import StateTransitionError

__all__ = ["SESSION_TRANSITIONS", "SessionMachine", "SessionState"]


class SessionState(enum.Enum):
    """The ZooKeeper session as a client of the layer sees it (see the module doc)."""

    CONNECTED = "connected"
    SUSPENDED = "suspended"
    LOST = "lost"
    STOPPED = "stopped"


_C, _SU, _L, _ST = (
    SessionState.CONNECTED,
    SessionState.SUSPENDED,
    SessionState.LOST,
    SessionState.STOPPED,
)

SESSION_TRANSITIONS: Final[dict[SessionState, frozenset[SessionState]]] = {
    _C: frozenset({_SU, _L, _ST}),
    _SU: frozenset({_C, _L, _ST}),
    _L: frozenset({_C, _ST}),
    _ST: frozenset(),
}
"""Every legal ``old -> new`` of a session (see the module doc)."""

_FROM_KAZOO: Final = {
    KazooState.CONNECTED: _C,
    KazooState.SUSPENDED: _SU,
    KazooState.LOST: _L,
}


class SessionMachine:
    """One client's session state (thread-safe; see the module doc).

    Args:
        name: What the machine belongs to, for the error message.
        lock: The lock that guards the state; an owner passes its own so that what it
            changes on a transition (in :meth:`_entered`) changes atomically with it.
    """

    def __init__(self, name: str, lock: threading.Lock | None = None) -> None:
        self._name = name
        self._lock = lock or threading.Lock()
        self._state = _C
        self.generation = 0
        """Incremented at every reconnect (every move into ``CONNECTED``)."""

    @property
    def state(self) -> SessionState:
        """The session state now."""
        return self._state

    @property
    def stopped(self) -> bool:
        """Whether the machine reached ``STOPPED`` (no further moves)."""
        return self._state is _ST

    def _set_state(self, new: SessionState) -> bool:
        """The only writer of the state; ``True`` if it changed.

        Raises:
            StateTransitionError: ``old -> new`` is not in :data:`SESSION_TRANSITIONS`.
        """
        with self._lock:
            return self._set_state_locked(new)

    def _set_state_locked(self, new: SessionState) -> bool:
        old = self._state
        if new is old:
            return False
        if new not in SESSION_TRANSITIONS[old]:
            raise StateTransitionError(
                f"{self._name}: session state {old.name} -> {new.name} is not a transition"
            )
        self._state = new
        if new is _C:
            self.generation += 1
        self._entered(old, new)
        return True

    def _entered(self, old: SessionState, new: SessionState) -> None:
        """What a subclass does on a move (under the lock; must not block)."""

    def on_kazoo(self, state: Any) -> bool:
        """Follow a kazoo session state; ``True`` if ours changed (kazoo's thread)."""
        if self._state is _ST:
            return False
        return self._set_state(_FROM_KAZOO[state])

    def stop(self) -> None:
        """Stopped: no further transitions (idempotent)."""
        with self._lock:
            if self._state is not _ST:
                self._set_state_locked(_ST)
