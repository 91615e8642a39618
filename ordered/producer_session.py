"""The ZooKeeper session of an :class:`~ordered.OrderedProducer`, and its worker's events.

:class:`ProducerSession` is the producer's view of its kazoo session as an explicit
state machine: kazoo's states (:class:`coordinator.history.SessionState`) plus whether
the producer has re-synchronised since the last reconnect. Keyed records of an ordered
topic are routed only while it is *usable*: connected, and (after a reconnect) every
topic re-read and, after a lost session, every registration re-created.

Transitions (made only by :meth:`ProducerSession._set_state`, checked against
:data:`SESSION_TRANSITIONS`)::

    CONNECTED --(connection lost)--> SUSPENDED --(reconnected)--> CONNECTED
    CONNECTED | SUSPENDED --(session expired)--> LOST --(new session)--> CONNECTED
    any --(close)--> STOPPED

Every reconnect increments :attr:`ProducerSession.generation`; the worker calls
:meth:`ProducerSession.synced` with the generation it read *before* re-reading, so a
reconnect during the re-read is never mistaken for a finished one.

The worker thread receives typed :class:`Event` tuples (:class:`EventKind`), put by
kazoo's threads (which must never block) and by the send path.
"""

from __future__ import annotations

import threading
from enum import Enum
from typing import Final, NamedTuple

from kazoo.client import KazooState

from coordinator.history import SessionState
from coordinator.store import AckRecord

__all__ = ["SESSION_TRANSITIONS", "Event", "EventKind", "ProducerSession"]

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
"""Every legal ``old -> new`` of the producer's session (see the module doc)."""

_FROM_KAZOO: Final = {
    KazooState.CONNECTED: _C,
    KazooState.SUSPENDED: _SU,
    KazooState.LOST: _L,
}


class EventKind(Enum):
    """What the producer's worker thread is told."""

    TOPIC_CHANGED = "topic changed"
    """A topic's watch fired: re-read (and re-watch) its record."""
    SESSION_CHANGED = "session changed"
    """The session state changed: suspend, or re-synchronise."""
    ACK_DUE = "ack due"
    """Write an ack (a drained switch, or a retry of a failed write)."""
    STOP = "stop"
    """Close: end the worker."""


class Event(NamedTuple):
    """One event for the worker.

    Attributes:
        kind: What happened.
        topic: The topic (``TOPIC_CHANGED``, ``ACK_DUE``).
        ack: The ack to write (``ACK_DUE``).
    """

    kind: EventKind
    topic: str = ""
    ack: AckRecord | None = None


class ProducerSession:
    """The producer's session state machine (thread-safe; see the module doc)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._state = SessionState.CONNECTED
        self.generation = 0
        """Incremented at every reconnect."""
        self.losses = 0
        """Incremented at every lost session (registrations must be re-created)."""
        self._synced = 0
        self._registered = 0
        self.usable = True
        """Connected, and re-synchronised since the last reconnect (a plain attribute:
        the send path reads it for every keyed record; written under the lock)."""

    @property
    def state(self) -> SessionState:
        """The session state now."""
        return self._state

    def _update(self) -> None:
        self.usable = self._state is _C and self._synced == self.generation

    @property
    def needs_resync(self) -> bool:
        """Connected again, but not yet re-synchronised."""
        return self._state is _C and self._synced != self.generation

    @property
    def needs_register(self) -> bool:
        """A session was lost since the registrations were last (re-)created."""
        return self._registered != self.losses

    def _set_state(self, new: SessionState) -> bool:
        """The only writer of the state; ``True`` if it changed. Raises on an illegal move."""
        with self._lock:
            old = self._state
            if new is old:
                return False
            if new not in SESSION_TRANSITIONS[old]:
                raise RuntimeError(f"session state {old.name} -> {new.name} is not a transition")
            self._state = new
            if new is _L:
                self.losses += 1
            elif new is _C:
                self.generation += 1
            self._update()
            return True

    def on_kazoo(self, state: str) -> bool:
        """Follow a kazoo session state; ``True`` if ours changed (kazoo's thread)."""
        if self._state is _ST:
            return False
        return self._set_state(_FROM_KAZOO[state])

    def stop(self) -> None:
        """Closed: no further transitions."""
        if self._state is not _ST:
            self._set_state(_ST)

    def synced(self, generation: int, losses: int) -> bool:
        """Mark re-synchronised as of ``generation``/``losses`` (read before the re-read).

        Returns:
            ``False`` if the session changed meanwhile (re-synchronise again).
        """
        with self._lock:
            if self._state is not _C or self.generation != generation:
                return False
            self._synced = generation
            self._registered = losses
            self._update()
            return self.losses == losses
