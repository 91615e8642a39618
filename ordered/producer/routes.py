"""Routes and topic state of an :class:`~ordered.OrderedProducer`.

Per topic, a producer keeps a :class:`TopicInfo` (what it knows: the applied record, an
open switch, acked epochs) and a :class:`Route` (what ``produce`` reads: immutable,
replaced whole on every change). :class:`RouteTable` is the one writer of both: it
turns a topic record into a state, a route and maybe a switch (:meth:`RouteTable.apply`)
and keeps the compiled send path's table (:attr:`RouteTable.fast`) in step. Every call
is made under the producer's lock.

The fast table (topic -> ``None`` for a plain topic, the compiled router
(:func:`ordered.compiled.compiled_router`) of a topic routed by murmur3 without a
header) is read by ``ordered._fastproduce`` without the
lock; docs/protocol.md ("Fencing the route switch") says why that is safe: an entry is
removed before any switch starts tracking, and the whole table is empty while a switch
is open, while the session is not usable and after close.
"""

from __future__ import annotations

import itertools
import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from coordinator.kernel.errors import StateTransitionError
from coordinator.kernel.store import TopicRecord
from linear_hash import DEFAULT_ALGORITHM, KeyRouter, Layout, Router
from ordered.compaction import TombstoneMemo
from ordered.compiled import compiled_router
from ordered.producer.tracking import DrainTracker, Switch

__all__ = [
    "PLAIN_ROUTE",
    "TRANSITIONS",
    "FastEntry",
    "Route",
    "RouteTable",
    "TopicInfo",
    "TopicState",
    "check_transition",
    "merge_headers",
]

_log = logging.getLogger(__name__)

FastEntry = KeyRouter | None
"""An entry of the compiled send path's table: ``None`` (plain) or the topic's router."""


class TopicState(Enum):
    """The state of one topic inside an :class:`~ordered.OrderedProducer`.

    Transitions (made only by :meth:`RouteTable.set_state`, checked against
    :data:`TRANSITIONS`):

    - ``UNKNOWN`` -> ``PLAIN`` | ``ROUTING`` | ``SWITCHING``: first use (register, then
      read the topic record); ``-> SUSPENDED`` if the session broke meanwhile.
    - ``PLAIN`` -> ``ROUTING`` | ``SWITCHING``: the topic was adopted (or made ordered).
    - ``ROUTING`` -> ``SWITCHING``: a new epoch is pending; the route is replaced at once.
    - ``SWITCHING`` -> ``ROUTING``: every record routed before the switch is delivered
      and the ack is written.
    - ``ROUTING``/``SWITCHING`` -> ``PLAIN``: the topic was un-adopted or made unordered.
    - ``ROUTING``/``SWITCHING`` -> ``SUSPENDED``: the ZooKeeper session is suspended or
      lost; keyed records raise :class:`~coordinator.kernel.errors.LayoutUnavailableError`.
    - ``SUSPENDED`` -> ``PLAIN`` | ``ROUTING`` | ``SWITCHING``: the session is back (after
      a loss: re-registered) and the topic record was read again.
    - ``ROUTING`` -> ``ROUTING``, ``SWITCHING`` -> ``SWITCHING``: a newer record (a
      sealed epoch, a newer pending epoch) replaced the route.
    """

    UNKNOWN = "unknown"
    """Not used yet: not registered, layout not read."""
    PLAIN = "plain"
    """Not adopted, or adopted with ``ordered: false``: plain ``produce``."""
    ROUTING = "routing"
    """Routed by the current layout; nothing to ack."""
    SWITCHING = "switching"
    """Routed by a pending epoch's layout; its ack waits for the older records."""
    SUSPENDED = "suspended"
    """The session is suspended or lost: keyed records cannot be routed."""


