"""The fetch path: records taken from librdkafka, and the layout check each batch needs.

Every batch taken from librdkafka waits here until the layouts are known to be at least
as new as its records (:mod:`ordered.consumer.layouts`): either the batch lies below the
offsets covered by a check that already answered (:meth:`LayoutTracker.below_marks`, what a
consumer reading a backlog sees nearly always), or its own check (``sync``, then the
topic znodes: one ZooKeeper round trip) answers first.

The check is pipelined: the batch returned now was usually fetched, and its check sent,
during the previous call; before waiting for that check, this call takes what
librdkafka already holds (never waiting for more) and sends its check. The round trip
then overlaps the application's work on the previous batch: it costs latency, not
throughput. This fetch ahead runs while there is a backlog (the last batch filled the
request).

Checks are paced (:meth:`LayoutTracker.check_due_in`): a batch that needs one before
its slot is *deferred*; the call waits (within its timeout) for the slot, taking into
the batch what librdkafka fetches meanwhile (so librdkafka's queue stays short and it
never postpones fetches for a full queue), and sends one check for all of it, so a
consumer that has caught up pays at most one check per slot, however fast the records
come.

A group member reads its group's rewind markers at least once per slot, also while its
batches lie below the covered offsets and need no check of their own. Such a batch does
not wait for that read (the *advisory* check): the first call after its answer came
acts on it, as it would on a rewind written that much later; a batch with a check of
its own waits for the advisory one first, so answers are acted on in the order sent.

In the steady state of a ``consume(n)`` call of :data:`~ordered.consumer.calls.POLL_BATCH`
records or more (nothing pending or queued, coverage noted, the layouts trusted), the
batch just taken is judged at once against the gates and the covered offsets together
(``judge``, one compiled pass over its records): one that passes needs no check of its
own, skips the queue of checked records, and librdkafka's positions are not asked for it
(:meth:`Fetcher._judged`). Anything else takes the usual way above.

Records taken from librdkafka but not yet judged (the batch fetched ahead, and what
``poll()`` serves one by one) belong to partitions librdkafka considers consumed up to
them, so a seek, a revocation or an application pause must find them here
(:meth:`Fetcher.take_partition`).

Each partition's last record in a batch is known without looking at the records:
librdkafka's position of a partition is its last record returned + 1, so the positions
asked right after the ``consume`` that returned a batch, against those asked after the
previous one, name the partitions the batch holds and their last offsets
(:attr:`Fetcher.taken_last`). Anything that moves a position in between (a seek, a
revocation, an assignment) makes it unknown for the next batch, which is then looked at
record by record.

The records checked and not yet judged (:class:`ReadyRecords`) are kept as the batches
librdkafka returned: a consumer takes what is ready nearly always whole, so a batch goes
back to the caller as the very list ``consume`` returned (copying records into a queue
and out again cost ~0.03 us per record, ~9% of a plain consumer's time per record at
``consume(10000)``).
``poll()`` takes records one at a time from the first batch (an index, not a copy).
"""

from __future__ import annotations

import collections
import itertools
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any, NamedTuple

from confluent_kafka import KafkaException

from ordered.consumer.layouts import FetchCheck, LayoutTracker, TopicView

_log = logging.getLogger(__name__)

__all__ = ["GATHER_LIMIT", "CheckNote", "Fetcher", "ReadyRecords"]

GATHER_LIMIT = 100_000
"""Most records a deferred batch takes from librdkafka while it waits for its check slot.

librdkafka's own ``queued.min.messages`` default: the records the wait holds in Python
are at most what librdkafka's queue would have held.
"""


Judge = Callable[[list[Any], dict[tuple[str, int], int]], "dict[tuple[str, int], int] | None"]
"""A batch's judgement against the gates and the covered offsets: its last offsets, or ``None``."""


class CheckNote(NamedTuple):
    """What one answered check found, for the fetcher's owner to act on.

    Attributes:
        reloaded: The views it read again (relimit their partitions), or ``None``: it
            failed, the layouts cannot be trusted.
        rewound: The topics whose group rewind marker it found changed (another member
            moved the group's progress back).
    """

    reloaded: list[TopicView] | None
    rewound: set[str]


@dataclass(slots=True)
class _Pending:
    """A batch taken from librdkafka and not yet released, and its check."""

    batch: list[Any]
    check: FetchCheck | None = None
    deferred: bool = False  # needs a check not sent yet (waiting for its slot)
    last: dict[tuple[str, int], int] | None = None  # each partition's last offset, if known


