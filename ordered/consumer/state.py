"""The shell around the partitions' pure state: what the consumer's parts share, and the
one place that carries out what a partition's gate asks for.

:meth:`Core.fire` applies a gate event to a partition (:mod:`ordered.consumer.partition`)
and carries out the :class:`~ordered.consumer.partition.Change` it returns: the pause
wish, the gate's hooks (blocked, opened, dropped). :class:`PauseArbiter` holds
librdkafka's pause set.

librdkafka's pause set, from one place
--------------------------------------

Two owners may want a partition paused in librdkafka (:class:`PauseOwner`): a held
gate (``Core.fire``: its log reaches far past the held record, or its stash outgrew
its share) and the application (``OrderedConsumer.pause``). librdkafka has one pause
flag per partition, so each owner only states its wish (:meth:`PauseArbiter.wish`,
:meth:`PauseArbiter.unwish`)
and the partition is paused while any owner wishes it: the application's ``resume``
does not resume what a gate holds, a gate that opens does not resume what the
application paused. :meth:`PauseArbiter._settle` is the one caller of the wrapped
consumer's ``pause``/``resume`` in :mod:`ordered.consumer`
(``tests/unit/test_consumer_pause_owners.py`` fails on any other).

The wishes and what librdkafka was last told live on each partition's gate
(:class:`PartPauses`, ``PartitionGate.pauses``), as Kafka's Java consumer keeps
``paused`` in each partition's ``TopicPartitionState``.

librdkafka (2.16, measured on the dev cluster) keeps a partition's pause across a
revocation and a new assignment, by ``assign`` or by a group rebalance. So a partition
that leaves the assignment (:meth:`PauseArbiter.left`) is resumed unless the
application paused it: the gate no longer applies to it. The application's pause stays,
as on a plain consumer, and is remembered for the partition's return
(:meth:`PauseArbiter.arrived`), as are its pauses of partitions not assigned yet.

A partition still held by its gate when its last owner lets go stays paused if the
gate's own rule would have paused it (``Core.fire``'s, passed in as ``keep``): the
gate takes the pause over and resumes it when it opens (resumed, it would fetch more
than its stash may hold). Else it is resumed at once, so that its records reach the
stash before the gate opens: a partition resumed only then may wait for a fetch parked
at the broker (``docs/consumer.md``, "A held partition and librdkafka's pause").
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import KafkaException, TopicPartition

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock
from coordinator.kernel.hooks import ConsumerEvents
from ordered.consumer.counters import METRICS, ConsumerCounters
from ordered.consumer.layouts import LayoutTracker
from ordered.consumer.partition import (
    NO_LIMIT,
    Change,
    GateEvent,
    GateState,
    PartPauses,
    PartState,
    PauseOwner,
)
from ordered.consumer_config import ConsumerConfig
from ordered.listener import PartitionKeyRebalanceListener

__all__ = ["METRICS", "Core", "Pausable", "PauseArbiter"]

_log = logging.getLogger("ordered.consumer")


class _Gate(Protocol):
    """What the arbiter reads of a partition's gate."""

    @property
    def paused(self) -> bool: ...

    @property
    def pauses(self) -> PartPauses: ...


class Pausable(Protocol):
    """What the arbiter reads of a partition (``PartState``)."""

    @property
    def topic(self) -> str: ...

    @property
    def partition(self) -> int: ...

    @property
    def gate(self) -> _Gate: ...


P = TypeVar("P", bound=Pausable)

_QUIET = (KafkaException, RuntimeError)


