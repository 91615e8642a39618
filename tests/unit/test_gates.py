"""The gate rule of docs/consumer.md: hand-built histories and a brute-force simulator."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from linear_hash import key_flow, route
from linear_hash.gating import EpochInfo, GateEvaluator, Wait, epoch_range


@dataclass
class View:
    """Committed offsets and log starts held in dicts."""

    committed_: dict[int, int] = field(default_factory=dict)
    starts: dict[int, int] = field(default_factory=dict)
    reads: list[int] = field(default_factory=list)

    def committed(self, partition: int) -> int | None:
        self.reads.append(partition)
        return self.committed_.get(partition)

    def log_start(self, partition: int) -> int:
        return self.starts.get(partition, 0)


def epoch(
    number: int, edges: list[tuple[int, int]], bounds: Mapping[int, int], sealed: bool = True
) -> EpochInfo:
    return EpochInfo(number, sealed, tuple(edges), dict(bounds))


def hole_history(b1: int = 10) -> list[EpochInfo]:
    """docs/consumer.md: 3 -> 1 at 1, 2 -> 0 at 2, 1 -> 0 at 3, B_1(1) == B_1(3)."""
    return [
        epoch(0, [], {}),
        epoch(1, [(3, 1)], {3: 5, 1: b1}),
        epoch(2, [(2, 0)], {2: 7, 0: 20}),
        epoch(3, [(1, 0)], {1: b1, 0: 30}),
    ]


# --- hand-built histories -------------------------------------------------------------


def test_no_history_never_blocks() -> None:
    gates = GateEvaluator([epoch(0, [], {})])
    assert gates.may_deliver(0, 10**9, View())
    assert gates.limit(0) == math.inf


def test_expansion_gate_opens_when_source_commits_its_boundary() -> None:
    gates = GateEvaluator([epoch(0, [], {}), epoch(1, [(0, 1)], {1: 0, 0: 50})])
    view = View({0: 49})
    assert gates.limit(1) == 0
    assert not gates.may_deliver(1, 0, view)
    assert gates.waiting_on(1, 0, view) == [Wait(0, 50, 1)]
    view.committed_[0] = 50
    assert gates.may_deliver(1, 0, view)
    assert gates.limit(1) == math.inf
    assert (1, 1) in gates.satisfied
    # Cached: a later regression of the view does not close the gate again...
    view.committed_[0] = 0
    assert gates.may_deliver(1, 5, view)
    # ... until the reader forgets what it learned (a rewind): decided from the view now.
    gates.forget()
    assert gates.limit(1) == 0
    assert not gates.may_deliver(1, 5, view)
    assert gates.waiting_on(1, 5, view) == [Wait(0, 50, 1)]


def test_records_below_the_boundary_flow_freely() -> None:
    gates = GateEvaluator([epoch(0, [], {}), epoch(1, [(2, 0)], {0: 100, 2: 7})])
    view = View()
    assert gates.may_deliver(0, 99, view)
    assert not gates.may_deliver(0, 100, view)
    assert gates.limit(0) == 100


def test_pending_epoch_blocks_receivers_at_their_boundary() -> None:
    gates = GateEvaluator([epoch(0, [], {}), epoch(1, [(0, 1)], {1: 3}, sealed=False)])
    view = View({0: 10**6})
    assert gates.may_deliver(1, 2, view)
    assert not gates.may_deliver(1, 3, view)
    assert gates.waiting_on(1, 3, view) == [Wait(-1, -1, 1)]
    # A giving partition is not held by a pending epoch.
    assert gates.may_deliver(0, 10**5, view)
    gates.update([epoch(0, [], {}), epoch(1, [(0, 1)], {1: 3, 0: 40})])
    assert gates.may_deliver(1, 3, view)


def test_log_start_counts_as_progress() -> None:
    gates = GateEvaluator([epoch(0, [], {}), epoch(1, [(3, 1)], {1: 0, 3: 40})])
    assert not gates.may_deliver(1, 0, View(starts={3: 39}))
    assert gates.may_deliver(1, 0, View(starts={3: 40}))


def test_the_hole_blocks() -> None:
    gates = GateEvaluator(hole_history())
    # Partition 1 delivered everything below B_1(1) == B_1(3) == 10 and committed it;
    # partition 2 is done; partition 3's old records (below 5) were never delivered.
    view = View({1: 10, 2: 7, 3: 0})
    assert gates.may_deliver(0, 29, view)  # below B_0(3): only the 2 -> 0 gate
    assert not gates.may_deliver(0, 30, view)
    assert gates.waiting_on(0, 30, view) == [Wait(3, 5, 1)]
    # Gate (0, 2) opened at offset 29 and is cached: only 1 and 3 are still read.
    assert gates.required_partitions(0, 30) == {1, 3}
    view.committed_[3] = 5
    assert gates.may_deliver(0, 30, view)


def test_the_hole_with_direct_edges_only_would_open() -> None:
    """The shortcut of ARCHITECTURE.md opens the gate: the test above can fail."""
    history = hole_history()
    view = View({1: 10, 2: 7, 3: 0})
    direct = all(
        (view.committed(a) or 0) >= info.boundaries[a]
        for info in history
        for a, b in info.edges
        if b == 0 and info.boundaries[0] <= 30
    )
    assert direct
    assert not GateEvaluator(history).may_deliver(0, 30, view)


def test_recursion_only_follows_earlier_epochs() -> None:
    """0 -> 1 at 1, then 1 -> 0 at 2 with nothing written to 0 in between: no deadlock."""
    history = [
        epoch(0, [], {}),
        epoch(1, [(0, 1)], {1: 0, 0: 10}),
        epoch(2, [(1, 0)], {0: 10, 1: 4}),
    ]
    gates = GateEvaluator(history)
    view = View({0: 10})
    assert gates.may_deliver(1, 0, view)  # gate (1, 1) needs only 0 up to 10
    assert not gates.may_deliver(0, 10, view)
    view.committed_[1] = 4
    assert gates.may_deliver(0, 10, view)


def test_missing_boundary_blocks_conservatively() -> None:
    gates = GateEvaluator([epoch(0, [], {}), epoch(1, [(0, 1)], {})])
    assert gates.limit(1) == 0
    assert not gates.may_deliver(1, 0, View({0: 10**9}))
    assert gates.waiting_on(1, 0, View()) == [Wait(0, -1, 1)]


def test_source_marks_and_from_record() -> None:
    record = {
        "epoch": 2,
        "state": "sealed",
        "edges": [[3, 1], [2, 0]],
        "boundaries": {"0": 4, "1": 5, "2": 6, "3": 7},
        "to_active": 2,
    }
    info = EpochInfo.from_record(record)
    assert info == EpochInfo(2, True, ((3, 1), (2, 0)), {0: 4, 1: 5, 2: 6, 3: 7}, 2)
    gates = GateEvaluator([epoch(0, [], {}), info])
    assert gates.source_marks(3) == [7]
    assert gates.source_marks(1) == []
    assert gates.is_source(2) and not gates.is_source(0)
    assert gates.gates_of(1) == [(5, 2)]


def test_epoch_range() -> None:
    history = [
        epoch(0, [], {}),
        epoch(1, [(0, 1)], {1: 0, 0: 10}),
        epoch(2, [(1, 2)], {2: 0, 1: 20}),
    ]
    assert epoch_range(history, 0, 9) == (0, 2)
    assert epoch_range(history, 0, 10) == (1, 2)
    assert epoch_range(history, 1, 19) == (0, 2)
    assert epoch_range(history, 1, 20) == (2, 2)


# --- brute-force simulator -------------------------------------------------------------


@dataclass
class Sim:
    """A topic, producers with in-flight queues, a controller and one consumer group.

    Keys are hashes routed with ``linear_hash.route``. Each producer switches layouts on
    its own schedule (it "sees" the pending epoch late), its records reach the log
    through per-partition in-flight queues (order kept per partition, as idempotence
    keeps it), and an epoch is sealed only when every producer switched and appended
    every record routed under an older layout.
    """

    initial: int
    active: int
    producers: int = 2
    logs: dict[int, list[tuple[int, int, int]]] = field(default_factory=dict)
    history: list[EpochInfo] = field(default_factory=list)
    layout_of: list[int] = field(default_factory=list)  # producer -> epoch it routes by
    inflight: list[dict[int, list[tuple[int, int, int, int]]]] = field(default_factory=list)
    seqs: dict[tuple[int, int], int] = field(default_factory=dict)
    committed: dict[int, int] = field(default_factory=dict)
    pos: dict[int, int] = field(default_factory=dict)
    delivered: dict[tuple[int, int], int] = field(default_factory=dict)  # next seq due
    actives: dict[int, int] = field(default_factory=dict)  # epoch -> active

    def __post_init__(self) -> None:
        self.history = [EpochInfo(0, True)]
        self.actives = {0: self.active}
        self.layout_of = [0] * self.producers
        self.inflight = [{} for _ in range(self.producers)]
        self.gates = GateEvaluator(self.history)

    def log(self, p: int) -> list[tuple[int, int, int]]:
        return self.logs.setdefault(p, [])

    @property
    def pending(self) -> bool:
        return not self.history[-1].sealed

    def produce(self, producer: int, h: int) -> None:
        ep = self.layout_of[producer]
        p = route(h, self.initial, self.actives[ep])
        seq = self.seqs.get((producer, h), 0)
        self.seqs[(producer, h)] = seq + 1
        self.inflight[producer].setdefault(p, []).append((producer, h, seq, ep))

    def append(self, producer: int, pick: int) -> None:
        queues = [p for p, q in sorted(self.inflight[producer].items()) if q]
        if queues:
            p = queues[pick % len(queues)]
            producer_, h, seq, _ep = self.inflight[producer][p].pop(0)
            self.log(p).append((producer_, h, seq))

    def publish(self, target: int) -> None:
        if self.pending or target == self.active:
            return
        e = self.history[-1].epoch + 1
        edges = key_flow(self.initial, self.active, target)
        bounds = {b: len(self.log(b)) for _a, b in edges}
        self.history.append(EpochInfo(e, False, tuple(edges), bounds, target))
        self.actives[e] = target
        self.active = target
        self.gates.update(self.history)

    def switch(self, producer: int) -> None:
        self.layout_of[producer] = self.history[-1].epoch

    def try_seal(self) -> None:
        if not self.pending:
            return
        info = self.history[-1]
        for producer in range(self.producers):
            if self.layout_of[producer] != info.epoch:
                return
            for queue in self.inflight[producer].values():
                if any(ep < info.epoch for *_rest, ep in queue):
                    return
        bounds = dict(info.boundaries)
        bounds.update({a: len(self.log(a)) for a, _b in info.edges})
        self.history[-1] = EpochInfo(info.epoch, True, info.edges, bounds, info.to_active)
        self.gates.update(self.history)

    def view(self) -> View:
        return View(dict(self.committed))

    def deliver(self, p: int) -> bool:
        at = self.pos.get(p, 0)
        if at >= len(self.log(p)):
            return False
        # As the consumer does: below limit() records flow without a decision, and
        # the cached limit must be what a fresh scan of the open gates says.
        limit = self.gates.limit(p)
        fresh = min(
            (b for b, e in self.gates.gates_of(p) if (p, e) not in self.gates.satisfied),
            default=math.inf,
        )
        assert limit == fresh, f"cached limit {limit}, fresh {fresh}"
        if at >= limit and not self.gates.may_deliver(p, at, self.view()):
            return False
        producer, h, seq = self.log(p)[at]
        self.pos[p] = at + 1
        due = self.delivered.get((producer, h), 0)
        if seq >= due:
            # A first delivery: every earlier record of the key must be delivered.
            assert seq == due, f"key {h} of producer {producer}: seq {seq} before {due}"
            self.delivered[(producer, h)] = seq + 1
        return True

    def commit(self, p: int) -> None:
        self.committed[p] = max(self.committed.get(p, 0), self.pos.get(p, 0))

    def crash(self) -> None:
        self.pos = dict(self.committed)

    def drain(self) -> None:
        """Finish every transition and consume everything: nothing may stay stuck."""
        for producer in range(self.producers):
            self.switch(producer)
            for queue in self.inflight[producer].values():
                while queue:
                    producer_, h, seq, ep = queue.pop(0)
                    self.log(route(h, self.initial, self.actives[ep])).append((producer_, h, seq))
        self.try_seal()
        progress = True
        while progress:
            progress = False
            for p in sorted(self.logs):
                while self.deliver(p):
                    progress = True
                if self.committed.get(p, 0) < self.pos.get(p, 0):
                    self.commit(p)
                    progress = True
        for p, records in self.logs.items():
            assert self.pos.get(p, 0) == len(records), f"partition {p} stuck at {self.pos}"
        total = sum(self.seqs.values())
        assert sum(self.delivered.values()) == total


ops = st.lists(
    st.tuples(
        st.sampled_from(
            # Transitions are as frequent as records: the holes need several epochs
            # with few records in between (a direct-edge rule fails here within a few
            # hundred examples).
            ["produce", "crash"]
            + ["append", "publish", "switch", "seal", "commit"] * 2
            + ["deliver"] * 3
        ),
        st.integers(0, 63),
        st.integers(0, 1),
    ),
    max_size=120,
)


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(initial=st.integers(1, 3), ops=ops)
def test_simulated_group_never_reorders_a_key(
    initial: int, ops: list[tuple[str, int, int]]
) -> None:
    sim = Sim(initial, initial)
    top = initial * 4
    for op, n, producer in ops:
        if op == "produce":
            sim.produce(producer, n % 16)
        elif op == "append":
            sim.append(producer, n)
        elif op == "publish":
            sim.publish(initial + n % (top - initial + 1))
        elif op == "switch":
            sim.switch(producer)
        elif op == "seal":
            sim.try_seal()
        elif op == "deliver":
            if sim.logs:
                sim.deliver(sorted(sim.logs)[n % len(sim.logs)])
        elif op == "commit":
            if sim.logs:
                sim.commit(sorted(sim.logs)[n % len(sim.logs)])
        else:
            sim.crash()
    sim.drain()


def test_simulator_catches_the_hole_with_direct_edges_only() -> None:
    """Replaying the hole through the simulator with a direct-edge rule reorders a key."""

    class Direct(GateEvaluator):
        def _reached(self, a, o, before, view, memo, collect):  # type: ignore[no-untyped-def]
            committed = view.committed(a)
            return committed is not None and committed >= o

    sim = Sim(1, 1, producers=1)
    sim.gates = Direct(sim.history)
    sim.publish(4)  # 0 -> 1, 2, 3
    sim.switch(0)
    sim.try_seal()
    for p in (1, 2, 3):
        sim.pos[p] = sim.committed[p] = 0
    # A key of partition 3, written under active 4.
    h = 3
    sim.produce(0, h)
    sim.append(0, 0)
    for target in (3, 2, 1):
        sim.publish(target)
        sim.switch(0)
        sim.try_seal()
    sim.produce(0, h)  # now in partition 0
    sim.append(0, 0)
    sim.committed[0] = sim.pos[0] = 0
    sim.commit(1)
    sim.commit(2)
    with pytest.raises(AssertionError, match="seq 1 before 0"):
        sim.deliver(0)
    # The real rule holds the record back until partition 3 is consumed.
    real = Sim(1, 1, producers=1)
    real.publish(4)
    real.switch(0)
    real.try_seal()
    real.produce(0, h)
    real.append(0, 0)
    for target in (3, 2, 1):
        real.publish(target)
        real.switch(0)
        real.try_seal()
    real.produce(0, h)
    real.append(0, 0)
    real.commit(1)
    real.commit(2)
    assert not real.deliver(0)
    assert real.deliver(3)
    real.commit(3)
    assert real.deliver(0)
