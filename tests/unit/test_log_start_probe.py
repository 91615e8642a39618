"""The log-start probe (``ordered/consumer/probe.py``): what it asks Kafka, and when.

Pure logic: the probe's client is a recording stand-in (the probe makes its real one
lazily, on its first request, so a stand-in set before that is the one asked).
"""

from __future__ import annotations

from typing import Any

import pytest
from confluent_kafka import TopicPartition
from fakes import FakeClock

from ordered.consumer.probe import LOG_START_TTL, SEEN_TTL, LogStartProbe


class Client:
    """A client's ``get_watermark_offsets``: answers ``(low, high)``, records each ask."""

    def __init__(self, low: int) -> None:
        self.low = low
        self.asked: list[tuple[str, int]] = []

    def get_watermark_offsets(self, tp: TopicPartition, timeout: float) -> tuple[int, int]:
        self.asked.append((tp.topic, tp.partition))
        return self.low, self.low + 100


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def probe_with(
    client: Client, seen: dict[tuple[str, int], int] | None, clock: FakeClock
) -> LogStartProbe:
    def seen_of(topic: str, partition: int) -> int | None:
        return None if seen is None else seen.get((topic, partition))

    probe = LogStartProbe({"bootstrap.servers": "unused:1"}, 1.0, seen_of, clock=clock)
    probe._client = client
    return probe


def test_a_log_start_the_fetches_saw_answers_the_first_ask_without_a_request(
    clock: FakeClock,
) -> None:
    client = Client(low=7)
    probe = probe_with(client, {("t", 0): 5}, clock)
    assert probe.gate_log_start("t", 0) == 5
    clock.now += SEEN_TTL / 2
    assert probe.gate_log_start("t", 0) == 5
    assert client.asked == []


def test_after_its_short_trust_the_probe_asks_kafka(clock: FakeClock) -> None:
    client = Client(low=7)
    probe = probe_with(client, {("t", 0): 5}, clock)
    probe.gate_log_start("t", 0)
    clock.now += SEEN_TTL
    assert probe.gate_log_start("t", 0) == 7
    assert client.asked == [("t", 0)]
    # Kafka's answer is reused for the probe's own, longer, time.
    clock.now += LOG_START_TTL - 0.01
    assert probe.gate_log_start("t", 0) == 7
    assert client.asked == [("t", 0)]


def test_a_partition_assigned_to_another_member_is_asked_at_once(clock: FakeClock) -> None:
    client = Client(low=7)
    probe = probe_with(client, {("t", 0): 5}, clock)
    assert probe.gate_log_start("t", 1) == 7
    assert client.asked == [("t", 1)]


def test_the_answer_never_goes_below_one_seen_before(clock: FakeClock) -> None:
    client = Client(low=3)  # a lagging replica's answer: below what was seen
    probe = probe_with(client, {("t", 0): 5}, clock)
    probe.gate_log_start("t", 0)
    clock.now += SEEN_TTL
    assert probe.gate_log_start("t", 0) == 5


def test_a_replays_start_is_always_kafkas_answer(clock: FakeClock) -> None:
    """It is stored as the offset to commit: a lower bound from the fetches (0 before
    the first one) would commit an offset below the log."""
    client = Client(low=7)
    probe = probe_with(client, {("t", 0): 0}, clock)
    assert probe.gate_log_start("t", 0) == 0  # the gate rule takes what was seen
    assert probe.log_start("t", 0) == 7  # the replay asks Kafka all the same
    assert client.asked == [("t", 0)]
    assert probe.gate_log_start("t", 0) == 7  # and the gate rule takes the better answer


def test_without_seen_every_first_ask_is_a_request(clock: FakeClock) -> None:
    client = Client(low=7)
    probe = probe_with(client, None, clock)
    probe._seen = None
    assert probe.gate_log_start("t", 0) == 7
    assert client.asked == [("t", 0)]


def test_the_consumer_passes_librdkafkas_cached_log_start() -> None:
    from ordered.consumer.state import Core

    class Consumer:
        def __init__(self, low: int) -> None:
            self.low = low

        def get_watermark_offsets(self, tp: Any, cached: bool = False) -> tuple[int, int]:
            assert cached, "no request: librdkafka's cached watermarks only"
            return self.low, 90

    core: Any = Core.__new__(Core)
    core.parts = {("t", 0): object()}
    core.consumer = Consumer(12)
    assert core.log_start_seen("t", 0) == 12 and core.log_end("t", 0) == 90
    core.consumer = Consumer(-1001)  # assigned, not fetched yet: nothing is below 0
    assert core.log_start_seen("t", 0) == 0
    assert core.log_start_seen("t", 1) is None  # not assigned here: the probe asks Kafka