class PauseArbiter(Generic[P]):
    """The union of the owners' wishes, applied to librdkafka (see the module doc).

    Args:
        consumer: The wrapped ``confluent_kafka.Consumer``.
        keep: Whether a partition its gate holds would be paused by the gate's own
            rule (asked when its last owner lets go; default: always).
    """

    def __init__(self, consumer: Any, keep: Callable[[P], bool] | None = None) -> None:
        self._consumer = consumer
        self._keep = keep
        # Partitions not tracked now that the application paused (before their
        # assignment, or when they left it paused): librdkafka keeps their pause.
        self._kept: set[tuple[str, int]] = set()

    def wish(self, owner: PauseOwner, parts: Iterable[P]) -> None:
        """``owner`` wants ``parts`` paused (librdkafka is told where it has them not)."""
        listed = list(parts)
        for part in listed:
            part.gate.pauses.wishes.add(owner)
        self._settle(listed)

    def unwish(self, owner: PauseOwner, parts: Iterable[P]) -> None:
        """``owner`` no longer wants ``parts`` paused: resumed unless another owner does."""
        listed = list(parts)
        self._let_go(owner, listed)
        self._settle(listed)

    def application(
        self, partitions: Sequence[TopicPartition], parts: Mapping[tuple[str, int], P], pause: bool
    ) -> None:
        """The application's ``pause`` (``pause=True``) or ``resume`` of ``partitions``.

        Its pause always reaches librdkafka, as confluent's would; its resume resumes
        a tracked partition only if no other owner wants it paused. Partitions not
        tracked (``parts``) go to librdkafka as given.
        """
        tracked: list[P] = []
        bare: list[TopicPartition] = []
        for tp in partitions:
            key = (tp.topic, tp.partition)
            part = parts.get(key)
            if part is not None:
                tracked.append(part)
                continue
            bare.append(tp)
            if pause:
                self._kept.add(key)
            else:
                self._kept.discard(key)
        if pause:
            for part in tracked:
                part.gate.pauses.wishes.add(PauseOwner.APPLICATION)
            self._settle(tracked, again=True, bare_pause=bare)
        else:
            self._let_go(PauseOwner.APPLICATION, tracked)
            self._settle(tracked, bare_resume=bare)

    def arrived(self, part: P) -> None:
        """``part`` is tracked now: the application's pause it left with holds again.

        librdkafka has kept that pause; telling it again is only insurance, so an
        error (inside a rebalance callback) is not raised.
        """
        key = (part.topic, part.partition)
        if key in self._kept:
            self._kept.discard(key)
            with contextlib.suppress(*_QUIET):
                self.wish(PauseOwner.APPLICATION, (part,))

    def left(self, part: P) -> None:
        """``part`` left the assignment: only the application's wish outlives it.

        librdkafka keeps a pause across a reassignment (see the module doc): a pause
        of the gate is lifted, the application's is remembered.
        """
        wishes = part.gate.pauses.wishes
        if PauseOwner.APPLICATION in wishes:
            self._kept.add((part.topic, part.partition))
            wishes.intersection_update({PauseOwner.APPLICATION})
        else:
            wishes.clear()
        with contextlib.suppress(*_QUIET):
            self._settle((part,))

    def _let_go(self, owner: PauseOwner, parts: Iterable[P]) -> None:
        """Drop ``owner``'s wish; the gate takes over a held partition its rule keeps."""
        for part in parts:
            gate = part.gate
            record = gate.pauses
            record.wishes.discard(owner)
            if (
                not record.wishes
                and record.applied
                and gate.paused
                and (self._keep is None or self._keep(part))
            ):
                record.wishes.add(PauseOwner.GATE)

    def _settle(
        self,
        parts: Iterable[P],
        *,
        again: bool = False,
        bare_pause: Sequence[TopicPartition] = (),
        bare_resume: Sequence[TopicPartition] = (),
    ) -> None:
        """Bring librdkafka to the owners' wishes for ``parts``: the one caller of its
        ``pause``/``resume``, and the one writer of :attr:`PartPauses.applied`.

        Args:
            parts: Partitions whose wishes may have changed.
            again: Pause the wished ones even where librdkafka has them paused.
            bare_pause: Partitions not tracked to pause as well (the application's).
            bare_resume: Partitions not tracked to resume as well (the application's).
        """
        pause: list[P] = []
        resume: list[P] = []
        for part in parts:
            record = part.gate.pauses
            if record.wishes:
                if again or not record.applied:
                    pause.append(part)
            elif record.applied:
                resume.append(part)
        if pause or bare_pause:
            self._consumer.pause([*_tps(pause), *bare_pause])
            for part in pause:
                part.gate.pauses.applied = True
        if resume or bare_resume:
            self._consumer.resume([*_tps(resume), *bare_resume])
            for part in resume:
                part.gate.pauses.applied = False


def _tps(parts: Iterable[Pausable]) -> list[TopicPartition]:
    return [TopicPartition(part.topic, part.partition) for part in parts]


