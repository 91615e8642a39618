"""The invariant of issue "a record lost at an expansion's rebalance", property-based.

No commit and no stored offset may pass the first record of a partition that the
application has not been given: not a boundary commit (the announcement), not a
revocation's, not auto-commit's timer, not the application's ``commit()`` of stored
offsets.

Random interleavings of what happens to a consumer, over the real bookkeeping: the
records a ``consume()`` call takes (``BatchFilter.delivered`` while the call holds them,
``store_call`` when it returns them), the service step's announcements
(``Announcer.run``), a revocation (``ConsumerUpkeep.announce_revoked`` then ``drop``), a
loss, a new assignment at the committed offset, the application's commit, auto-commit at
any moment, and close. A recording stand-in for librdkafka keeps the stored and committed
offsets; the record log, what the application was given and the layout (partition 0
gives keys away at offset 50) are the test's. Pure logic: nothing here talks to Kafka.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from confluent_kafka import TopicPartition
from fakes import Msg
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from linear_hash.gating import EpochInfo, GateEvaluator
from ordered.consumer.announce import Announcer
from ordered.consumer.calls import ConsumerUpkeep
from ordered.consumer.fetch import Fetcher
from ordered.consumer.judge import BatchFilter
from ordered.consumer.partition import PartitionGate, PartState

# Epoch 1: partition 0 gives keys to 2 at offset 50 (an expansion 2 -> 3).
HISTORY = [EpochInfo(0, True), EpochInfo(1, True, ((0, 2),), {2: 0, 0: 50, 1: 60})]
START = 40  # every partition's log starts here
PARTITIONS = (0, 1)


class _Kafka:
    """librdkafka's stored and committed offsets (what the invariant is about)."""

    def __init__(self) -> None:
        self.stored: dict[int, int] = {}
        self.committed: dict[int, int] = {}
        self.assigned: set[int] = set()

    def store_offsets(self, offsets: list[Any]) -> None:
        for tp in offsets:
            assert tp.partition in self.assigned, "stored an offset of an unassigned partition"
            self.stored[tp.partition] = tp.offset

    def commit(self, offsets: list[Any] | None = None, asynchronous: bool = True) -> list[Any]:
        if offsets is None:  # confluent's commit(): the stored offsets of the assignment
            offsets = [TopicPartition("t", p, o) for p, o in self.stored.items()]
        for tp in offsets:
            self.committed[tp.partition] = tp.offset
        return offsets

    def commit_stored(self, partitions: set[int]) -> None:
        """Auto-commit (its timer, or librdkafka's at an unassign)."""
        for p in partitions:
            if p in self.stored:
                self.committed[p] = self.stored[p]


class ConsumerMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.kafka = _Kafka()
        view = SimpleNamespace(
            gates=GateEvaluator(HISTORY), pending_givers=frozenset(), ordered=True
        )
        self.core: Any = SimpleNamespace(
            parts={},
            layouts=SimpleNamespace(topics={"t": view}),
            known_commits={},
            config=SimpleNamespace(store_offsets=True, ordered=SimpleNamespace(commit_mode="auto")),
            consumer=self.kafka,
            listener=None,
            events=SimpleNamespace(announcement=lambda *a: None),
            unquiet=lambda: None,
            call_stores=None,
        )
        self.core.remember_commit = lambda t, p, o: None
        self.announcer = Announcer(self.core, None)
        self.flt = BatchFilter.__new__(BatchFilter)
        self.flt._core = self.core
        fetcher = Fetcher.__new__(Fetcher)
        fetcher.filling = None
        self.upkeep = ConsumerUpkeep.__new__(ConsumerUpkeep)
        self.upkeep._core = self.core
        self.upkeep._announcer = self.announcer
        self.upkeep.fetcher = fetcher
        self.given: dict[int, set[int]] = {p: set() for p in PARTITIONS}
        self.out: list[Msg] | None = None  # the call's records, while one runs
        self.fetched: dict[int, int] = {}  # the next offset librdkafka hands over
        for p in PARTITIONS:
            self._assign(p)

    # --- the consumer's events ------------------------------------------------------

    def _assign(self, p: int) -> None:
        start = self.kafka.committed.get(p, START)
        self.kafka.stored.pop(p, None)  # librdkafka forgets stored offsets at an unassign
        self.core.parts[("t", p)] = PartState("t", p, PartitionGate("t", p))
        self.kafka.assigned.add(p)
        self.fetched[p] = start

    def _drop(self, p: int) -> None:
        # ConsumerUpkeep.drop's part of it: the partition and the call's records of it.
        self.core.parts.pop(("t", p), None)
        self.upkeep.withdraw_call(("t", p))
        self.kafka.assigned.discard(p)
        self.fetched.pop(p, None)

    @precondition(lambda self: self.out is None)
    @rule()
    def call_starts(self) -> None:
        self.out = []
        self.core.call_stores = {}
        self.upkeep.fetcher.filling = self.out

    @rule(p=st.sampled_from(PARTITIONS), n=st.integers(1, 6))
    def records_taken(self, p: int, n: int) -> None:
        """librdkafka hands records over: judged into the call, or given at once (poll)."""
        if p not in self.fetched:
            return
        first = self.fetched[p]
        records = [Msg(p, o) for o in range(first, first + n)]
        self.fetched[p] = first + n
        part = self.core.parts[("t", p)]
        if part.start is None:
            part.start = first
        self.flt.delivered({("t", p): records[-1].offset()})
        if self.out is not None:
            self.out += records
        else:
            self.given[p].update(m.offset() for m in records)

    @precondition(lambda self: self.out is not None)
    @rule()
    def call_returns(self) -> None:
        assert self.out is not None
        self.upkeep.fetcher.filling = None
        self.flt.store_call()
        for m in self.out:
            self.given[m.partition()].add(m.offset())
        self.out = None

    @rule()
    def service_step(self) -> None:
        """The step at the start of a call's round, or of the next call."""
        if self.announcer.due():
            self.announcer.run()

    @rule(p=st.sampled_from(PARTITIONS), auto=st.booleans())
    def revoked(self, p: int, auto: bool) -> None:
        """librdkafka's on_revoke, inside a call or between calls."""
        if ("t", p) not in self.core.parts:
            return
        self.upkeep.announce_revoked({("t", p)})
        self._drop(p)
        if auto:
            self.kafka.commit_stored({p})  # enable.auto.commit: at the unassign

    @rule(p=st.sampled_from(PARTITIONS))
    def lost(self, p: int) -> None:
        if ("t", p) in self.core.parts:
            self._drop(p)

    @rule(p=st.sampled_from(PARTITIONS))
    def assigned(self, p: int) -> None:
        if ("t", p) not in self.core.parts:
            self._assign(p)

    @precondition(lambda self: self.out is None)
    @rule()
    def application_commits(self) -> None:
        if self.announcer.due():
            self.announcer.run()
        self.kafka.commit(asynchronous=False)

    @rule()
    def auto_commit_timer(self) -> None:
        self.kafka.commit_stored(set(self.kafka.assigned))

    @rule()
    def close(self) -> None:
        """close(): the call (if any) never returns; auto-commit of the stored offsets."""
        for p in list(self.kafka.assigned):
            self._drop(p)
        self.kafka.commit_stored(set(self.kafka.stored))
        self.upkeep.fetcher.filling = None
        self.core.call_stores = None
        self.out = None
        for p in PARTITIONS:
            self._assign(p)

    # --- the invariant ------------------------------------------------------------

    def _first_not_given(self, p: int) -> int:
        offset = START
        while offset in self.given[p]:
            offset += 1
        return offset

    @invariant()
    def nothing_passes_a_record_not_given(self) -> None:
        for p in PARTITIONS:
            floor = self._first_not_given(p)
            committed = self.kafka.committed.get(p, START)
            stored = self.kafka.stored.get(p, START)
            assert committed <= floor, f"partition {p}: committed {committed} past {floor}"
            assert stored <= floor, f"partition {p}: stored {stored} past {floor}"


ConsumerMachine.TestCase.settings = settings(
    max_examples=400,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestGivenInvariant = ConsumerMachine.TestCase