_S = TopicState
TRANSITIONS: Final[dict[TopicState, frozenset[TopicState]]] = {
    _S.UNKNOWN: frozenset({_S.PLAIN, _S.ROUTING, _S.SWITCHING, _S.SUSPENDED}),
    _S.PLAIN: frozenset({_S.PLAIN, _S.ROUTING, _S.SWITCHING}),
    _S.ROUTING: frozenset({_S.ROUTING, _S.SWITCHING, _S.PLAIN, _S.SUSPENDED}),
    _S.SWITCHING: frozenset({_S.SWITCHING, _S.ROUTING, _S.PLAIN, _S.SUSPENDED}),
    _S.SUSPENDED: frozenset({_S.SUSPENDED, _S.PLAIN, _S.ROUTING, _S.SWITCHING}),
}
"""Every legal ``old -> new`` of :class:`TopicState`."""


def check_transition(old: TopicState, new: TopicState) -> None:
    """Raise :class:`~coordinator.kernel.errors.StateTransitionError` (a ``RuntimeError``) if
    ``old -> new`` is not a transition of :class:`TopicState`."""
    if new not in TRANSITIONS[old]:
        raise StateTransitionError(f"illegal topic state transition {old.name} -> {new.name}")


class Route:
    """What ``produce`` reads for a topic: immutable, replaced whole on every change.

    Attributes:
        state: The topic's state when the route was made.
        plain: No layout: produce as confluent does.
        layout: The layout keyed records are routed by.
        algorithm: The topic's key hash.
        headers: The epoch header to append, or ``None`` (off).
        compacted: KIP-253 section 9 copies are due (compacted and grown).
        copied: Keys whose tombstone copies were sent under this layout and epoch state.
        routable: Keyed records may be routed (a layout, not suspended).
        place: The router's ``partition``: ``key -> partition`` (compiled when it can be).
        round_robin: Partitions for unkeyed records.
        fast: The compiled send path's entry, or ``False`` when it must not be used.
    """

    __slots__ = (
        "algorithm",
        "compacted",
        "copied",
        "fast",
        "headers",
        "layout",
        "place",
        "plain",
        "round_robin",
        "routable",
        "state",
    )

    def __init__(
        self,
        state: TopicState,
        layout: Layout | None = None,
        algorithm: str = DEFAULT_ALGORITHM,
        headers: list[tuple[str, bytes]] | None = None,
        compacted: bool = False,
        copied: TombstoneMemo | None = None,
    ) -> None:
        self.state = state
        self.plain = layout is None
        self.layout = layout
        self.algorithm = algorithm
        self.headers = headers
        # Section 9 applies once a key can live above initial (the topic has grown).
        self.compacted = compacted and layout is not None and layout.active > layout.initial
        # A new epoch, and its seal, send the copies again (after the seal no old-epoch
        # record of any producer can follow them); a rebuild for another reason keeps
        # the memo.
        self.copied = copied if copied is not None else TombstoneMemo()
        self.routable = layout is not None and state is not TopicState.SUSPENDED
        self.place: Callable[[Any], int] | None = None
        router: KeyRouter | None = None
        if layout is not None:
            # A Layout is the murmur3 router of its counts.
            router = compiled_router(
                layout
                if algorithm == DEFAULT_ALGORITHM
                else Router(layout.initial, layout.active, algorithm)
            )
            self.place = router.partition
        self.round_robin: Iterator[int] | None = (
            None if layout is None else itertools.cycle(range(layout.active))
        )
        self.fast: FastEntry | bool = False
        if layout is None:
            self.fast = None
        elif (
            state is TopicState.ROUTING
            and algorithm == DEFAULT_ALGORITHM
            and headers is None
            and not self.compacted
        ):
            self.fast = router

    def with_state(self, state: TopicState) -> Route:
        """The same route in another state (the tombstone memo is kept)."""
        return Route(state, self.layout, self.algorithm, self.headers, self.compacted, self.copied)


PLAIN_ROUTE: Final = Route(TopicState.PLAIN)
"""The route of every plain topic."""


