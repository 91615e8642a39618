"""Hooks: the events the clients and the coordinator report, in franz-go's style.

A *hook* is any object. It receives exactly the events whose protocol it implements:
one small :class:`typing.Protocol` per event kind (``HookGateBlocked`` has
``on_gate_blocked``, and so on), checked once, when the client is built. A hook
implements as many or as few of them as it likes; the clients take a list of hooks
(``ordered.hooks`` in the configuration dict of the producer and the consumer, the
``hooks`` argument of the controller, the sweeper, the relay and the daemon).

The consumer's own counters (``OrderedConsumer.metrics``) are one such hook, and
Prometheus (:mod:`coordinator.kernel.prometheus`) is another; nothing here depends on either.

Threads and errors: the consumer's events arrive on the thread that calls ``poll`` or
``consume``; the producer's on the thread that applied a layout (its worker, or the
first ``produce`` of a topic) or wrote an ack (its worker, or ``close``); the
coordinator's on its worker threads and on kazoo's connection thread
(``on_session_state``, which must never block). A hook should return quickly and never
call back into the client. A hook that raises is logged once (per method) and the
client carries on: metrics must not change what is delivered.

Events (``group`` is the consumer's ``group.id``, ``""`` without one)::

    consumer  on_gate_blocked(group, topic, partition, offset)      a record waits at a closed gate
              on_gate_opened(group, topic, partition, wait_seconds) that gate opened
              on_gate_dropped(group, topic, partition, wait_seconds) the held partition was
                                                        sought, revoked or unassigned instead
              on_gate_check(group, topic, partition)     a gate was evaluated from Kafka
              on_announcement(group, topic, partition, offset)  a boundary commit was made
              on_violation(group, topic, partition, offset, problem)  a misplaced record
              on_layout_reload(group, topic, epoch)      a topic's history was read (epoch -1:
                                                        not adopted)
              on_layout_check(group)                     a fetched batch's layout check was sent
              on_tombstone_copy(group, topic, partition, offset)  a tombstone copy was passed over
              on_records_delivered(group, count)         records handed to the application
              on_records_held(group, topic, partition, count)  records kept back at a gate
    producer  on_route_switch(topic, from_epoch, to_epoch)  routing moved to a newer epoch
              on_barrier_ack(topic, epoch, latency_seconds)  an epoch's ack was written
              on_tombstone_copy_sent(topic, partition)   a tombstone copy was produced
    coordinator on_epoch_published(topic, epoch, from_active, to_active)
              on_barrier_passed(topic, epoch, seconds)   publish -> every producer acked/expired
              on_epoch_sealed(topic, epoch, seconds)     publish -> sealed
              on_trim(topic, partition, offset, reason, ok)  a sweep trim (reason: drained or
                                                        retention)
              on_relay_round(seconds, published)         one position-relay round
              on_session_state(state)                    ZooKeeper session: connected,
                                                        suspended or lost
              on_leadership(leader)                      this daemon became leader (True) or not
              on_autoscale_decision(topic, action, active, to, rate, acted)  the autoscaler
                                                        decided (action: grow, shrink or hold;
                                                        rate: per active partition over the
                                                        up-window, -1 when unknown)
              on_autoscale_lag(topic, lag)               the autoscaler read the consumer lag
                                                        of a topic with ``max_lag`` (records
                                                        per active partition)
    any       on_thread_restart(thread, error)           a supervised loop raised ``error`` (the
                                                        exception's type name); it restarts
              on_thread_state(thread, previous, state)   a supervised loop went from one of
                                                        ``ready``, ``running``, ``backoff``,
                                                        ``stopped`` to another
                                                        (:mod:`coordinator.kernel.supervise`)
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from typing import Any, Final, Protocol, runtime_checkable

from coordinator.kernel.errors import ConfigError

__all__ = [
    "CONSUMER_HOOKS",
    "COORDINATOR_HOOKS",
    "PRODUCER_HOOKS",
    "THREAD_HOOKS",
    "ConsumerEvents",
    "CoordinatorEvents",
    "HookAnnouncement",
    "HookAutoscaleDecision",
    "HookAutoscaleLag",
    "HookBarrierAck",
    "HookBarrierPassed",
    "HookEpochPublished",
    "HookEpochSealed",
    "HookGateBlocked",
    "HookGateCheck",
    "HookGateDropped",
    "HookGateOpened",
    "HookLayoutCheck",
    "HookLayoutReload",
    "HookLeadership",
    "HookRecordsDelivered",
    "HookRecordsHeld",
    "HookRelayRound",
    "HookRouteSwitch",
    "HookSessionState",
    "HookThreadRestart",
    "HookThreadState",
    "HookTombstoneCopy",
    "HookTombstoneCopySent",
    "HookTrim",
    "HookViolation",
    "ProducerEvents",
    "ThreadEvents",
    "check_hooks",
]

_log = logging.getLogger(__name__)


# --- the consumer ----------------------------------------------------------------------


@runtime_checkable
class HookGateBlocked(Protocol):
    """A partition stopped at a closed gate (or at a record while the layout was away)."""

    def on_gate_blocked(self, group: str, topic: str, partition: int, offset: int) -> None:
        """``offset``: the record held back."""


@runtime_checkable
class HookGateOpened(Protocol):
    """A closed gate opened: the held partition goes on."""

    def on_gate_opened(self, group: str, topic: str, partition: int, wait_seconds: float) -> None:
        """``wait_seconds``: how long the partition was held."""


@runtime_checkable
class HookGateDropped(Protocol):
    """A held partition stopped waiting without its gate opening (seek, revocation)."""

    def on_gate_dropped(self, group: str, topic: str, partition: int, wait_seconds: float) -> None:
        """``wait_seconds``: how long it had been held."""


@runtime_checkable
class HookGateCheck(Protocol):
    """A gate was evaluated against the group's committed offsets."""

    def on_gate_check(self, group: str, topic: str, partition: int) -> None:
        """One evaluation (a record at a gate, or a re-check of a held one)."""


