"""The pieces of a transition that need no servers: its steps, its results and the barrier rule.

:class:`Step` is the state machine a :class:`~coordinator.control.controller.Controller` drives
(its transitions are :data:`NEXT_STEP`); :func:`barrier_status` decides the barrier from
the records alone, so it is tested without ZooKeeper.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass, field
from enum import Enum
from typing import Any, Final

from coordinator.kernel.store import (
    DEFAULT_DELIVERY_TIMEOUT_MS,
    EpochRecord,
    ProducerRecord,
    TopicRecord,
)

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "EXPIRY_GRACE_S",
    "NEXT_STEP",
    "UNKNOWN_DELIVERY_TIMEOUT_MS",
    "BarrierStatus",
    "Description",
    "Step",
    "TransitionResult",
    "barrier_status",
]

EXPIRY_GRACE_S: Final = 1.0
"""Seconds added to a gone producer's ``delivery_timeout_ms`` before it stops counting."""

UNKNOWN_DELIVERY_TIMEOUT_MS: Final = 300_000
"""Assumed for a listed producer whose registration (and so its declared timeout) no
controller ever saw: librdkafka's own default, the safe upper bound for a client whose
configuration is unknown."""


class Step(Enum):
    """The steps of one transition, in order.

    Transitions (the only ones; :meth:`Controller._run` applies them)::

        PARTITIONS -> ANNOUNCE -> PUBLISH -> PRODUCERS -> BARRIER -> SEAL -> DONE

    A new transition enters at ``PARTITIONS``; resuming a pending epoch enters at
    ``PRODUCERS`` (its partitions exist and it is published).

    Attributes:
        PARTITIONS: CreatePartitions up to the target if Kafka has fewer.
        ANNOUNCE: The consumer barrier (``docs/consumer-barrier.md``): announce the
            epoch to consumers and wait for the registered ones (nothing when the
            feature is off and no consumer registered).
        PUBLISH: Read the receiving partitions' end offsets; write the pending epoch
            and the topic record in one transaction.
        PRODUCERS: Record in the epoch which producers registered before it.
        BARRIER: Wait for each listed producer's ack, or its expiry plus its delivery
            timeout and :data:`EXPIRY_GRACE_S`.
        SEAL: Read the giving partitions' end offsets; write the epoch sealed and the
            topic record without ``pending`` in one transaction.
        DONE: Sealed.
    """

    PARTITIONS = "partitions"
    ANNOUNCE = "announce"
    PUBLISH = "publish"
    PRODUCERS = "producers"
    BARRIER = "barrier"
    SEAL = "seal"
    DONE = "done"


NEXT_STEP: Final = {
    # The only moves; Controller._run makes them.
    Step.PARTITIONS: Step.ANNOUNCE,
    Step.ANNOUNCE: Step.PUBLISH,
    Step.PUBLISH: Step.PRODUCERS,
    Step.PRODUCERS: Step.BARRIER,
    Step.BARRIER: Step.SEAL,
    Step.SEAL: Step.DONE,
}


@dataclass
class _Transition:
    """The working state of one transition (owned by the thread running it).

    ``step`` is written only by ``Controller._run``, the machine's one writer.
    """

    topic: str
    target: int
    deadline: float
    record: TopicRecord
    version: int
    kafka_partitions: int
    epoch: EpochRecord | None = None
    step: Step = Step.PARTITIONS
    resumed: bool = False
    created_partitions: bool = False
    started: float = field(default_factory=time.monotonic)
    session_lost: threading.Event = field(default_factory=threading.Event)

    @property
    def current_epoch(self) -> EpochRecord:
        if self.epoch is None:
            raise AssertionError(f"step {self.step.value} needs a published epoch")
        return self.epoch


@dataclass(frozen=True)
class TransitionResult:
    """The outcome of a completed transition.

    Attributes:
        topic: The topic.
        epoch: The sealed epoch.
        from_active: Active count before.
        to_active: Active count after.
        boundaries: The epoch's boundaries (partition -> offset).
        producers: The producers the barrier waited for.
        expired: Those that expired instead of acking (id -> unix time seen gone).
        created_partitions: Whether this run created Kafka partitions.
        resumed: Whether this run resumed an epoch that was already published.
        seconds: How long the run took.
    """

    topic: str
    epoch: int
    from_active: int
    to_active: int
    boundaries: dict[int, int]
    producers: tuple[str, ...]
    expired: dict[str, float]
    created_partitions: bool
    resumed: bool
    seconds: float

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "topic": self.topic,
            "epoch": self.epoch,
            "from_active": self.from_active,
            "to_active": self.to_active,
            "boundaries": {str(p): o for p, o in self.boundaries.items()},
            "producers": list(self.producers),
            "expired": dict(self.expired),
            "created_partitions": self.created_partitions,
            "resumed": self.resumed,
            "seconds": round(self.seconds, 3),
        }


