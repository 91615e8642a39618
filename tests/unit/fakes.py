"""Stand-ins the unit tests share: one of each, imported (``from fakes import ...``).

* :class:`FakeClock`: a :class:`~coordinator.kernel.clock.Clock` moved by hand;
* the consumer's core: :class:`Quiet` (a consumer or hooks that do nothing),
  :class:`NoLayouts`, :data:`CORE_CONFIG` and :func:`bare_core`;
* the fetch path: :class:`Msg` (a record), :class:`FakeConsumer` (librdkafka handing
  out prepared batches), :class:`FakeLayouts` (the real coverage and pacing rules,
  checks only logged), :class:`RewindLayouts`, :func:`make` and :func:`run`;
* the gates: :func:`gate_in` (a gate driven into a state) and :func:`kwargs_for`;
* the call path: :class:`FakeFetcher` and :class:`FakeUpkeep`.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

from confluent_kafka import TopicPartition

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock
from ordered.consumer.fetch import Fetcher
from ordered.consumer.layouts import FetchCheck, LayoutTracker
from ordered.consumer.pacing import CheckPacer
from ordered.consumer.partition import GateEvent, GateState, PartitionGate
from ordered.consumer.state import Core

__all__ = [
    "CORE_CONFIG",
    "FakeClock",
    "FakeConsumer",
    "FakeFetcher",
    "FakeLayouts",
    "FakeUpkeep",
    "Msg",
    "NoLayouts",
    "Quiet",
    "RewindLayouts",
    "bare_core",
    "gate_in",
    "kwargs_for",
    "make",
    "run",
]


# --- time ------------------------------------------------------------------------------


class FakeClock:
    """A :class:`~coordinator.kernel.clock.Clock` that moves only when told (or slept on).

    ``now`` is its monotonic time; :meth:`time` is the epoch time at the same instant.
    """

    EPOCH = 1_700_000_000.0
    """The epoch time at monotonic 0."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now
        self.slept: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def time(self) -> float:
        return self.EPOCH + self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds

    def sleep(self, seconds: float) -> None:
        """A pause that takes no real time: the clock moves by it."""
        self.slept.append(seconds)
        if seconds > 0:
            self.now += seconds


# --- the consumer's core ---------------------------------------------------------------


class Quiet:
    """Consumer and hooks: the calls Core.fire makes, doing nothing."""

    def __getattr__(self, name: str) -> Any:
        return lambda *args, **kwargs: None

    def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> tuple[int, int]:
        return -1, -1  # none known yet


CORE_CONFIG = SimpleNamespace(
    prefetch_records=100_000, ordered=SimpleNamespace(gate_poll_interval_ms=500)
)
"""The split configuration a bare core reads (its pre-fetch window, its re-check slot)."""


class NoLayouts:
    """Layouts of no topic: every partition's open limit is none, no check reads the store."""

    usable = False

    def __init__(self) -> None:
        self.topics: dict[str, Any] = {}


def bare_core(
    consumer: Any = None, config: Any = CORE_CONFIG, events: Any = None, clock: Clock = SYSTEM_CLOCK
) -> Core:
    """A consumer core over stand-ins: no layouts, quiet hooks, no counters."""
    return Core(
        consumer if consumer is not None else Quiet(),
        config,
        NoLayouts(),  # type: ignore[arg-type]
        events if events is not None else Quiet(),
        None,  # type: ignore[arg-type]
        clock=clock,
    )


# --- the fetch path -------------------------------------------------------------------


