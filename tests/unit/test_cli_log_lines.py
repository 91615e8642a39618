"""The CLI's log lines: timestamped in text mode, librdkafka's repeats throttled."""

from __future__ import annotations

import logging
import re

import pytest

from ordered.cli import output
from ordered.cli.output import LIBRDKAFKA_LOGGER, LogThrottle

_STAMP = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"


class _Err:
    """What the test wrote to stderr so far (pytest's capture, read as it goes)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self._capsys = capsys
        self._seen = ""

    def getvalue(self) -> str:
        self._seen += self._capsys.readouterr().err
        return self._seen


@pytest.fixture
def stderr(capsys: pytest.CaptureFixture[str]) -> _Err:
    return _Err(capsys)


def test_text_log_lines_carry_their_time(stderr: _Err) -> None:
    output.configure(False)
    try:
        logging.getLogger("ordered.test.stamp").warning("something %s", "happened")
    finally:
        output.configure(False)
    assert re.fullmatch(
        _STAMP + r" ordered: warning: ordered.test.stamp: something happened\n",
        stderr.getvalue(),
    ), stderr.getvalue()


def test_the_daemons_own_lines_carry_their_time(stderr: _Err) -> None:
    output.configure(False, logging.INFO)
    try:
        output.progress("sealed epoch 3")
    finally:
        output.configure(False)
    assert re.fullmatch(_STAMP + r" ordered: sealed epoch 3\n", stderr.getvalue())


def _refused(n: int) -> logging.LogRecord:
    return logging.LogRecord(
        LIBRDKAFKA_LOGGER,
        logging.ERROR,
        __file__,
        1,
        "FAIL [thrd:127.0.0.1:9092/bootstrap]: Connect to ipv4#127.0.0.1:9092 failed: "
        "Connection refused (after %dms in state CONNECT, %d identical error(s) suppressed)",
        (n % 7, n),
        None,
    )


def test_librdkafka_repeats_are_throttled() -> None:
    now = [0.0]
    throttle = LogThrottle(interval=30.0, clock=lambda: now[0])
    passed = []
    # A two-minute outage, a refused connection every 50 ms: 2,400 lines.
    for n in range(2400):
        now[0] = n * 0.05
        record = _refused(n)
        if throttle.filter(record):
            passed.append(record.getMessage())
    assert len(passed) == 4, passed  # one per 30 s
    assert passed[1].endswith("(599 more like it in 30 s)"), passed[1]
    other = logging.LogRecord("ordered.x", logging.ERROR, __file__, 1, "same", None, None)
    assert all(throttle.filter(other) for _ in range(3))  # other loggers untouched


@pytest.mark.parametrize(
    "name",
    [LIBRDKAFKA_LOGGER, "coordinator.autoscale.runner.librdkafka", "ordered.demo.librdkafka"],
)
def test_a_command_keeps_librdkafka_quiet_the_daemon_throttles_it(stderr: _Err, name: str) -> None:
    log = logging.getLogger(name)
    output.configure(False)
    try:
        log.error("refused")
        assert stderr.getvalue() == ""
        output.configure(False, logging.INFO)
        for _ in range(5):
            log.error("refused")
    finally:
        output.configure(False)
    assert stderr.getvalue().count("refused") == 1