class Fetcher:
    """Batches from librdkafka, each released once its layout check has answered.

    Args:
        consumer: The wrapped ``confluent_kafka.Consumer``.
        layouts: The layouts the check compares.
        checked: Called once per layout check sent (the consumer's ``on_layout_check``).

    Attributes:
        pipeline: Fetch ahead (default ``True``).
        taken_last: Each partition's last offset in what :meth:`take` returned last,
            when it returned whole batches whose positions were noted; else ``None``.
        notes: What the checks that answered found, oldest first (:class:`CheckNote`),
            for the owner to act on before it judges the records they released.
    """

    def __init__(
        self,
        consumer: Any,
        layouts: LayoutTracker,
        checked: Callable[[], None],
    ) -> None:
        self._consumer = consumer
        self._layouts = layouts
        self._checked = checked
        self.notes: list[CheckNote] = []
        self.ready = ReadyRecords()  # checked, not judged
        self._pending: _Pending | None = None
        # The periodic read of the rewind markers for a batch below the marks: taken
        # once it has answered (see _begin).
        self._advisory: FetchCheck | None = None
        self._moved = 0  # partitions taken away (take_partition) so far
        self.pipeline = True
        self.skipped = 0  # batches released without a check of their own (covered)
        # librdkafka's assignment() is a round trip to its group thread (~0.1 ms), once
        # or twice per batch: it is asked again only after the assignment changed.
        self._assignment: list[Any] | None = None
        # Positions right after the last consume (None: unknown, something moved them).
        self._positions: list[int] | None = None
        self._ready_last: dict[tuple[str, int], int] | None = None  # of `ready`, if known
        self.taken_last: dict[tuple[str, int], int] | None = None
        # The records a consume() call has judged and not returned yet (None: no call
        # is filling one): see :meth:`withdraw`.
        self.filling: list[Any] | None = None

    def fetch(
        self,
        num: int,
        timeout: float,
        single: bool,
        ahead: int | None = None,
        judge: Judge | None = None,
    ) -> tuple[list[Any], dict[tuple[str, int], int]] | None:
        """Move the next checked batch to :attr:`ready` (nothing on timeout).

        Args:
            num: The most records to take from librdkafka at once.
            timeout: How long librdkafka may wait for the first record.
            single: Fetch as ``poll`` does: wait for one message, then take only
                what is already there.
            ahead: The most records to fetch ahead (default ``num``): a caller serving
                small calls from one judged batch fetches ahead more than it asked.
            judge: The steady state's judgement of a batch against the gates and the
                covered offsets at once (:meth:`BatchFilter.judge_covered
                <ordered.consumer.judge.BatchFilter.judge_covered>`); ``None``: every
                batch goes through :attr:`ready`.

        Returns:
            ``(batch, last)`` when ``judge`` passed the batch just taken (each of its
            partitions' last offset): it is the caller's to deliver, and skips
            :attr:`ready`. ``None`` otherwise.
        """
        if self._pending is None:
            moved = self._moved
            if single:
                first = self._consumer.poll(timeout)
                batch = [] if first is None else [first]
                if first is not None and first.error() is None and num > 1:
                    batch += self._consumer.consume(num - 1, 0)
            else:
                batch = self._consumer.consume(num, timeout)
            if not batch:
                return None
            if judge is not None and moved == self._moved:
                judged = self._judged(batch, judge)
                if judged is not None:
                    return judged
            self._pending = self._begin(batch, moved != self._moved)
        pending = self._pending
        if pending.deferred:
            wait = self._layouts.check_due_in()
            if wait > timeout:
                self._gather(pending, num, timeout)  # the slot is later than the caller waits
                return None
            if not self._gather(pending, num, wait):
                return None
        # Fetch ahead only from a backlog (the batch filled the request): then
        # librdkafka holds more, and taking it now hides the next check's round trip,
        # or (``ahead`` beyond ``num``) fills the batch small calls are served from.
        # Below the covered offsets (no check of its own) a call of its own size takes
        # none: the next batch needs no check either, and one taken ahead for nothing
        # only keeps more records alive (about 4% more CPU per record at
        # consume(500)). A consumer that has caught up waits for full batches instead,
        # as a plain one does. A deferred batch takes what came during its wait too:
        # the one check sent next covers both.
        backlog = len(pending.batch) >= num
        moved = self._moved
        useful = pending.check is not None or (ahead is not None and ahead > num)
        take_ahead = (self.pipeline and backlog and useful) or pending.deferred
        # It stays in _pending while librdkafka runs: a rebalance callback in there
        # settles it into `ready` and drops the records of revoked partitions.
        more = self._consumer.consume(ahead or num, 0) if take_ahead else []
        if self._pending is pending:
            self.settle()
        if more:
            self._pending = self._begin(more, moved != self._moved)
        return None

    def _judged(
        self, batch: list[Any], judge: Judge
    ) -> tuple[list[Any], dict[tuple[str, int], int]] | None:
        """The steady state: ``batch`` released at once when ``judge`` passes it whole.

        What :meth:`settle` would do for a batch below the covered offsets comes first
        (the advisory rewind read acted on once answered; layouts that cannot be trusted
        leave it to the usual path), so ``judge`` sees the gates as the usual path's
        judgement would. librdkafka's positions are not asked: the next batch's extent
        is then unknown to them (:meth:`_note_positions`).
        """
        moved = self._moved
        if self._advisory is not None:
            self._take_advisory(False)
        layouts = self._layouts
        if (
            moved != self._moved
            or self.notes  # the advisory read found something: acted on before a judgement
            or not layouts.covered
            or not layouts.usable
            or layouts.rewind_waiting
        ):
            # A partition moved in there, no coverage, or a rewind seen by the barrier's
            # watch and not yet acted on (a check does, before the batch): the usual path.
            return None
        last = judge(batch, layouts.covered)
        if last is None:
            return None
        self._positions = None
        self._covered_batch()
        return batch, last

    def _covered_batch(self) -> None:
        """A batch below the covered offsets: no check of its own, the rewind read once per slot."""
        self.skipped += 1
        if self._advisory is None and self._layouts.rewind_read_due():
            # Every record of the batch lies below the marks (its layouts are known):
            # only the group's rewind markers are read, once per slot. The batch does
            # not wait for that round trip; a later call acts on the answer, as it
            # would on a rewind written that much later.
            self._advisory = self._send()

    @property
    def waits(self) -> bool:
        """Whether the next :meth:`fetch` may wait (else its ``timeout`` is not read).

        Nothing pending (librdkafka is asked with the timeout) or a check waiting for its
        slot. A batch fetched ahead, its check sent or not needed, is settled at once:
        the caller then skips working out how long it may wait.
        """
        pending = self._pending
        return pending is None or pending.deferred

    def _gather(self, pending: _Pending, num: int, seconds: float) -> bool:
        """Wait ``seconds`` for the slot of the deferred ``pending``, taking records meanwhile.

        What librdkafka fetches during the wait joins the batch (``num`` at a time, up to
        :data:`GATHER_LIMIT` records), instead of piling up in librdkafka's queue: a queue
        past ``queued.min.messages`` makes librdkafka postpone the next fetches by
        ``fetch.queue.backoff.ms`` (librdkafka's default a second; the ordered
        consumer's 10 ms unless set), and with a second a live reader that fell that
        far behind stayed behind. The one check sent at the slot covers all of it
        (everything taken lies below the high watermarks it notes).

        Returns:
            ``False`` when a rebalance callback in ``consume`` settled ``pending``: what
            that call returned is the next pending batch, and this fetch ends.
        """
        deadline = time.monotonic() + seconds
        gathered = False
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                break
            if len(pending.batch) >= GATHER_LIMIT:
                time.sleep(left)
                break
            more = self._consumer.consume(num, left)
            # A revocation in there (take_partition) always settles the pending batch.
            if self._pending is not pending:
                if more:
                    self._pending = self._begin(more, True)
                return False
            if more:
                pending.batch += more
                gathered = True
        if gathered:
            # The positions noted with the batch no longer end it: its last offsets are
            # read from its records, and the next batch is compared with positions now.
            pending.last = None
            self._note_positions(True)
        return True

    def take(self, num: int) -> list[Any]:
        """Remove and return up to ``num`` checked records, oldest first (:attr:`taken_last`)."""
        # Nearly always all of it: a batch is taken with the size it was fetched.
        self.taken_last = self._ready_last if len(self.ready) <= num else None
        self._ready_last = None
        return self.ready.take(num)

    def unshift(self, records: list[Any]) -> None:
        """Put ``records`` (taken from librdkafka, not delivered) before the ready ones."""
        self.ready.push_front(records)
        self._ready_last = None  # the last offsets noted do not cover them

    def take_held(self, parts: dict[tuple[str, int], Any]) -> list[Any]:
        """Remove and return the checked records at the head whose gate holds them.

        Up to the first record that is an event or of a partition no gate holds (a
        ``PartState`` of ``parts`` whose ``gate.paused``): the judgement stashes them
        all, so ``poll()`` passes them in one batch, not one call each.
        """
        count = 0
        for m in self.ready:
            if m.error() is not None:
                break
            part = parts.get((m.topic(), m.partition()))
            if part is None or not part.gate.paused:
                break
            count += 1
        return self.take(count) if count else []

    def assignment_changed(self) -> None:
        """Partitions were assigned: the next check asks librdkafka for the assignment."""
        self._assignment = None
        self._positions = None

    def _assigned(self) -> list[Any]:
        assignment = self._assignment
        if assignment is None:
            assignment = self._assignment = self._consumer.assignment()
        return assignment

    def settle(self) -> None:
        """Wait for the pending batch's check (sent now if deferred); move it to :attr:`ready`."""
        pending = self._pending
        if pending is not None:
            self._pending = None
            if self._advisory is not None:
                # A check of this batch's own goes after it: wait for it then.
                self._take_advisory(pending.deferred or pending.check is not None)
            if pending.deferred:
                time.sleep(self._layouts.check_due_in())  # at most one slot
                pending.check = self._send()
            self._finish(pending.check)
            self._ready_last = pending.last if not self.ready else None
            self.ready.extend(pending.batch)

    def _finish(self, check: FetchCheck | None) -> None:
        """Wait for ``check``'s answer; note what it found (a reload, a failure, a rewind)."""
        reloaded = self._layouts.finish_check(check)
        rewound = self._layouts.take_rewound()
        if reloaded is None or reloaded or rewound:
            self.notes.append(CheckNote(reloaded, rewound))

    def _take_advisory(self, wait: bool) -> None:
        """Act on the rewind read in flight once it has answered (``wait``: now)."""
        check = self._advisory
        if check is None or not (wait or _answered(check)):
            return
        self._advisory = None
        self._finish(check)

    def take_partition(self, key: tuple[str, int]) -> list[Any]:
        """Remove (and return) the records of ``key`` taken from librdkafka, not judged.

        The partition moves (a seek, a revocation, a pause): its coverage is forgotten.
        """
        self._moved += 1
        self._assignment = None
        self._positions = None
        self._layouts.forget(key)
        self.settle()
        self._ready_last = None
        if not self.ready:
            return []
        mine: list[Any] = []
        rest: list[Any] = []
        for m in self.ready:
            ours = m.error() is None and (m.topic(), m.partition()) == key
            (mine if ours else rest).append(m)
        self.ready = ReadyRecords(rest)
        return mine

    @property
    def moved(self) -> int:
        """How many partitions were taken away so far (a revocation, a loss, an unassign)."""
        return self._moved

    def withdraw(self, key: tuple[str, int]) -> int | None:
        """Take the records of ``key`` out of the consume() call running now (revoked).

        librdkafka runs the rebalance callbacks inside that call, after it judged some
        records: a revocation then comes before the application has them, so its
        ``on_revoke`` commits the partition without them, and the member assigned the
        partition next reads them again from that commit. Handed out after the
        revocation, they were processed twice (an exactly-once pipeline wrote them
        twice, one transaction on each side of the rebalance).

        Returns:
            The offset of the first record taken out (``None``: none was).
        """
        filling = self.filling
        if not filling:
            return None
        first: int | None = None
        kept: list[Any] = []
        for m in filling:
            if m.error() is None and (m.topic(), m.partition()) == key:
                if first is None:
                    first = m.offset()
            else:
                kept.append(m)
        if first is not None:
            filling[:] = kept  # in place: the call appends to this list
        return first

    def first_offset(self, key: tuple[str, int]) -> int | None:
        """The offset of the first record of ``key`` taken and not judged, if any."""
        taken = itertools.chain(self.ready, self._pending.batch if self._pending else ())
        for m in taken:
            if m.error() is None and (m.topic(), m.partition()) == key:
                offset: int = m.offset()
                return offset
        return None

    def clear(self) -> None:
        """Forget everything taken (closing: nothing of it was delivered or stored)."""
        self.ready.clear()
        self._pending = None
        self._advisory = None
        self._positions = self._ready_last = None

    def _begin(self, batch: list[Any], moved: bool) -> _Pending:
        """The batch just taken, with its check sent, deferred, or not needed.

        Args:
            batch: What librdkafka returned.
            moved: A partition was taken away while librdkafka ran (a rebalance
                callback): positions may no longer bound the batch, so it is checked.
        """
        if not any(m.error() is None for m in batch):
            return _Pending(batch)  # events only: nothing to judge by a layout
        layouts = self._layouts
        positions, last = self._note_positions(moved)
        # Positions, not the records: one call per batch, whatever its size.
        if (
            not moved
            and layouts.covered
            and positions is not None
            and layouts.below_marks(positions)
        ):
            self._covered_batch()
            return _Pending(batch, last=last)
        if layouts.check_due_in() > 0:
            return _Pending(batch, deferred=True, last=last)
        return _Pending(batch, self._send(), last=last)

    def _note_positions(
        self, moved: bool
    ) -> tuple[list[Any] | None, dict[tuple[str, int], int] | None]:
        """librdkafka's positions now, and each partition's last offset in the batch.

        Called right after the ``consume`` that returned the batch: a partition whose
        position changed since the previous call holds records in it, the last at its
        position - 1. Unknown (``None``) after anything moved a position in between.
        """
        try:
            positions: list[Any] = self._consumer.position(self._assigned())
        except (KafkaException, RuntimeError) as exc:
            _log.debug("positions not noted: %s", exc)
            self._positions = None
            return None, None
        # In the order of the cached assignment, which changes only together with a
        # reset of the positions noted: a list, not a dict keyed by partition (per call).
        now = [tp.offset for tp in positions]
        before, self._positions = self._positions, now
        if moved or before is None or len(before) != len(now):
            return positions, None
        last: dict[tuple[str, int], int] = {}
        for index, offset in enumerate(now):
            was = before[index]
            if offset != was:
                if offset <= max(was, 0):
                    return positions, None  # gone back: look at the records
                tp = positions[index]
                last[(tp.topic, tp.partition)] = offset - 1
        return positions, (last or None)

    def _send(self) -> FetchCheck | None:
        """Note the assigned partitions' high watermarks, then send a check."""
        layouts = self._layouts
        if not layouts.verify_fetch:
            return None
        marks = []
        consumer = self._consumer
        try:
            for tp in self._assigned():
                # librdkafka's copy from its last fetch response: no request is made.
                high = consumer.get_watermark_offsets(tp, cached=True)[1]
                if high >= 0:
                    marks.append(((tp.topic, tp.partition), high))
        except (KafkaException, RuntimeError) as exc:
            marks.clear()  # no coverage from this check; it still checks its batch
            _log.debug("high watermarks not noted: %s", exc)
        check = layouts.begin_check(marks)
        if not layouts.last_check_virtual:
            self._checked()  # only checks that ask ZooKeeper count
        return check


