"""The layout checks' token bucket: the rate holds on average, bursts are bounded."""

from __future__ import annotations

from fakes import FakeClock
from hypothesis import given
from hypothesis import strategies as st

from ordered.consumer.pacing import CHECK_BURST, CheckPacer


def test_a_fresh_pacer_lets_a_burst_go_then_one_check_per_slot() -> None:
    clock = FakeClock(100.0)
    pacer = CheckPacer(clock)
    for _ in range(CHECK_BURST):
        assert pacer.due_in(0.2) == 0.0
        pacer.sent(0.2)
    assert abs(pacer.due_in(0.2) - 0.2) < 1e-9
    clock.now += 0.1
    assert abs(pacer.due_in(0.2) - 0.1) < 1e-9
    clock.now += 0.1
    assert pacer.due_in(0.2) == 0.0


def test_a_quiet_spell_refills_no_more_than_the_burst() -> None:
    clock = FakeClock(100.0)
    pacer = CheckPacer(clock)
    clock.now += 3600
    for _ in range(CHECK_BURST):
        assert pacer.due_in(0.5) == 0.0
        pacer.sent(0.5)
    assert pacer.due_in(0.5) > 0.0


def test_no_slot_means_no_pacing() -> None:
    pacer = CheckPacer(FakeClock(100.0))
    for _ in range(100):
        pacer.sent(0.0)
        assert pacer.due_in(0.0) == 0.0


@given(
    slot=st.floats(0.01, 2.0),
    steps=st.lists(st.floats(0.0, 1.0), min_size=1, max_size=200),
)
def test_checks_sent_when_due_never_exceed_the_burst_plus_the_rate(
    slot: float, steps: list[float]
) -> None:
    clock = FakeClock(100.0)
    pacer = CheckPacer(clock)
    start = clock.now
    sent = 0
    for step in steps:
        clock.now += step
        while pacer.due_in(slot) == 0.0:
            pacer.sent(slot)
            sent += 1
    assert sent <= CHECK_BURST + (clock.now - start) / slot + 1e-6