@dataclass(frozen=True)
class Description:
    """What ``describe`` reports about a topic.

    Attributes:
        topic: The topic record (``None``: the topic exists in Kafka, not adopted).
        kafka_partitions: The partition count in Kafka.
        epochs: Every epoch, ascending.
        producers: Registered producers by id.
        acks: Producer ids that acked the pending epoch (empty if none is pending).
        kafka_topic_id: Kafka's topic id of the topic.
    """

    topic: TopicRecord | None
    kafka_partitions: int
    epochs: tuple[EpochRecord, ...]
    producers: dict[str, ProducerRecord]
    acks: tuple[str, ...]
    kafka_topic_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "adopted": self.topic is not None,
            "topic": None if self.topic is None else self.topic.to_dict(),
            "kafka_partitions": self.kafka_partitions,
            "kafka_topic_id": self.kafka_topic_id,
            "epochs": [e.to_dict() for e in self.epochs],
            "producers": {k: v.to_dict() for k, v in self.producers.items()},
            "pending_acks": list(self.acks),
        }


@dataclass(frozen=True)
class BarrierStatus:
    """Where a barrier stands at one moment (see :func:`barrier_status`).

    Attributes:
        waiting: Listed producers still holding the barrier, in list order.
        expired: The epoch's ``expired`` map with producers first seen gone now added.
        grace_ends: Unix times at which a gone producer's grace ends, for those still
            in their grace.
    """

    waiting: tuple[str, ...]
    expired: dict[str, float]
    grace_ends: tuple[float, ...]

    @property
    def passed(self) -> bool:
        """Whether no listed producer holds the barrier any more."""
        return not self.waiting


def barrier_status(
    epoch: EpochRecord, acked: set[str], live: set[str], now: float
) -> BarrierStatus:
    """Decide the barrier of ``epoch``: pure, no I/O.

    A listed producer no longer holds the barrier once it acked, or once it has been
    seen gone (not in ``live``; the time is kept in ``expired``) for its
    ``delivery_timeout_ms`` (:data:`UNKNOWN_DELIVERY_TIMEOUT_MS` if unknown) plus
    :data:`EXPIRY_GRACE_S`. A producer once seen gone keeps that clock even if the
    same id registers again: every record it routed by the old layout was produced
    before its session ended.

    Args:
        epoch: The pending epoch (its ``producers``, ``expired``, timeouts).
        acked: Ids with an ack of the epoch.
        live: Ids registered now.
        now: The current unix time.

    Returns:
        The status.
    """
    expired = dict(epoch.expired)
    waiting: list[str] = []
    grace_ends: list[float] = []
    for pid in epoch.producers:
        if pid in acked:
            continue
        if pid not in expired and pid not in live:
            expired[pid] = now
        if pid in expired:
            ms = epoch.delivery_timeouts_ms.get(pid, UNKNOWN_DELIVERY_TIMEOUT_MS)
            until = expired[pid] + ms / 1000.0 + EXPIRY_GRACE_S
            if now >= until:
                continue
            grace_ends.append(until)
        waiting.append(pid)
    return BarrierStatus(tuple(waiting), expired, tuple(grace_ends))


def _id_text(topic_id: str | None) -> str:
    return "the unbound adoption" if topic_id is None else f"topic id {topic_id}"


def _edges_text(edges: list[tuple[int, int]]) -> str:
    return ", ".join(f"{a}->{b}" for a, b in edges) or "none"


def _waiting_ids(waiting: list[str], expired: dict[str, float]) -> str:
    parts = [f"{pid} (gone, in grace)" if pid in expired else pid for pid in waiting]
    return "producer(s) " + ", ".join(parts)


def _waiting_text(
    epoch: EpochRecord,
    waiting: list[str],
    expired: dict[str, float],
    now: float | None = None,
    left: float | None = None,
) -> str:
    total = len(epoch.producers)
    grace = [p for p in waiting if p in expired]
    text = (
        f"epoch {epoch.epoch} of {epoch.topic}: waiting for {len(waiting)} of {total} "
        f"producers ({', '.join(waiting)})"
    )
    if grace:
        text += f"; {len(grace)} gone, waiting out their delivery timeout"
        if now is not None:
            ends = [
                expired[p]
                + epoch.delivery_timeouts_ms.get(p, DEFAULT_DELIVERY_TIMEOUT_MS) / 1000.0
                + EXPIRY_GRACE_S
                for p in grace
            ]
            text += f" ({max(0.0, max(ends) - now):.0f} s left)"
    if left is not None:
        text += f"; gives up in {max(0.0, left):.0f} s"
    return text