@dataclass(slots=True)
class TopicInfo:
    """Per-topic bookkeeping (changed only under the producer's lock).

    Attributes:
        topic: The topic.
        state: Its state (written only by :meth:`RouteTable.set_state`).
        record: The topic record last applied.
        switch: The open switch to a pending epoch, waiting for its drain.
        acked: Epochs this producer has acked (or needs not ack).
        deferred: A record waiting for librdkafka to know the new partitions.
        valid: ``False`` for a name that is not a Kafka topic (plain, never registered).
        known_partitions: The partition count librdkafka is known to have metadata for.
    """

    topic: str
    state: TopicState = TopicState.UNKNOWN
    record: TopicRecord | None = None
    switch: Switch | None = None
    acked: set[int] = field(default_factory=set)
    deferred: TopicRecord | None = None
    valid: bool = True
    known_partitions: int = 0


def merge_headers(user: Any, ours: list[tuple[str, bytes]]) -> Any:
    """The user's headers (list or dict) with ours appended."""
    if isinstance(user, list):
        return user + ours
    if isinstance(user, dict):
        return [*user.items(), *ours]
    return user  # not a type confluent accepts: let it raise its own error


def _record_key(record: TopicRecord) -> tuple[int, int]:
    # A sealed epoch is newer than the same epoch pending.
    return (record.epoch, 1 if record.pending is None else 0)


@dataclass(frozen=True, slots=True)
class AckDue:
    """An ack to write: ``epoch`` of ``topic`` with these last old-epoch offsets."""

    topic: str
    epoch: int
    last_offsets: dict[int, int]


