"""The consumed retention's cut-off: never negative, never an overflow (issue 29)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from coordinator.trims.retention import retention_cutoff_ms
from ordered.cli import main
from ordered.cli.trim import MAX_CONSUMED_MS

NOW = 1_790_000_000.0  # 2026, in seconds


def test_an_ordinary_retention_cuts_at_now_minus_it() -> None:
    assert retention_cutoff_ms(NOW, 60_000) == 1_790_000_000_000 - 60_000


@pytest.mark.parametrize("consumed_ms", [10**23, 10**16, 2**63 - 1, 2**64, 1_790_000_000_001])
def test_a_retention_reaching_before_1970_cuts_nowhere(consumed_ms: int) -> None:
    assert retention_cutoff_ms(NOW, consumed_ms) is None


def test_the_longest_retention_the_cli_takes_cuts_after_1970() -> None:
    cutoff = retention_cutoff_ms(NOW, MAX_CONSUMED_MS)
    assert cutoff is not None and cutoff > 0


@settings(max_examples=500, deadline=None)
@given(now=st.floats(allow_nan=True, allow_infinity=True), ms=st.integers(-(2**80), 2**80))
def test_the_cutoff_is_a_timestamp_kafka_takes_or_none(now: float, ms: int) -> None:
    cutoff = retention_cutoff_ms(now, ms)
    assert cutoff is None or 0 <= cutoff <= 2**63 - 1


@pytest.mark.parametrize("value", ["99999999999999999999999", "10000000000000000", "1000000000001"])
def test_the_command_line_refuses_a_retention_past_its_range(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # Refused while parsing: exit 2 before any server is asked (none is configured).
    assert main(["retention", "some-topic", "--consumed-ms", value]) == 2
    err = capsys.readouterr().err
    assert "--consumed-ms" in err and "between 1 and 1000000000000" in err, err
