"""A failed layout check names what failed, even when kazoo's error has no text."""

from __future__ import annotations

import logging

import pytest
from kazoo.exceptions import ConnectionLoss

from ordered.consumer.layouts import FetchCheck, LayoutTracker


class _Lost:
    """An async result whose ``get`` fails as kazoo's do when the connection drops."""

    def get(self, timeout: float | None = None) -> None:
        raise ConnectionLoss()


def test_a_failed_check_never_ends_in_an_empty_message(caplog: pytest.LogCaptureFixture) -> None:
    assert str(ConnectionLoss()) == ""  # why the message was empty
    tracker = object.__new__(LayoutTracker)  # only the check's failure path is exercised
    tracker._check_timeout = 1.0  # type: ignore[attr-defined]
    caplog.set_level(logging.WARNING, logger="ordered.consumer.layouts")
    assert tracker.finish_check(FetchCheck(_Lost(), ())) is None
    [line] = [r.getMessage() for r in caplog.records if "layout check failed" in r.getMessage()]
    assert line == "layout check failed (records held until it succeeds): ConnectionLoss"
