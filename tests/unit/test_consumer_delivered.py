"""What recording a delivery does (``BatchFilter.delivered``): positions, the announcement
of a source's boundary, the offsets stored for the next commit. Pure logic over a real
gate rule and announcer, with a consumer that records ``store_offsets``."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

from linear_hash.gating import EpochInfo, GateEvaluator
from ordered.consumer.judge import BatchFilter
from ordered.consumer.partition import AnnounceState, PartitionGate, PartState

# Epoch 1: partition 0 gives keys to 2 at offset 50 (an expansion 2 -> 3).
HISTORY = [EpochInfo(0, True), EpochInfo(1, True, ((0, 2),), {2: 0, 0: 50, 1: 60})]


class Stores:
    def __init__(self) -> None:
        self.stored: list[list[tuple[int, int]]] = []

    def store_offsets(self, offsets: list[Any]) -> None:
        self.stored.append([(tp.partition, tp.offset) for tp in offsets])


def _filter() -> tuple[BatchFilter, dict[tuple[str, int], PartState], Stores]:
    parts = {("t", p): PartState("t", p, PartitionGate("t", p), start=40) for p in (0, 1, 2)}
    view = SimpleNamespace(gates=GateEvaluator(HISTORY), pending_givers=frozenset())
    consumer = Stores()
    core: Any = SimpleNamespace(
        parts=parts,
        layouts=SimpleNamespace(topics={"t": view}),
        known_commits={},
        config=SimpleNamespace(store_offsets=True),
        consumer=consumer,
        unquiet=lambda: None,
        call_stores=None,
    )
    flt = BatchFilter.__new__(BatchFilter)
    flt._core = core
    return flt, parts, consumer


def test_a_source_delivered_to_its_boundary_schedules_its_announcement() -> None:
    flt, parts, consumer = _filter()
    flt.delivered({("t", 0): 48, ("t", 1): 70, ("t", 2): 5})
    assert [parts[("t", p)].position for p in (0, 1, 2)] == [49, 71, 6]
    assert parts[("t", 0)].ann.state is AnnounceState.IDLE  # 49 < 50: not there yet
    flt.delivered({("t", 0): 49})
    assert parts[("t", 0)].ann.state is not AnnounceState.IDLE  # delivered up to 50
    # The stored offset stays below the unannounced boundary (KIP-253's order).
    assert consumer.stored == [[(0, 49), (1, 71), (2, 6)], [(0, 49)]]


def test_only_a_source_has_marks_to_check() -> None:
    gates = GateEvaluator(HISTORY)
    for partition in range(4):
        assert gates.has_source_marks(partition) == bool(gates.source_marks(partition))
    assert gates.has_source_marks(0) and not gates.has_source_marks(2)