@runtime_checkable
class HookAnnouncement(Protocol):
    """A boundary announcement was committed (after ``on_partition_key_maybe_revoked``)."""

    def on_announcement(self, group: str, topic: str, partition: int, offset: int) -> None:
        """``offset``: the boundary position committed."""


@runtime_checkable
class HookViolation(Protocol):
    """A record contradicts the layout (counted, logged or raised by the policy)."""

    def on_violation(
        self, group: str, topic: str, partition: int, offset: int, problem: str
    ) -> None:
        """``problem``: what the audit found."""


@runtime_checkable
class HookLayoutReload(Protocol):
    """A topic's layout history was read from ZooKeeper."""

    def on_layout_reload(self, group: str, topic: str, epoch: int) -> None:
        """``epoch``: the newest epoch now known (``-1``: the topic is not adopted)."""


@runtime_checkable
class HookLayoutCheck(Protocol):
    """The layout check of a fetched batch was sent (one ZooKeeper round trip)."""

    def on_layout_check(self, group: str) -> None:
        """One check."""


@runtime_checkable
class HookTombstoneCopy(Protocol):
    """A tombstone copy of a compacted topic was passed over (never delivered)."""

    def on_tombstone_copy(self, group: str, topic: str, partition: int, offset: int) -> None:
        """``offset``: the copy's offset."""


@runtime_checkable
class HookRecordsDelivered(Protocol):
    """Records were handed to the application (once per ``poll``/``consume`` batch)."""

    def on_records_delivered(self, group: str, count: int) -> None:
        """``count``: how many (may be 0)."""


@runtime_checkable
class HookRecordsHeld(Protocol):
    """Fetched records were kept back at a closed gate (they are delivered later)."""

    def on_records_held(self, group: str, topic: str, partition: int, count: int) -> None:
        """``count``: how many."""


# --- the producer ----------------------------------------------------------------------


@runtime_checkable
class HookRouteSwitch(Protocol):
    """The producer routes a topic by a newer epoch's layout (at once, no stall)."""

    def on_route_switch(self, topic: str, from_epoch: int, to_epoch: int) -> None:
        """The epochs before and after."""


@runtime_checkable
class HookBarrierAck(Protocol):
    """The producer's ack of a pending epoch was written (its part of the barrier)."""

    def on_barrier_ack(self, topic: str, epoch: int, latency_seconds: float) -> None:
        """``latency_seconds``: from first seeing the epoch pending to the written ack."""


@runtime_checkable
class HookTombstoneCopySent(Protocol):
    """The producer wrote a tombstone copy (compacted topic, KIP-253 section 9)."""

    def on_tombstone_copy_sent(self, topic: str, partition: int) -> None:
        """``partition``: where the copy went."""


# --- the controller and the daemon -----------------------------------------------------


