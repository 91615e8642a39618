"""librdkafka's pause set, from one place: each partition's pause wishes by owner.

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
import enum
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, Protocol, TypeVar

from confluent_kafka import KafkaException, TopicPartition

__all__ = ["PartPauses", "Pausable", "PauseArbiter", "PauseOwner"]


class PauseOwner(enum.Enum):
    """Who wants a partition paused in librdkafka."""

    GATE = "gate"
    """A held gate (``BLOCKED``/``DRAINING``) whose partition's log reaches far past it."""
    APPLICATION = "application"
    """The application's ``pause()``, until its ``resume()``."""


@dataclass(slots=True)
class PartPauses:
    """One partition's pause wishes, and what librdkafka was last told.

    Attributes:
        wishes: The owners that want it paused; paused while not empty.
        applied: librdkafka has it paused (written only by :meth:`PauseArbiter._settle`).
    """

    wishes: set[PauseOwner] = field(default_factory=set)
    applied: bool = False


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
