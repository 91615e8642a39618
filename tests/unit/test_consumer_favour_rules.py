"""Which partitions the source favour pauses, with fake librdkafka and state (pure rules)."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

from ordered.consumer import favour
from ordered.consumer.favour import SourceFavour
from ordered.consumer.gate import GateEvent, PartitionGate
from ordered.consumer.state import Core


class FakeConsumer:
    def __init__(self) -> None:
        self.paused: set[tuple[str, int]] = set()
        self.pause_calls = 0
        self.high: dict[int, int] = {}  # partition -> cached high watermark (-1: unknown)

    def pause(self, tps: list[Any]) -> None:
        self.pause_calls += 1
        self.paused |= {(tp.topic, tp.partition) for tp in tps}

    def get_watermark_offsets(self, tp: Any, cached: bool = False) -> tuple[int, int]:
        assert cached, "the favour must not send a request"
        return 0, self.high.get(tp.partition, -1)

    def resume(self, tps: list[Any]) -> None:
        self.paused -= {(tp.topic, tp.partition) for tp in tps}


class Gates:
    """Partition 0 gives keys away at offset 100 (a sealed epoch)."""

    def source_marks(self, partition: int) -> list[int]:
        return [100] if partition == 0 else []


def make(
    now: list[float], monkeypatch: pytest.MonkeyPatch, window: int = 100_000
) -> tuple[SourceFavour, Any, Any]:
    monkeypatch.setattr(favour.time, "monotonic", lambda: now[0])
    parts = {
        ("t", p): SimpleNamespace(topic="t", partition=p, gate=PartitionGate("t", p), position=0)
        for p in range(3)
    }
    view = SimpleNamespace(gates=Gates())
    consumer = FakeConsumer()
    core = SimpleNamespace(parts=parts, layouts=SimpleNamespace(topics={"t": view}), version=0)
    core.consumer = consumer
    core.log_end = lambda topic, partition: Core.log_end(core, topic, partition)  # type: ignore[arg-type]
    return SourceFavour(consumer, core, True, window), consumer, parts  # type: ignore[arg-type]


def step(fav: SourceFavour, now: list[float], seconds: float = 0.1) -> None:
    now[0] += seconds
    fav.service()


def test_others_pause_while_the_source_lags_and_resume_after(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    fav, consumer, parts = make(now, monkeypatch)
    step(fav, now)
    assert consumer.paused == {("t", 1), ("t", 2)}
    parts[("t", 0)].position = 100  # delivered up to the boundary
    step(fav, now)
    assert consumer.paused == set()


def test_a_source_that_stops_moving_is_not_favoured(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    fav, consumer, parts = make(now, monkeypatch)
    step(fav, now)
    assert consumer.paused == {("t", 1), ("t", 2)}
    parts[("t", 0)].position = 50
    step(fav, now, 0.5)
    assert consumer.paused == {("t", 1), ("t", 2)}
    step(fav, now, favour.STALL + 0.1)  # one late evaluation: a starved process, maybe
    assert consumer.paused == {("t", 1), ("t", 2)}
    for _ in range(favour.STALL_CHECKS):
        step(fav, now)  # no progress since: the others must not wait
    assert consumer.paused == set()


def test_pauses_of_a_gate_or_the_application_are_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    now = [1000.0]
    fav, consumer, parts = make(now, monkeypatch)
    parts[("t", 1)].gate.user_paused = True
    consumer.paused.add(("t", 1))
    step(fav, now)
    assert ("t", 2) in consumer.paused
    parts[("t", 2)].gate.fire(GateEvent.GATE_CLOSED, float("inf"), held=5)  # a gate holds it
    parts[("t", 0)].position = 100
    step(fav, now)
    # Neither the application's pause of 1 nor the gate's pause of 2 was lifted.
    assert consumer.paused == {("t", 1), ("t", 2)}
    assert not fav.paused


def test_a_source_whose_log_ends_within_the_window_is_not_favoured(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """librdkafka pre-fetches it to its end anyway; pausing the others would leave a
    fetch waiting at the broker when they are resumed."""
    now = [1000.0]
    fav, consumer, _parts = make(now, monkeypatch, window=50)
    consumer.high[0] = 120  # 120 records to go: more than the window
    step(fav, now)
    assert consumer.paused == {("t", 1), ("t", 2)}
    fav, consumer, _parts = make(now, monkeypatch, window=50)
    consumer.high[0] = 40  # the boundary (100) lies beyond the known log end
    step(fav, now)
    assert consumer.paused == set()


def test_the_others_resume_once_the_rest_of_the_log_fits_the_window(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """...before the source's delivery reaches its boundary: its fetch still has records
    to bring, so the resumed partitions join a fetch that returns at once."""
    now = [1000.0]
    fav, consumer, parts = make(now, monkeypatch, window=50)
    consumer.high[0] = 130
    step(fav, now)
    assert consumer.paused == {("t", 1), ("t", 2)}
    parts[("t", 0)].position = 79  # 51 to go
    step(fav, now)
    assert consumer.paused == {("t", 1), ("t", 2)}
    parts[("t", 0)].position = 80  # 50 to go, the boundary (100) not reached yet
    step(fav, now)
    assert consumer.paused == set()


def test_an_unknown_log_end_favours_the_source(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    fav, consumer, _parts = make(now, monkeypatch, window=50)
    step(fav, now)  # no fetch has reported a high watermark yet
    assert consumer.paused == {("t", 1), ("t", 2)}


def test_the_others_are_paused_once_not_at_every_call(monkeypatch: pytest.MonkeyPatch) -> None:
    now = [1000.0]
    fav, consumer, _parts = make(now, monkeypatch)
    for _ in range(5):
        step(fav, now)
    assert consumer.pause_calls == 1
    # A gate opened meanwhile (and resumed its partition): the core's version moved.
    consumer.paused.discard(("t", 2))
    fav._core.version += 1  # type: ignore[attr-defined]
    step(fav, now)
    assert consumer.pause_calls == 2 and consumer.paused == {("t", 1), ("t", 2)}