@runtime_checkable
class HookEpochPublished(Protocol):
    """An expansion or shrink published its epoch (pending until sealed)."""

    def on_epoch_published(self, topic: str, epoch: int, from_active: int, to_active: int) -> None:
        """The new epoch and the active partition counts before and after."""


@runtime_checkable
class HookBarrierPassed(Protocol):
    """Every producer listed in a pending epoch acked it (or expired)."""

    def on_barrier_passed(self, topic: str, epoch: int, seconds: float) -> None:
        """``seconds``: from the epoch's publication to now."""


@runtime_checkable
class HookEpochSealed(Protocol):
    """A pending epoch was sealed."""

    def on_epoch_sealed(self, topic: str, epoch: int, seconds: float) -> None:
        """``seconds``: from the epoch's publication to its seal."""


@runtime_checkable
class HookTrim(Protocol):
    """The daemon's sweep asked Kafka to delete records below an offset."""

    def on_trim(self, topic: str, partition: int, offset: int, reason: str, ok: bool) -> None:
        """``reason``: ``drained`` (a retired partition) or ``retention``; ``ok``: done."""


@runtime_checkable
class HookRelayRound(Protocol):
    """One round of the position relay ended."""

    def on_relay_round(self, seconds: float, published: int) -> None:
        """``seconds``: how long it took; ``published``: progress records written."""


@runtime_checkable
class HookSessionState(Protocol):
    """The ZooKeeper session changed state (called on kazoo's thread: never block)."""

    def on_session_state(self, state: str) -> None:
        """``state``: ``connected``, ``suspended`` or ``lost``."""


@runtime_checkable
class HookLeadership(Protocol):
    """The daemon won or left the leadership."""

    def on_leadership(self, leader: bool) -> None:
        """``True``: leader; ``False``: standby."""


@runtime_checkable
class HookAutoscaleDecision(Protocol):
    """The autoscaler decided on a topic (each tick, holds included)."""

    def on_autoscale_decision(
        self, topic: str, action: str, active: int, to: int, rate: float, acted: bool
    ) -> None:
        """``action`` is ``grow``, ``shrink`` or ``hold``; ``acted``: the layout changed."""


@runtime_checkable
class HookAutoscaleLag(Protocol):
    """The autoscaler read the consumer lag of a topic whose policy has ``max_lag``."""

    def on_autoscale_lag(self, topic: str, lag: float) -> None:
        """``lag``: the largest group lag divided by the active count (records)."""


# --- supervised threads (any client, the daemon) -----------------------------------------


@runtime_checkable
class HookThreadRestart(Protocol):
    """A supervised loop raised an unexpected exception; it is called again after a pause."""

    def on_thread_restart(self, thread: str, error: str) -> None:
        """``thread``: the loop's name; ``error``: the exception's type name."""


@runtime_checkable
class HookThreadState(Protocol):
    """A supervised loop changed state."""

    def on_thread_state(self, thread: str, previous: str, state: str) -> None:
        """States: ``ready``, ``running``, ``backoff`` (waiting to restart), ``stopped``."""


CONSUMER_HOOKS: Final[tuple[type, ...]] = (
    HookGateBlocked,
    HookGateOpened,
    HookGateDropped,
    HookGateCheck,
    HookAnnouncement,
    HookViolation,
    HookLayoutReload,
    HookLayoutCheck,
    HookTombstoneCopy,
    HookRecordsDelivered,
    HookRecordsHeld,
)
"""The consumer's event kinds."""

PRODUCER_HOOKS: Final[tuple[type, ...]] = (HookRouteSwitch, HookBarrierAck, HookTombstoneCopySent)
"""The producer's event kinds."""

COORDINATOR_HOOKS: Final[tuple[type, ...]] = (
    HookEpochPublished,
    HookBarrierPassed,
    HookEpochSealed,
    HookTrim,
    HookRelayRound,
    HookSessionState,
    HookLeadership,
    HookAutoscaleDecision,
    HookAutoscaleLag,
)
"""The controller's and the daemon's event kinds."""

THREAD_HOOKS: Final[tuple[type, ...]] = (HookThreadRestart, HookThreadState)
"""The event kinds of supervised loops (every client and the daemon)."""


