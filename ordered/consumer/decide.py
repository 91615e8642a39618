"""The gate decision: one owner for the committed view and the gate rule around it.

Every gate decision of the consumer goes through :class:`GateDecider`, whichever path
asks: a fetched record at its partition's limit (:meth:`GateDecider.reach`, the fetch
path) or the re-check of held partitions (:meth:`GateDecider.recheck`, scheduled by
:mod:`~ordered.consumer.recheck`). Both run the one sequence of
:meth:`GateDecider.decide`: the partitions the rule needs
(:meth:`~linear_hash.gating.GateEvaluator.required_partitions`) read into ONE
:class:`CommittedView` (:meth:`GateDecider.view`), then
:meth:`~linear_hash.gating.GateEvaluator.may_deliver` for each ask, in order.
``gate_status`` reads the same view to list what a held gate waits on
(:meth:`GateDecider.waits_of`).

The view is shaped in one place, :class:`CommittedView`: the group's committed offsets
read from Kafka (one request per decision), raised by the commits this consumer made
itself (Kafka may not show them yet), then lowered to this consumer's own positions
(:func:`cap_to_positions`, rule 2 of ``docs/consumer.md`` "Replays"). Only Kafka's
committed offsets open a gate: when Kafka does not answer, nothing opens.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, NamedTuple

from confluent_kafka import KafkaException, TopicPartition

from ordered.consumer.partition import GateEvent

if TYPE_CHECKING:
    from linear_hash.gating import GateEvaluator, Wait
    from ordered.consumer.partition import PartState
    from ordered.consumer.probe import LogStartProbe
    from ordered.consumer.state import Core

__all__ = ["CommittedView", "GateDecider", "Verdict", "cap_to_positions"]

_log = logging.getLogger(__name__)


def cap_to_positions(core: Core, topic: str, committed: dict[int, int]) -> None:
    """Rule 2: lower ``committed`` (partition -> offset) to this consumer's own positions.

    The group's progress on a partition this consumer owns is at most its own position:
    an offset committed before a rewind is not progress of the replay.
    """
    if not core.replay_guard:
        return
    for partition, offset in committed.items():
        part = core.parts.get((topic, partition))
        if part is None:
            continue
        own = part.position if part.position is not None else part.start
        if own is not None and own < offset:
            committed[partition] = own


class CommittedView:
    """Committed offsets (one request per decision) and log starts (lazily) from Kafka.

    The only place the group's progress is shaped for the gate rule (see the module
    doc). Satisfies :class:`linear_hash.gating.OffsetView`.

    Raises:
        KafkaException: The committed offsets could not be read.
    """

    def __init__(
        self, core: Core, probe: LogStartProbe, topic: str, partitions: Iterable[int]
    ) -> None:
        self._probe = probe
        self._topic = topic
        self._committed: dict[int, int] = {}
        self._starts: dict[int, int] = {}
        wanted = sorted(set(partitions))
        if wanted:
            got = core.consumer.committed(
                [TopicPartition(topic, p) for p in wanted], timeout=core.request_timeout
            )
            for tp in got:
                if tp.error is None and tp.offset >= 0:
                    self._committed[tp.partition] = tp.offset
        for (t, p), offset in core.known_commits.items():
            if t == topic and offset > self._committed.get(p, -1):
                self._committed[p] = offset
        cap_to_positions(core, topic, self._committed)

    def committed(self, partition: int) -> int | None:
        """The group's committed offset of ``partition`` (``None``: none)."""
        return self._committed.get(partition)

    def log_start(self, partition: int) -> int:
        """The log start offset of ``partition``."""
        if partition not in self._starts:
            self._starts[partition] = self._probe.gate_log_start(self._topic, partition)
        return self._starts[partition]


class Verdict(NamedTuple):
    """The gate rule's answer for one ask of :meth:`GateDecider.decide`.

    Attributes:
        part: The partition asked about.
        offset: The offset asked about.
        open: Whether the record at ``offset`` may be delivered.
        progress: The view it was decided on (``None``: Kafka did not answer, closed).
    """

    part: PartState
    offset: int
    open: bool
    progress: CommittedView | None