class Core:
    """The state the consumer's parts share, owned by the poll thread.

    Args:
        consumer: The wrapped ``confluent_kafka.Consumer``.
        config: The split configuration.
        layouts: The topics' layouts.
        events: Where the consumer's events go (its hooks).
        counters: The consumer's own counters (the first of those hooks).
        clock: The clock of the core's times (:attr:`next_check`, :attr:`quiet_until`,
            when a gate closed) and of whatever compares with them.
    """

    def __init__(
        self,
        consumer: Any,
        config: ConsumerConfig,
        layouts: LayoutTracker,
        events: ConsumerEvents,
        counters: ConsumerCounters,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.consumer = consumer
        self.clock = clock
        # librdkafka has one pause flag per partition and two owners want it (a held
        # gate, the application): only the arbiter tells librdkafka.
        self.pauses: PauseArbiter[PartState] = PauseArbiter(consumer, self._gate_keeps)
        self.config = config
        self.layouts = layouts
        self.parts: dict[tuple[str, int], PartState] = {}
        self.events = events
        self.counters = counters
        self.listener: PartitionKeyRebalanceListener | None = None
        self.known_commits: dict[tuple[str, int], int] = {}
        self.next_check = 0.0
        # Until when the service step has nothing to do unless a halt came (see
        # ConsumerUpkeep.step); 0.0: it runs at the next call. Whatever may give the
        # step work on the poll thread ends it (unquiet).
        self.quiet_until = 0.0
        # Bumped with every unquiet: what is derived from the gates and the announcements
        # (the scan's limits, the wait slice) is cached by it.
        self.version = 0
        # Partitions whose gate went DRAINING (kept by fire, the one gate applier): only
        # they can hold stashed records to hand out. A part dropped while draining stays
        # listed, which only costs the look-up it would have cost anyway.
        self.draining: set[tuple[str, int]] = set()
        self.request_timeout = 10.0
        # The replay rules (ordered.consumer.replay). False exists only for the tests
        # that show the rules are what keeps a replay in order.
        self.replay_guard = True
        # While a consume() call holds records it has not returned yet: each partition
        # with records in it -> the offset to store once the call returns them (None:
        # nothing to store). No commit, stored offset or announcement may pass a record
        # the application was not given (see CallPath.consume); None between calls.
        self.call_stores: dict[tuple[str, int], int | None] | None = None

    def check_gates_at(self, when: float) -> None:
        """Re-check closed gates at ``when`` (:attr:`clock`'s ``monotonic``; 0.0: at the next
        service).

        The one writer of :attr:`next_check`.
        """
        self.next_check = when
        self.unquiet()

    def unquiet(self) -> None:
        """The service step runs at the next call (something may have given it work).

        Also a new :attr:`version`: a gate, a partition or an announcement may have
        changed.
        """
        self.quiet_until = 0.0
        self.version += 1

    def open_limit(self, topic: str, partition: int) -> float:
        """The partition's next gate not known to be open (``inf``: none or not ordered)."""
        view = self.layouts.topics.get(topic)
        return view.open_limit(partition) if view is not None else NO_LIMIT

    def fire(self, part: PartState, event: GateEvent, **kwargs: Any) -> Change:
        """Apply a gate event and its pause wish (the only caller of ``gate.fire``).

        A held gate (``BLOCKED``, ``DRAINING``) wants librdkafka to pause its partition
        (:attr:`pauses`, owner ``GATE``) only when the partition's log reaches beyond
        its share of the pre-fetch window (:meth:`stash_share`) past the held record,
        or once its stash outgrows that share; else what librdkafka hands over joins
        the stash. A paused partition resumed while librdkafka's one fetch in flight
        waits at the broker (every other partition at its log end) is fetched only
        after that fetch returns, up to ``fetch.wait.max.ms`` later
        (``docs/consumer.md``, "A held partition and librdkafka's pause"). The wish
        goes when the gate lets go; the partition is resumed unless the application wants
        it paused.
        """
        self.unquiet()
        change = part.gate.fire(event, self.open_limit(part.topic, part.partition), **kwargs)
        if change.new is GateState.DRAINING:
            self.draining.add((part.topic, part.partition))
        elif change.old is GateState.DRAINING:
            self.draining.discard((part.topic, part.partition))
        gate = part.gate
        if gate.paused:
            if not part.fetch_paused and (
                (change.pause and self._far(part)) or len(gate.stash) > self.stash_share()
            ):
                self.pauses.wish(PauseOwner.GATE, (part,))
        elif part.fetch_paused:
            self.pauses.unwish(PauseOwner.GATE, (part,))
        if change.new is GateState.BLOCKED and change.old is not GateState.BLOCKED:
            part.blocked_at = self.clock.monotonic()
            held = part.gate.held
            self.events.gate_blocked(part.topic, part.partition, -1 if held is None else held)
        elif change.old is GateState.BLOCKED and change.new is not GateState.BLOCKED:
            waited = self.clock.monotonic() - part.blocked_at
            if event is GateEvent.RECHECK_OPEN:
                self.events.gate_opened(part.topic, part.partition, waited)
            else:
                self.events.gate_dropped(part.topic, part.partition, waited)
        if change.old is not change.new:
            _log.debug(
                "%s[%d]: %s -> %s (%s)",
                part.topic,
                part.partition,
                change.old.name,
                change.new.name,
                part.gate.reason,
            )
        return change

    def stash_share(self) -> int:
        """The most records a held partition stashes before librdkafka pauses it.

        The pre-fetch window (``queued.min.messages``) shared among the assigned
        partitions, so all the stashes together hold at most one window's worth
        (librdkafka itself pre-fetches up to that many records of every partition).
        """
        return self.config.prefetch_records // max(1, len(self.parts))

    def _gate_keeps(self, part: PartState) -> bool:
        """The gate holding ``part`` would pause it now (when its last pause owner lets go).

        As :meth:`fire` has it: a stash over its share, or a closed gate far from its log
        end. An open gate still draining its stash is not kept paused for being far: the
        stash goes at the next call, and a partition left paused would wait a fetch
        longer for what follows it.
        """
        gate = part.gate
        return len(gate.stash) > self.stash_share() or (
            gate.state is GateState.BLOCKED and self._far(part)
        )

    def _far(self, part: PartState) -> bool:
        """The partition's log reaches beyond its :meth:`stash_share` past its held records.

        The high watermark is librdkafka's as of its last fetch (no request); unknown,
        or no offset known to count from: far.
        """
        start = part.gate.held if part.gate.held is not None else part.position
        if start is None:
            return True
        return self.log_end(part.topic, part.partition) - start > self.stash_share()

    def log_end(self, topic: str, partition: int) -> float:
        """The partition's high watermark as of librdkafka's last fetch (no request).

        ``inf`` while none is known.
        """
        high = _cached_watermarks(self.consumer, topic, partition)[1]
        return high if high >= 0 else math.inf

    def log_start_seen(self, topic: str, partition: int) -> int | None:
        """The partition's log start as of librdkafka's last fetch (no request).

        ``None`` for a partition not assigned here. An assigned one that librdkafka has
        not fetched yet (its first fetch may still be on the way while another
        partition's records arrive): ``0``, which no log start is below.
        """
        if (topic, partition) not in self.parts:
            return None
        low = _cached_watermarks(self.consumer, topic, partition)[0]
        return max(low, 0)

    def dropped(self, part: PartState) -> None:
        """``part`` left the assignment: a held one stops waiting (its gate is dropped)."""
        if part.gate.state is GateState.BLOCKED:
            waited = self.clock.monotonic() - part.blocked_at
            self.events.gate_dropped(part.topic, part.partition, waited)

    def remember_commit(self, topic: str, partition: int, offset: int) -> None:
        """Note an offset this consumer committed (gates read it before Kafka shows it)."""
        key = (topic, partition)
        if offset > self.known_commits.get(key, -1):
            self.known_commits[key] = offset


def _cached_watermarks(consumer: Any, topic: str, partition: int) -> tuple[int, int]:
    """librdkafka's cached watermarks ``(low, high)`` (no request); ``-1`` each while unknown."""
    tp = TopicPartition(topic, partition)
    try:
        low, high = consumer.get_watermark_offsets(tp, cached=True)
    except (KafkaException, RuntimeError):
        return -1, -1
    return int(low), int(high)
