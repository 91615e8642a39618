"""Gate decisions and re-checks from the group's committed offsets; interest declarations.

A record at a partition's limit asks :meth:`GateChecker.reach` whether its gate is
open (:mod:`linear_hash.gating` over the group's committed offsets, read from Kafka).
A closed gate holds the partition ``BLOCKED``; :meth:`GateChecker.recheck_blocked`
asks again every ``ordered.gate.poll.interval.ms``, or at once when the position
service (:mod:`coordinator.client.positions`) says that something a gate waits on was
committed. Only Kafka's committed offsets open a gate.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, TopicPartition

from ordered.consumer.announce import AnnounceState
from ordered.consumer.gate import GateEvent, GateState
from ordered.consumer.replay import cap_to_positions

if TYPE_CHECKING:
    from coordinator.client.positions import PositionService, Progress
    from ordered.consumer.probe import LogStartProbe
    from ordered.consumer.state import Core, PartState

__all__ = ["NOTIFY_SLICE", "CommittedView", "GateChecker"]

_log = logging.getLogger(__name__)

IDLE = AnnounceState.IDLE

NOTIFY_SLICE = 0.01
"""Longest inner poll while a gate waits on the position service (seconds)."""


class CommittedView:
    """Committed offsets (one request per check) and log starts (lazily) from Kafka.

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
            self._starts[partition] = self._probe.log_start(self._topic, partition)
        return self._starts[partition]


class GateChecker:
    """Opens and closes gates; declares what closed gates wait on.

    Args:
        core: The shared state.
        probe: The log-start probe.
        positions: The position service, or ``None`` (``ordered.positions=false``).
        member: This consumer's member name in interest records.
    """

    def __init__(
        self,
        core: Core,
        probe: LogStartProbe,
        positions: PositionService | None,
        member: str,
    ) -> None:
        self._core = core
        self._probe = probe
        self.positions = positions
        self._member = member
        self._interval = core.config.ordered.gate_poll_interval_ms / 1000.0
        self._declared: dict[str, dict[int, int]] = {}
        self._poked = threading.Event()  # set by a position-service watch (kazoo thread)

    def view(self, topic: str, partitions: Iterable[int]) -> CommittedView | None:
        """Read the group's progress; ``None`` (gates stay closed) if Kafka did not answer."""
        try:
            return CommittedView(self._core, self._probe, topic, partitions)
        except KafkaException as exc:
            _log.warning("cannot read committed offsets of %s (gates stay closed): %s", topic, exc)
            return None

    def reach(self, part: PartState, offset: int, crossed: list[tuple[PartState, int]]) -> bool:
        """A record at or past the partition's limit arrived: open the gate or hold it.

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
        core.events.gate_check(part.topic, part.partition)
        progress = self.view(part.topic, gates.required_partitions(part.partition, offset))
        if progress is None or not gates.may_deliver(part.partition, offset, progress):
            core.fire(part, GateEvent.GATE_CLOSED, held=offset)
            # With the position service, re-check at once: that declares the interest
            # and sets the watches that make later re-checks prompt.
            core.check_gates_at(
                0.0 if self.positions is not None else time.monotonic() + self._interval
            )
            return False
        start = part.start if part.start is not None else offset
        for boundary, _epoch in gates.gates_of(part.partition):
            if start <= boundary <= offset and boundary > part.assigned_upto:
                crossed.append((part, boundary))
        core.fire(part, GateEvent.GATE_OPEN)
        return True

    def service(self) -> None:
        """Re-check closed gates when due (at once after a position-service notice)."""
        if self._poked.is_set():
            self._poked.clear()
            self._core.check_gates_at(0.0)
        if time.monotonic() >= self._core.next_check:
            self.recheck_blocked()

    def recheck_blocked(self) -> None:
        """Re-check every ``BLOCKED`` partition from the committed offsets."""
        core = self._core
        core.check_gates_at(time.monotonic() + self._interval)
        if not core.layouts.usable:
            return
        by_topic: dict[str, list[PartState]] = {}
        for part in core.parts.values():
            if part.gate.state is GateState.BLOCKED:
                by_topic.setdefault(part.topic, []).append(part)
        for topic in [t for t in self._declared if t not in by_topic]:
            self._declare(topic, {})
        for topic, parts in by_topic.items():
            gates = core.layouts.topics[topic].gates
            if gates is None:
                for part in parts:
                    core.fire(part, GateEvent.RECHECK_OPEN, reason="not ordered")
                continue
            needed: set[int] = set()
            for part in parts:
                assert part.gate.held is not None
                needed |= gates.required_partitions(part.partition, part.gate.held)
            progress = self.view(topic, needed)
            if progress is None:
                continue
            waits: dict[int, int] = {}
            for part in parts:
                held = part.gate.held
                assert held is not None
                core.events.gate_check(topic, part.partition)
                if gates.may_deliver(part.partition, held, progress):
                    # The limit stays at the held record, so its delivery runs the
                    # crossing (and on_partition_key_assigned) like any other record.
                    core.fire(part, GateEvent.RECHECK_OPEN, cap=held)
                elif self.positions is not None:
                    for wait in gates.waiting_on(part.partition, held, progress):
                        if wait.partition >= 0:
                            waits[wait.partition] = max(waits.get(wait.partition, 0), wait.offset)
            self._declare(topic, waits)

    def _declare(self, topic: str, waits: dict[int, int]) -> None:
        """Tell the position service what this consumer waits on, and watch it."""
        if self.positions is None or self._declared.get(topic, {}) == waits:
            return
        if waits:
            self._declared[topic] = waits
        else:
            self._declared.pop(topic, None)
        self.positions.declare(topic, self._member, waits)
        for partition in waits:
            self.positions.watch(topic, partition, self._on_progress)

    def _on_progress(self, _progress: Progress) -> None:
        # kazoo's thread: only raise a flag; the poll thread re-checks from Kafka.
        self._poked.set()

    def slice(self, deadline: float | None, dirty: bool) -> float:
        """How long the next inner poll may wait: short while a gate needs re-checks."""
        core = self._core
        busy = any(p.gate.paused or p.ann.state is not IDLE for p in core.parts.values())
        step = self._interval if busy or dirty else 1.0
        if busy and self.positions is not None:
            # A progress notification is only seen between inner polls: keep them short.
            step = min(step, NOTIFY_SLICE)
        if deadline is None:
            return step
        return max(0.0, min(step, deadline - time.monotonic()))

    def waits_of(self, part: PartState) -> tuple[Any, ...]:
        """What the gate of a held partition waits on (reads committed offsets)."""
        view = self._core.layouts.topics.get(part.topic)
        held = part.gate.held
        if held is None or view is None or view.gates is None:
            return ()
        gates = view.gates
        progress = self.view(part.topic, gates.required_partitions(part.partition, held))
        if progress is None:
            return ()
        return tuple(gates.waiting_on(part.partition, held, progress))