def check_hooks(key: str, value: Any) -> tuple[object, ...]:
    """Check a list of hooks (the ``ordered.hooks`` setting); return them as a tuple.

    Raises:
        ConfigError: ``value`` is not a list or tuple, or an item implements no event of
            any hook protocol (say, a misspelt method name), naming the item.
    """
    if not isinstance(value, list | tuple):
        raise ConfigError(f"{key}: expected a list of hook objects, got {value!r}")
    kinds = CONSUMER_HOOKS + PRODUCER_HOOKS + COORDINATOR_HOOKS + THREAD_HOOKS
    for hook in value:
        if not any(isinstance(hook, kind) for kind in kinds):
            raise ConfigError(
                f"{key}: {hook!r} implements no hook (methods such as on_gate_blocked, "
                "on_route_switch; see coordinator.kernel.hooks)"
            )
    return tuple(value)


Call = Callable[..., None]


def _calls(hooks: Iterable[object], kind: type, method: str) -> tuple[Call, ...]:
    """The bound ``method`` of every hook that implements ``kind``."""
    return tuple(getattr(h, method) for h in hooks if isinstance(h, kind))


class _Emitter:
    """Calls hooks; one that raises is logged once per method and skipped that time."""

    def __init__(self) -> None:
        self._failed: set[Any] = set()

    def emit(self, calls: Sequence[Call], *args: Any) -> None:
        for call in calls:
            try:
                call(*args)
            except Exception:
                key = getattr(call, "__func__", call)
                if key not in self._failed:
                    self._failed.add(key)
                    _log.exception("hook %r raised (logged once; the client goes on)", call)


class ConsumerEvents(_Emitter):
    """The consumer's events, dispatched to its hooks (built once per consumer).

    Args:
        hooks: The hooks, in calling order.
        group: The consumer's ``group.id`` (``""`` without one), the events' first argument.
    """

    def __init__(self, hooks: Sequence[object], group: str) -> None:
        super().__init__()
        self.group = group
        self._blocked = _calls(hooks, HookGateBlocked, "on_gate_blocked")
        self._opened = _calls(hooks, HookGateOpened, "on_gate_opened")
        self._dropped = _calls(hooks, HookGateDropped, "on_gate_dropped")
        self._check = _calls(hooks, HookGateCheck, "on_gate_check")
        self._announced = _calls(hooks, HookAnnouncement, "on_announcement")
        self._violation = _calls(hooks, HookViolation, "on_violation")
        self._reload = _calls(hooks, HookLayoutReload, "on_layout_reload")
        self._layout_check = _calls(hooks, HookLayoutCheck, "on_layout_check")
        self._tombstone = _calls(hooks, HookTombstoneCopy, "on_tombstone_copy")
        self._delivered = _calls(hooks, HookRecordsDelivered, "on_records_delivered")
        self._held = _calls(hooks, HookRecordsHeld, "on_records_held")

    def gate_blocked(self, topic: str, partition: int, offset: int) -> None:
        """See :class:`HookGateBlocked`."""
        self.emit(self._blocked, self.group, topic, partition, offset)

    def gate_opened(self, topic: str, partition: int, wait_seconds: float) -> None:
        """See :class:`HookGateOpened`."""
        self.emit(self._opened, self.group, topic, partition, wait_seconds)

    def gate_dropped(self, topic: str, partition: int, wait_seconds: float) -> None:
        """See :class:`HookGateDropped`."""
        self.emit(self._dropped, self.group, topic, partition, wait_seconds)

    def gate_check(self, topic: str, partition: int) -> None:
        """See :class:`HookGateCheck`."""
        self.emit(self._check, self.group, topic, partition)

    def announcement(self, topic: str, partition: int, offset: int) -> None:
        """See :class:`HookAnnouncement`."""
        self.emit(self._announced, self.group, topic, partition, offset)

    def violation(self, topic: str, partition: int, offset: int, problem: str) -> None:
        """See :class:`HookViolation`."""
        self.emit(self._violation, self.group, topic, partition, offset, problem)

    def layout_reload(self, topic: str, epoch: int) -> None:
        """See :class:`HookLayoutReload`."""
        self.emit(self._reload, self.group, topic, epoch)

    def layout_check(self) -> None:
        """See :class:`HookLayoutCheck`."""
        self.emit(self._layout_check, self.group)

    def tombstone_copy(self, topic: str, partition: int, offset: int) -> None:
        """See :class:`HookTombstoneCopy`."""
        self.emit(self._tombstone, self.group, topic, partition, offset)

    def records_delivered(self, count: int) -> None:
        """See :class:`HookRecordsDelivered`."""
        self.emit(self._delivered, self.group, count)

    def records_held(self, topic: str, partition: int, count: int) -> None:
        """See :class:`HookRecordsHeld`."""
        self.emit(self._held, self.group, topic, partition, count)


