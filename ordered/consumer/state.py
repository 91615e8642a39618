"""What the consumer's parts share: per-partition state and the one gate applier."""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from coordinator.client.hooks import ConsumerEvents
from ordered.consumer.announcement import Announcement
from ordered.consumer.counters import METRICS, ConsumerCounters
from ordered.consumer.gate import NO_LIMIT, Change, GateEvent, GateState, PartitionGate
from ordered.consumer.layouts import LayoutTracker
from ordered.consumer.pauses import PauseArbiter, PauseOwner
from ordered.consumer_config import ConsumerConfig
from ordered.listener import PartitionKeyRebalanceListener

__all__ = ["METRICS", "Core", "PartState"]

_log = logging.getLogger("ordered.consumer")


@dataclass(slots=True)
class PartState:
    """One assigned partition: its gate, its announcements, where delivery stands.

    Attributes:
        gate: The pure gate state machine.
        ann: The boundary announcements and the stored offset.
        start: The first offset fetched in this assignment.
        position: The last delivered offset + 1.
        assigned_upto: The highest boundary ``on_partition_key_assigned`` ran for.
        blocked_at: When the gate last became ``BLOCKED`` (monotonic), for the wait.
    """

    topic: str
    partition: int
    gate: PartitionGate
    ann: Announcement = field(default_factory=Announcement)
    start: int | None = None
    position: int | None = None
    assigned_upto: int = -1
    blocked_at: float = 0.0

    @property
    def fetch_paused(self) -> bool:
        """Its gate wants librdkafka to pause it (see :meth:`Core.fire`)."""
        return PauseOwner.GATE in self.gate.pauses.wishes


class Core:
    """The state the consumer's parts share, owned by the poll thread.

    Args:
        consumer: The wrapped ``confluent_kafka.Consumer``.
        config: The split configuration.
        layouts: The topics' layouts.
        events: Where the consumer's events go (its hooks).
        counters: The consumer's own counters (the first of those hooks).
    """

    def __init__(
        self,
        consumer: Any,
        config: ConsumerConfig,
        layouts: LayoutTracker,
        events: ConsumerEvents,
        counters: ConsumerCounters,
    ) -> None:
        self.consumer = consumer
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
        """Re-check closed gates at ``when`` (``time.monotonic()``; 0.0: at the next service).

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
            part.blocked_at = time.monotonic()
            held = part.gate.held
            self.events.gate_blocked(part.topic, part.partition, -1 if held is None else held)
        elif change.old is GateState.BLOCKED and change.new is not GateState.BLOCKED:
            waited = time.monotonic() - part.blocked_at
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
            self.events.gate_dropped(part.topic, part.partition, time.monotonic() - part.blocked_at)

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
