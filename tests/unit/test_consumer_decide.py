"""The consumer's gate decision (``ordered/consumer/judge.py``): one view per decision.

Pure logic over a stand-in core: the only I/O of a decision is the read of the group's
committed offsets, which a recording stand-in answers here.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

from linear_hash.gating import EpochInfo, GateEvaluator
from ordered.consumer.judge import GateDecider
from ordered.consumer.partition import GateEvent, PartitionGate, PartState

# Epoch 1: partition 0's keys move to 2 and partition 1's to 3 (an expansion 2 -> 4).
HISTORY = [
    EpochInfo(0, True),
    EpochInfo(1, True, ((0, 2), (1, 3)), {2: 0, 3: 0, 0: 50, 1: 60}),
]


class Committed:
    """A consumer's ``committed``: answers from a dict, records each request."""

    def __init__(self, offsets: dict[int, int], fail: bool = False) -> None:
        self.offsets = offsets
        self.fail = fail
        self.requests: list[list[int]] = []

    def committed(self, partitions: list[TopicPartition], timeout: float) -> list[Any]:
        self.requests.append([tp.partition for tp in partitions])
        if self.fail:
            raise KafkaException(KafkaError(KafkaError._TIMED_OUT))
        return [
            TopicPartition(tp.topic, tp.partition, self.offsets.get(tp.partition, -1001))
            for tp in partitions
        ]


class Probe:
    def log_start(self, topic: str, partition: int) -> int:
        return 0

    def gate_log_start(self, topic: str, partition: int) -> int:
        return 0


def setup(
    offsets: dict[int, int], fail: bool = False
) -> tuple[GateDecider, Any, list[tuple[Any, ...]], GateEvaluator]:
    """A decider over topic ``t`` with HISTORY; the log of its events and fires."""
    log: list[tuple[Any, ...]] = []
    parts = {("t", p): PartState("t", p, PartitionGate("t", p)) for p in (2, 3)}
    core = SimpleNamespace(
        consumer=Committed(offsets, fail),
        request_timeout=1.0,
        known_commits={},
        parts=parts,
        replay_guard=True,
        config=SimpleNamespace(ordered=SimpleNamespace(gate_poll_interval_ms=100)),
        events=SimpleNamespace(gate_check=lambda t, p: log.append(("check", p))),
        fire=lambda part, event, **kw: log.append(("fire", part.partition, event, kw)),
    )
    return GateDecider(core, Probe(), prompt=True), core, log, GateEvaluator(HISTORY)  # type: ignore[arg-type]


def test_one_decision_reads_the_committed_offsets_once_for_every_ask() -> None:
    decider, core, _log, gates = setup({0: 50, 1: 10})
    asks = [(core.parts[("t", 2)], 0), (core.parts[("t", 3)], 0)]
    verdicts = list(decider.decide("t", gates, asks))
    assert core.consumer.requests == [[0, 1]]
    assert [(v.part.partition, v.open) for v in verdicts] == [(2, True), (3, False)]


def test_the_view_counts_own_commits_and_caps_to_own_positions() -> None:
    decider, core, _log, gates = setup({0: 50, 1: 10})
    core.known_commits[("t", 1)] = 60  # committed here, not visible in Kafka yet
    owned = PartState("t", 0, PartitionGate("t", 0))
    owned.position = 20  # this consumer owns 0 and was sought back to 20 (replay rule 2)
    core.parts[("t", 0)] = owned
    asks = [(core.parts[("t", 2)], 0), (core.parts[("t", 3)], 0)]
    assert [v.open for v in decider.decide("t", gates, asks)] == [False, True]


def test_recheck_fires_in_order_and_collects_waits() -> None:
    decider, core, log, gates = setup({0: 50, 1: 10})
    held = [core.parts[("t", 2)], core.parts[("t", 3)]]
    for part in held:
        part.gate.held = 0
    waits = decider.recheck("t", gates, held, waits=True)
    assert waits == {1: 60}
    assert log == [
        ("check", 2),
        ("fire", 2, GateEvent.RECHECK_OPEN, {"cap": 0}),
        ("check", 3),
    ]


@pytest.mark.parametrize("path", ["reach", "recheck"])
def test_kafka_silent_opens_nothing(path: str) -> None:
    decider, core, log, gates = setup({0: 50, 1: 60}, fail=True)
    core.layouts = SimpleNamespace(usable=True, topics={"t": SimpleNamespace(gates=gates)})
    core.check_gates_at = lambda when: log.append(("at", when))
    part = core.parts[("t", 2)]
    if path == "reach":
        assert not decider.reach(part, 0, [])
        # Judged (and counted) though Kafka did not answer: the record is held.
        assert log == [
            ("check", 2),
            ("fire", 2, GateEvent.GATE_CLOSED, {"held": 0}),
            ("at", 0.0),
        ]
    else:
        part.gate.held = 0
        # Nothing decided: no check counted, no event, and no waits to declare.
        assert decider.recheck("t", gates, [part], waits=True) is None
        assert log == []