class GateDecider:
    """Decides gates from the group's committed offsets, for every path that asks.

    Args:
        core: The shared state (partitions, layouts, events, known commits).
        probe: The log-start probe (the view's log starts).
        prompt: A position service is running: a gate found closed on the fetch path
            is re-checked at once (which declares the interest), not after
            ``ordered.gate.poll.interval.ms``.
    """

    def __init__(self, core: Core, probe: LogStartProbe, prompt: bool) -> None:
        self._core = core
        self._probe = probe
        self._prompt = prompt
        self._interval = core.config.ordered.gate_poll_interval_ms / 1000.0

    def view(
        self, topic: str, gates: GateEvaluator, asks: Iterable[tuple[PartState, int]]
    ) -> CommittedView | None:
        """ONE view of every partition the rule may read to decide ``asks`` of ``topic``.

        Returns:
            The view, or ``None`` (gates stay closed) if Kafka did not answer.
        """
        needed: set[int] = set()
        for part, offset in asks:
            needed |= gates.required_partitions(part.partition, offset)
        try:
            return CommittedView(self._core, self._probe, topic, needed)
        except KafkaException as exc:
            _log.warning("cannot read committed offsets of %s (gates stay closed): %s", topic, exc)
            return None

    def decide(
        self, topic: str, gates: GateEvaluator, asks: Sequence[tuple[PartState, int]]
    ) -> Iterator[Verdict]:
        """The one decision sequence: required partitions, one view, the rule per ask.

        Lazily, in the order of ``asks``: the caller acts on one verdict (fires its
        gate event) before the next is decided, as the rule's cache of satisfied gates
        grows with each decision.
        """
        progress = self.view(topic, gates, asks)
        for part, offset in asks:
            allowed = progress is not None and gates.may_deliver(part.partition, offset, progress)
            yield Verdict(part, offset, allowed, progress)

    def reach(self, part: PartState, offset: int, crossed: list[tuple[PartState, int]]) -> bool:
        """The fetch path: a record at or past the limit arrived; open the gate or hold it.

        Args:
            part: The partition.
            offset: The record's offset.
            crossed: Gets ``(part, boundary)`` for each gate this record passes.

        Returns:
            Whether the record may be delivered.
        """
        core = self._core
        if not core.layouts.usable:
            core.fire(part, GateEvent.UNAVAILABLE, held=offset)
            core.check_gates_at(0.0)
            return False
        view = core.layouts.topics.get(part.topic)
        gates = view.gates if view is not None else None
        if gates is None:
            core.fire(part, GateEvent.GATE_OPEN, reason="not ordered")
            return True
        # Counted before Kafka is asked: a record held because Kafka did not answer
        # was judged too.
        core.events.gate_check(part.topic, part.partition)
        verdict = next(self.decide(part.topic, gates, [(part, offset)]))
        if not verdict.open:
            core.fire(part, GateEvent.GATE_CLOSED, held=offset)
            # With the position service, re-check at once: that declares the interest
            # and sets the watches that make later re-checks prompt.
            core.check_gates_at(0.0 if self._prompt else time.monotonic() + self._interval)
            return False
        start = part.start if part.start is not None else offset
        for boundary, _epoch in gates.gates_of(part.partition):
            if start <= boundary <= offset and boundary > part.assigned_upto:
                crossed.append((part, boundary))
        core.fire(part, GateEvent.GATE_OPEN)
        return True

    def recheck(
        self, topic: str, gates: GateEvaluator, parts: Sequence[PartState], waits: bool
    ) -> dict[int, int] | None:
        """The re-check path: decide the held ``parts`` of ``topic`` again.

        A gate found open fires ``RECHECK_OPEN`` with the limit kept at the held record,
        so its delivery runs the crossing (and ``on_partition_key_assigned``) like any
        other record.

        Args:
            topic: The topic.
            gates: Its gate rule.
            parts: Its ``BLOCKED`` partitions.
            waits: Also collect what the gates still closed wait on.

        Returns:
            Partition -> the offset the closed gates wait for it to reach (empty
            without ``waits``), or ``None`` when Kafka did not answer (nothing decided).
        """
        core = self._core
        asks = []
        for part in parts:
            assert part.gate.held is not None
            asks.append((part, part.gate.held))
        found: dict[int, int] = {}
        for verdict in self.decide(topic, gates, asks):
            if verdict.progress is None:
                return None
            part, held = verdict.part, verdict.offset
            core.events.gate_check(topic, part.partition)
            if verdict.open:
                core.fire(part, GateEvent.RECHECK_OPEN, cap=held)
            elif waits:
                for wait in gates.waiting_on(part.partition, held, verdict.progress):
                    if wait.partition >= 0:
                        found[wait.partition] = max(found.get(wait.partition, 0), wait.offset)
        return found

    def waits_of(self, part: PartState) -> tuple[Wait, ...]:
        """What the gate of a held partition waits on (reads committed offsets)."""
        view = self._core.layouts.topics.get(part.topic)
        held = part.gate.held
        if held is None or view is None or view.gates is None:
            return ()
        gates = view.gates
        progress = self.view(part.topic, gates, [(part, held)])
        if progress is None:
            return ()
        return tuple(gates.waiting_on(part.partition, held, progress))