class RouteTable:
    """Routes, topic states and switches of one producer (all under its lock).

    Args:
        tracker: The producer's delivery tracker (a switch begins a generation).
        header_name: The epoch header's name, or ``None`` when the header is off.
    """

    def __init__(self, tracker: DrainTracker, header_name: str | None) -> None:
        self.tracker = tracker
        self._header_name = header_name
        self.routes: dict[str, Route] = {}
        """Topic -> route; read by ``produce`` without the lock (GIL-atomic lookups)."""
        self.infos: dict[str, TopicInfo] = {}
        self.switches: dict[str, Switch] = {}
        self.fast: dict[str, FastEntry] = {}
        """The compiled send path's table (see the module doc)."""
        self._fast_on = True

    # --- the one writer of states and routes ------------------------------------

    def set_state(self, info: TopicInfo, state: TopicState, route: Route) -> None:
        """Change a topic's state and route (checked); keep the fast table in step."""
        check_transition(info.state, state)
        if info.state is not state:
            _log.debug("%s: %s -> %s", info.topic, info.state.name, state.name)
        info.state = state
        # The fast entry goes first: from here on the compiled path takes the slow
        # path (and so the lock) for this topic until the new entry is published.
        self.fast.pop(info.topic, None)
        self.routes[info.topic] = route
        if self._fast_on and route.fast is not False:
            self.fast[info.topic] = route.fast  # type: ignore[assignment]

    def enable_fast(self, on: bool) -> None:
        """Allow the compiled send path (no switch open, session usable, not closed)."""
        if not on:
            self._fast_on = False
            self.fast.clear()
            return
        if self._fast_on:
            return
        self._fast_on = True
        for topic, route in self.routes.items():
            if route.fast is not False:
                self.fast[topic] = route.fast  # type: ignore[assignment]

    def info(self, topic: str, valid: bool = True) -> TopicInfo:
        """The topic's info, created on first use."""
        found = self.infos.get(topic)
        if found is None:
            found = self.infos[topic] = TopicInfo(topic, valid=valid)
        return found

    def headers_for(self, epoch: int) -> list[tuple[str, bytes]] | None:
        """The epoch header of ``epoch``, or ``None`` when it is off."""
        if self._header_name is None:
            return None
        return [(self._header_name, str(epoch).encode("ascii"))]

    # --- records -> states ---------------------------------------------------------

    def is_stale(self, info: TopicInfo, record: TopicRecord | None) -> bool:
        """Whether ``record`` is older than the one already applied (delivered late)."""
        return (
            record is not None
            and info.record is not None
            and _record_key(record) < _record_key(info.record)
        )

    def apply(self, info: TopicInfo, record: TopicRecord | None, usable: bool) -> list[AckDue]:
        """Move ``info`` to the state ``record`` calls for; return the acks now due.

        Args:
            info: The topic.
            record: Its record (``None``: not adopted).
            usable: Whether the session is usable (else an ordered topic is suspended).
        """
        acks: list[AckDue] = []
        topic = info.topic
        info.deferred = None
        previous = info.record
        info.record = record
        if record is None or not record.ordered:
            pending = None if record is None else record.pending
            if pending is not None and pending not in info.acked:
                # Unordered: nothing to drain, the barrier needs only our ack.
                info.acked.add(pending)
                acks.append(AckDue(topic, pending, {}))
            info.switch = None
            self.switches.pop(topic, None)
            self.set_state(info, TopicState.PLAIN, PLAIN_ROUTE)
            return acks
        layout = Layout(record.initial, record.active, record.epoch)
        state = TopicState.ROUTING
        pending = record.pending
        if pending is not None and pending not in info.acked:
            if info.switch is not None and info.switch.epoch == pending:
                state = TopicState.SWITCHING
            elif info.state is TopicState.UNKNOWN:
                # Nothing was ever produced to this topic: nothing to drain.
                info.acked.add(pending)
                acks.append(AckDue(topic, pending, {}))
            else:
                # Every record from here on is tracked: no compiled send path (which
                # sends untracked records) until the switch is acked.
                self.enable_fast(False)
                info.switch = Switch(topic, pending, self.tracker.begin())
                self.switches[topic] = info.switch
                state = TopicState.SWITCHING
        else:
            info.switch = None
            self.switches.pop(topic, None)
        if not usable:
            state = TopicState.SUSPENDED
        current = self.routes.get(topic)
        same = (
            previous is not None
            and current is not None
            and (previous.epoch, previous.active, previous.pending)
            == (record.epoch, record.active, record.pending)
        )
        route = Route(
            state,
            layout,
            record.algorithm,
            self.headers_for(record.epoch),
            record.compacted,
            current.copied if same and current is not None else None,
        )
        self.set_state(info, state, route)
        return acks

    def drained(self, queue_len: int, idle_only: bool) -> list[AckDue]:
        """Close every switch whose older records are all delivered; return its ack.

        Args:
            queue_len: ``len(producer)`` read now, under the lock.
            idle_only: Only when nothing at all is pending (``queue_len == 0``): used
                by a thread that does not serve delivery reports, since a report being
                served on another thread could make ``queue_len - tracked`` too small.
        """
        done: list[AckDue] = []
        for topic, switch in list(self.switches.items()):
            ready = (
                queue_len == 0 if idle_only else self.tracker.drained(switch.generation, queue_len)
            )
            if not ready:
                continue
            info = self.infos[topic]
            info.acked.add(switch.epoch)
            info.switch = None
            del self.switches[topic]
            if info.state is TopicState.SWITCHING:
                self.set_state(info, TopicState.ROUTING, self.routes[topic].with_state(_S.ROUTING))
            done.append(AckDue(topic, switch.epoch, switch.last_offsets()))
        return done

    def close_all(self) -> list[AckDue]:
        """Close every open switch at once (everything was delivered); return the acks."""
        done = [AckDue(s.topic, s.epoch, s.last_offsets()) for s in self.switches.values()]
        for switch in self.switches.values():
            self.infos[switch.topic].acked.add(switch.epoch)
        self.switches.clear()
        return done

    def suspend_all(self) -> None:
        """The session is not usable: every routed topic becomes ``SUSPENDED``."""
        for info in self.infos.values():
            if info.state in (TopicState.ROUTING, TopicState.SWITCHING):
                self.set_state(
                    info, TopicState.SUSPENDED, self.routes[info.topic].with_state(_S.SUSPENDED)
                )