class ProducerEvents(_Emitter):
    """The producer's events, dispatched to its hooks.

    Args:
        hooks: The hooks, in calling order.
    """

    def __init__(self, hooks: Sequence[object]) -> None:
        super().__init__()
        self._switch = _calls(hooks, HookRouteSwitch, "on_route_switch")
        self._ack = _calls(hooks, HookBarrierAck, "on_barrier_ack")
        self._copy = _calls(hooks, HookTombstoneCopySent, "on_tombstone_copy_sent")

    def route_switch(self, topic: str, from_epoch: int, to_epoch: int) -> None:
        """See :class:`HookRouteSwitch`."""
        self.emit(self._switch, topic, from_epoch, to_epoch)

    def barrier_ack(self, topic: str, epoch: int, latency_seconds: float) -> None:
        """See :class:`HookBarrierAck`."""
        self.emit(self._ack, topic, epoch, latency_seconds)

    def tombstone_copy_sent(self, topic: str, partition: int) -> None:
        """See :class:`HookTombstoneCopySent`."""
        self.emit(self._copy, topic, partition)


class CoordinatorEvents(_Emitter):
    """The controller's and the daemon's events, dispatched to their hooks.

    Args:
        hooks: The hooks, in calling order.
    """

    def __init__(self, hooks: Sequence[object] = ()) -> None:
        super().__init__()
        self._published = _calls(hooks, HookEpochPublished, "on_epoch_published")
        self._passed = _calls(hooks, HookBarrierPassed, "on_barrier_passed")
        self._sealed = _calls(hooks, HookEpochSealed, "on_epoch_sealed")
        self._trim = _calls(hooks, HookTrim, "on_trim")
        self._relay = _calls(hooks, HookRelayRound, "on_relay_round")
        self._session = _calls(hooks, HookSessionState, "on_session_state")
        self._leader = _calls(hooks, HookLeadership, "on_leadership")
        self._autoscale = _calls(hooks, HookAutoscaleDecision, "on_autoscale_decision")
        self._lag = _calls(hooks, HookAutoscaleLag, "on_autoscale_lag")

    def epoch_published(self, topic: str, epoch: int, from_active: int, to_active: int) -> None:
        """See :class:`HookEpochPublished`."""
        self.emit(self._published, topic, epoch, from_active, to_active)

    def barrier_passed(self, topic: str, epoch: int, seconds: float) -> None:
        """See :class:`HookBarrierPassed`."""
        self.emit(self._passed, topic, epoch, seconds)

    def epoch_sealed(self, topic: str, epoch: int, seconds: float) -> None:
        """See :class:`HookEpochSealed`."""
        self.emit(self._sealed, topic, epoch, seconds)

    def trim(self, topic: str, partition: int, offset: int, reason: str, ok: bool) -> None:
        """See :class:`HookTrim`."""
        self.emit(self._trim, topic, partition, offset, reason, ok)

    def relay_round(self, seconds: float, published: int) -> None:
        """See :class:`HookRelayRound`."""
        self.emit(self._relay, seconds, published)

    def session_state(self, state: str) -> None:
        """See :class:`HookSessionState`."""
        self.emit(self._session, state)

    def leadership(self, leader: bool) -> None:
        """See :class:`HookLeadership`."""
        self.emit(self._leader, leader)

    def autoscale_decision(
        self, topic: str, action: str, active: int, to: int, rate: float, acted: bool
    ) -> None:
        """See :class:`HookAutoscaleDecision`."""
        self.emit(self._autoscale, topic, action, active, to, rate, acted)

    def autoscale_lag(self, topic: str, lag: float) -> None:
        """See :class:`HookAutoscaleLag`."""
        self.emit(self._lag, topic, lag)


class ThreadEvents(_Emitter):
    """The events of supervised loops, dispatched to their hooks.

    Args:
        hooks: The hooks, in calling order.
    """

    def __init__(self, hooks: Sequence[object] = ()) -> None:
        super().__init__()
        self._restart = _calls(hooks, HookThreadRestart, "on_thread_restart")
        self._state = _calls(hooks, HookThreadState, "on_thread_state")

    def thread_restart(self, thread: str, error: str) -> None:
        """See :class:`HookThreadRestart`."""
        self.emit(self._restart, thread, error)

    def thread_state(self, thread: str, previous: str, state: str) -> None:
        """See :class:`HookThreadState`."""
        self.emit(self._state, thread, previous, state)