class Msg:
    """A fetched record of topic ``t`` (only what the consumer's parts look at)."""

    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeConsumer:
    """Hands out prepared batches; ``during`` runs inside the next consume call.

    Positions follow what was returned, as librdkafka's do; ``high`` is the high
    watermark librdkafka would have cached per partition.
    """

    def __init__(self, batches: list[list[Msg]], log: list[str]) -> None:
        self.batches = batches
        self.log = log
        self.during: Callable[[], object] | None = None
        self.positions: dict[int, int] = {}
        self.high: dict[int, int] = {}
        self.assigned = [0, 1]
        self.assignment_calls = 0

    def consume(self, num: int, timeout: float) -> list[Msg]:
        if self.during is not None:
            during, self.during = self.during, None
            during()
        batch = self.batches.pop(0) if self.batches else []
        if not batch and timeout > 0:
            time.sleep(min(timeout, 0.01))  # as librdkafka: nothing came within the timeout
        self.log.append(f"fetch {[m.offset() for m in batch]}")
        for m in batch:
            self.positions[m.partition()] = m.offset() + 1
        return batch

    def assignment(self) -> list[TopicPartition]:
        self.assignment_calls += 1
        return [TopicPartition("t", p) for p in self.assigned]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(tp.topic, tp.partition, self.positions.get(tp.partition, -1001))
            for tp in partitions
        ]

    def get_watermark_offsets(self, tp: TopicPartition, cached: bool) -> tuple[int, int]:
        assert cached  # never a request to the broker
        return 0, self.high.get(tp.partition, -1001)

    def poll(self, timeout: float) -> Msg | None:
        batch = self.consume(1, timeout)
        return batch[0] if batch else None


class _NoBarrier:
    """A consumer barrier never in force: every batch is checked."""

    def relies(self, views: Any) -> bool:
        return False


class FakeLayouts(LayoutTracker):
    """The real coverage and pacing rules (from LayoutTracker); checks only logged."""

    def __init__(self, log: list[str], check_rate: int = 0) -> None:
        self.log = log
        self.sent = 0
        self.marks: dict[int, Any] = {}
        self.covered = {}
        self.covered_version = 0
        self.verify_fetch = True
        self.topics = {"t": None}  # type: ignore[dict-item]
        self._group = None
        self._check_rate = check_rate
        self._last_sent = -math.inf
        self._pacer = CheckPacer()
        self.trusted = True
        self._rewound: set[str] = set()
        self._rewind_lock = threading.Lock()
        self.barrier = _NoBarrier()  # type: ignore[assignment]

    @property
    def usable(self) -> bool:
        return self.trusted

    def begin_check(self, marks: Any = ()) -> Any:
        self.sent += 1
        self.marks[self.sent] = tuple(marks)
        self._last_sent = time.monotonic()
        self._pacer.sent(self._interval())
        self.log.append(f"send {self.sent}")
        return self.sent

    def finish_check(self, check: Any) -> list[Any]:
        self.log.append(f"wait {check}")
        for key, mark in self.marks.get(check, ()):
            self.covered[key] = max(mark, self.covered.get(key, -1))
        return []


def make(batches: list[list[Msg]], check_rate: int = 0) -> tuple[Fetcher, FakeConsumer, list[str]]:
    """A real fetcher over :class:`FakeConsumer` and :class:`FakeLayouts`, sharing one log."""
    log: list[str] = []
    consumer = FakeConsumer(batches, log)
    layouts = FakeLayouts(log, check_rate)
    fetcher = Fetcher(consumer, layouts, lambda: None)
    return fetcher, consumer, log


def run(batches: list[list[Msg]], fetcher: Fetcher, consumer: FakeConsumer, num: int) -> None:
    """Fetch and take ``batches`` until none is left and no check is pending."""
    consumer.batches = batches
    while consumer.batches or fetcher._pending is not None:
        fetcher.fetch(num, 1.0, single=False)
        fetcher.take(num)


class Answer:
    """A kazoo async result the test answers (``ready()`` until then ``False``)."""

    def __init__(self) -> None:
        self.answered = False

    def ready(self) -> bool:
        return self.answered


