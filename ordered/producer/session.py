"""The ZooKeeper session of an :class:`~ordered.OrderedProducer`, and its worker's events.

:class:`ProducerSession` is the producer's view of its kazoo session as an explicit
state machine: the shared :class:`coordinator.kernel.session.SessionMachine` (kazoo's states,
its one checked writer and its generation) plus what is the producer's own: whether it
has re-synchronised since the last reconnect, and how many sessions it lost. Keyed
records of an ordered topic are routed only while it is *usable*: connected, and (after
a reconnect) every topic re-read and, after a lost session, every registration
re-created.

Transitions (made only by the machine's checked writer, against
:data:`~coordinator.kernel.session.SESSION_TRANSITIONS`)::

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

from enum import Enum
from typing import NamedTuple

from coordinator.kernel.session import SESSION_TRANSITIONS, SessionMachine, SessionState
from coordinator.kernel.store import AckRecord

__all__ = ["SESSION_TRANSITIONS", "Event", "EventKind", "ProducerSession"]

_C, _L = SessionState.CONNECTED, SessionState.LOST


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


class ProducerSession(SessionMachine):
    """The producer's session: the shared machine plus its own counts (thread-safe)."""

    def __init__(self) -> None:
        super().__init__("producer")
        self.losses = 0
        """Incremented at every lost session (registrations must be re-created)."""
        self._synced = 0
        self._registered = 0
        self.usable = True
        """Connected, and re-synchronised since the last reconnect (a plain attribute:
        the send path reads it for every keyed record; written under the lock)."""

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

    def _entered(self, old: SessionState, new: SessionState) -> None:
        if new is _L:
            self.losses += 1
        self._update()

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