def _answered(check: FetchCheck) -> bool:
    """Whether every request of ``check`` has its answer (reading it will not wait)."""
    if not check.sync.ready():
        return False
    return all(read.ready() for _name, read in (*check.reads, *check.rewinds))


class ReadyRecords:
    """Records in order, held as whole batches; the first may be partly taken.

    Args:
        records: Records to start with (one batch), if any.
    """

    __slots__ = ("_batches", "_count", "_head")

    def __init__(self, records: Iterable[Any] = ()) -> None:
        self._batches: collections.deque[list[Any]] = collections.deque()
        self._head = 0  # records of the first batch already taken
        self._count = 0
        self.extend(records)

    def __len__(self) -> int:
        return self._count

    def __iter__(self) -> Iterator[Any]:
        batches = iter(self._batches)
        first = next(batches, None)
        if first is None:
            return iter(())
        return itertools.chain(itertools.islice(first, self._head, None), *batches)

    def extend(self, batch: Iterable[Any]) -> None:
        """Add ``batch`` after the records held (the list is kept, not copied)."""
        records = batch if type(batch) is list else list(batch)
        if records:
            self._batches.append(records)
            self._count += len(records)

    def take(self, num: int) -> list[Any]:
        """Remove and return up to ``num`` records, oldest first.

        When that is one whole batch, it is the list given to :meth:`extend`.
        """
        if self._count <= num:
            batches = self._batches
            out = batches[0] if len(batches) == 1 and not self._head else list(self)
            self.clear()
            return out
        out = []
        while len(out) < num:
            first = self._batches[0]
            part = first[self._head : self._head + num - len(out)]
            out += part
            self._head += len(part)
            if self._head >= len(first):
                self._batches.popleft()
                self._head = 0
        self._count -= len(out)
        return out

    def push_front(self, batch: list[Any]) -> None:
        """Put ``batch`` back before the records held (records taken and not judged)."""
        if not batch:
            return
        if self._head:
            first = self._batches.popleft()
            self._batches.appendleft(first[self._head :])
            self._head = 0
        self._batches.appendleft(batch)
        self._count += len(batch)

    def clear(self) -> None:
        """Forget every record."""
        self._batches.clear()
        self._head = 0
        self._count = 0