class RewindLayouts(FakeLayouts):
    """A group member's layouts: each check also reads the group's rewind marker."""

    def __init__(self, log: list[str], check_rate: int) -> None:
        super().__init__(log, check_rate)
        self.topics = {"t": SimpleNamespace(ordered=True)}  # type: ignore[dict-item]
        self._group = "g"
        self.checks: dict[int, FetchCheck] = {}
        self.rewound_by: set[int] = set()  # checks whose marker read finds a rewind
        self._rewound: set[str] = set()

    def begin_check(self, marks: Any = ()) -> Any:
        number = super().begin_check(marks)
        check = FetchCheck(Answer(), (("t", Answer()),), tuple(marks), (("t", Answer()),))
        self.checks[number] = check
        return check

    def finish_check(self, check: Any) -> list[Any]:
        if check is None:
            return []
        number = next(n for n, c in self.checks.items() if c is check)
        if number in self.rewound_by:
            self._rewound.add("t")
        return super().finish_check(number)

    def answer(self, number: int) -> None:
        check = self.checks[number]
        for result in (check.sync, *(r for _n, r in check.reads), *(r for _n, r in check.rewinds)):
            result.answered = True


# --- the gates ------------------------------------------------------------------------


def gate_in(state: GateState, stash: bool = False) -> PartitionGate:
    """A gate driven into ``state`` through listed transitions only."""
    gate = PartitionGate("t", 0, open_limit=10)
    assert gate.state is GateState.GATED
    if state is GateState.FREE:
        gate.fire(GateEvent.HISTORY, math.inf)
    elif state is GateState.BLOCKED:
        gate.fire(GateEvent.GATE_CLOSED, 10, held=10)
    elif state is GateState.DRAINING:
        gate.fire(GateEvent.STASHED, 10, records=[Msg(0, 10), Msg(0, 11)])
    if stash and state is not GateState.DRAINING:
        gate.stash = [Msg(0, 12)]
    assert gate.state is state
    return gate


def kwargs_for(event: GateEvent) -> dict[str, object]:
    if event in (GateEvent.GATE_CLOSED, GateEvent.UNAVAILABLE):
        return {"held": 12}
    if event is GateEvent.STASHED:
        return {"records": [Msg(0, 13)]}
    return {}


# --- the call path --------------------------------------------------------------------


class _Ready(list[Any]):
    """The fetcher's checked records (a list is enough for the loop)."""

    def push_front(self, batch: list[Any]) -> None:
        self[:0] = batch


class FakeFetcher:
    """The call path's fetcher: each fetch makes the next prepared batch ready."""

    def __init__(self, batches: list[list[str]]) -> None:
        self.batches = batches
        self.ready = _Ready()
        self.taken_last = None
        self.waits = True  # nothing fetched ahead: every fetch may wait
        self.moved = 0  # partitions taken away so far (a revocation bumps it)
        self.notes: list[Any] = []  # what checks found (none here)

    def fetch(
        self, num: int, timeout: float, single: bool, ahead: int | None = None, judge: Any = None
    ) -> None:
        if self.batches:
            self.ready.extend(self.batches.pop(0))

    def take(self, num: int) -> list[str]:
        out = self.ready[:num]
        del self.ready[:num]
        return out

    def take_held(self, parts: Any) -> list[str]:
        return []  # no gate holds a partition here


class _Filter:
    single = None  # no served batches: every record goes through filter()

    def filter(self, batch: list[str], from_stash: bool = False, last: Any = None) -> list[str]:
        return list(batch)

    def judge_covered(self, batch: list[str], covered: Any) -> None:
        return None  # never passes: every batch goes through ready

    def store_call(self) -> None:
        pass  # the fake delivers nothing: no offsets to store


class FakeUpkeep:
    """The call path's service step: counts its runs; raises or announces when told."""

    def __init__(self, fetcher: FakeFetcher, fail_at: int = 0, announce_after: int = 0) -> None:
        self.fetcher = fetcher
        self.filter = _Filter()
        self.services = 0
        self.fail_at = fail_at  # the service step raises at this call (1-based; 0: never)
        self.announce_after = announce_after  # an announcement is due from this call on

    def announcing(self) -> bool:
        return bool(self.announce_after) and self.services >= self.announce_after

    def service(self) -> None:
        self.services += 1
        if self.services == self.fail_at:
            raise RuntimeError("a callback raised")

    def unstash(self) -> bool:
        return False

    def take_stash(self, limit: int) -> list[str]:
        return []

    def slice(self, deadline: float | None) -> float:
        return 0.0
