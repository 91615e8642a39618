"""Pure bookkeeping of the producer barrier: which records were produced before a switch.

No I/O and no locks: :class:`~ordered.OrderedProducer` calls these under its own lock.
The rule (docs/protocol.md, "The producer"): records produced before a layout switch are
*untracked*; records produced after it carry a delivery callback (*tracked*) until the
ack. librdkafka's queue length counts every undelivered record and every unserved
delivery report, so ``queue_len - tracked_outstanding`` is the number of untracked
records still pending. Switches of several topics can overlap, so tracked records are
counted per *generation* (one per switch): a switch of generation ``g`` is drained when
no untracked record and no tracked record of a generation ``< g`` is pending.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = ["DeliveryCallback", "DrainTracker", "OnlyError", "Switch", "Tracked", "ignore_report"]

DeliveryCallback = Callable[[Any, Any], None]
"""``on_delivery(err, msg)``: confluent's delivery report callback."""


class DrainTracker:
    """Counts tracked records per generation.

    Attributes:
        generation: The generation of records produced now (the latest switch's).
        tracking: Whether new records must be tracked (some switch is not acked yet).
        total: Tracked records whose delivery report has not been served yet.
    """

    __slots__ = ("_outstanding", "generation", "total", "tracking")

    def __init__(self) -> None:
        self.generation = 0
        self.tracking = False
        self.total = 0
        self._outstanding: dict[int, int] = {}

    def begin(self) -> int:
        """Start a switch: later records belong to a new generation, which is returned."""
        self.generation += 1
        self.tracking = True
        return self.generation

    def stop(self) -> None:
        """Stop tracking new records (every switch is acked); counts stay exact."""
        self.tracking = False

    def sent(self, generation: int) -> None:
        """Count a tracked record of ``generation`` that librdkafka accepted."""
        self._outstanding[generation] = self._outstanding.get(generation, 0) + 1
        self.total += 1

    def done(self, generation: int) -> None:
        """Count the served delivery report of a tracked record of ``generation``.

        Raises:
            ValueError: No record of ``generation`` is outstanding (a bookkeeping bug).
        """
        left = self._outstanding.get(generation, 0) - 1
        if left < 0:
            raise ValueError(f"no tracked record of generation {generation} is outstanding")
        if left:
            self._outstanding[generation] = left
        else:
            del self._outstanding[generation]
        self.total -= 1

    def outstanding(self, generation: int) -> int:
        """Tracked records of ``generation`` still pending."""
        return self._outstanding.get(generation, 0)

    def untracked(self, queue_len: int) -> int:
        """Untracked records still pending, given librdkafka's queue length."""
        return max(queue_len - self.total, 0)

    def drained(self, generation: int, queue_len: int) -> bool:
        """Whether every record produced before the switch of ``generation`` is delivered.

        Args:
            generation: The switch's generation (from :meth:`begin`).
            queue_len: ``len(producer)``, read at the same instant as the counts (under
                the lock that ``produce`` holds around librdkafka and :meth:`sent`), on
                the thread that serves delivery reports.
        """
        if queue_len != self.total:
            # Above: untracked records pending. Below: a tracked report is being served
            # on another thread right now (popped from the queue, not yet counted);
            # either way it is not safe to say yes.
            return False
        return all(g >= generation for g in self._outstanding)


@dataclass(slots=True)
class Switch:
    """A topic's switch to a pending epoch, waiting for its drain before the ack.

    Attributes:
        topic: The topic.
        epoch: The pending epoch the producer switched to (and will ack).
        generation: The tracker generation that started with the switch.
        first_offsets: Partition -> offset of the first record of this switch's
            generation or later delivered there (a new-epoch record: every older one of
            this producer in that partition lies below it).
    """

    topic: str
    epoch: int
    generation: int
    first_offsets: dict[int, int] = field(default_factory=dict)

    def delivered(self, generation: int, partition: int, offset: int) -> None:
        """Note a successful delivery of a tracked record of this topic."""
        if generation >= self.generation and partition not in self.first_offsets and offset >= 0:
            self.first_offsets[partition] = offset

    def last_offsets(self) -> dict[int, int]:
        """Partition -> upper bound of the last offset written here under an older epoch.

        Only partitions where a new-epoch record landed are known; a partition whose
        first new record is at offset 0 holds no older record and is left out.
        """
        return {p: o - 1 for p, o in sorted(self.first_offsets.items()) if o > 0}


def ignore_report(_err: Any, _msg: Any) -> None:
    """The delivery callback of a tombstone copy (not the application's record)."""


class OnlyError:
    """Emulates ``delivery.report.only.error`` for one callback."""

    __slots__ = ("_user",)

    def __init__(self, user: DeliveryCallback) -> None:
        self._user = user

    def __call__(self, err: Any, msg: Any) -> None:
        if err is not None:
            self._user(err, msg)


class Tracked:
    """Delivery callback of a tracked record: count it, then call the user's callback.

    Args:
        done: ``done(generation, err, msg)``: the producer's bookkeeping (takes its lock).
        generation: The record's tracker generation.
        user: The application's callback, or ``None``.
        only_error: ``delivery.report.only.error``: call ``user`` for failures only.
    """

    __slots__ = ("_done", "_generation", "_only_error", "_user")

    def __init__(
        self,
        done: Callable[[int, Any, Any], None],
        generation: int,
        user: DeliveryCallback | None,
        only_error: bool,
    ) -> None:
        self._done = done
        self._generation = generation
        self._user = user
        self._only_error = only_error

    def __call__(self, err: Any, msg: Any) -> None:
        self._done(self._generation, err, msg)
        user = self._user
        if user is not None and (err is not None or not self._only_error):
            user(err, msg)
