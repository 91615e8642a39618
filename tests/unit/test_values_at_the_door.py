"""Every value at the door: the settings table and every CLI parser, fed extremes.

Issue 29 found values that were accepted and then failed silently downstream (a
session timeout kazoo cannot send, a retention Kafka cannot take, an autoscale target
no topic can reach). This property test feeds generated extremes (huge, negative and
zero integers, NaN, infinities, 1e30, empty and odd strings) to each ``ordered.``
setting and to every option of every ``ordered`` command, parsing only (no server is
asked), and asserts each one ends in a clear error (``ConfigError``; argparse's exit 2
with a message) or a working value (in the range the code downstream takes), never an
uncaught exception and never a hang. Each test prints its number of cases (``-s``).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from coordinator.kernel.errors import CommandLineError, ConfigError
from ordered.cli import build_parser
from ordered.settings import INT32_MAX, INT64_MAX, SETTINGS, IntRange, Role, parse_settings

HANG_S = 5.0
"""One parse taking longer than this counts as a hang."""

_INT_EXTREMES = [0, 1, -1, 2**31 - 1, 2**31, 2**32, 2**63 - 1, 2**63, 2**64, -(2**63) - 1, 10**12,
                 10**23, 10**400]  # fmt: skip
_FLOAT_EXTREMES = [0.0, -0.0, 1e-320, 1e30, -1e30, 1e308, math.inf, -math.inf, math.nan]
_ODD_TEXT = ["", " ", "\t", "-", "--", "+", "0x10", "1_000", "1e3", "١٢", "²", "\ud800", "\x00",
             "nan", "inf", "-inf", "1e400", "9" * 5000, "/", "//", "/a/../b", "a:b:c", "[::1]",
             "[::1]:99999", "h:0", "h:65536", "h:2181/", "h:2181//x", "ü" * 300]  # fmt: skip

values = st.one_of(
    st.sampled_from(_INT_EXTREMES),
    st.integers(),
    st.sampled_from(_FLOAT_EXTREMES),
    st.floats(),
    st.sampled_from(_ODD_TEXT),
    st.text(max_size=40),
    st.integers().map(str),
    st.sampled_from(_INT_EXTREMES).map(str),
    st.booleans(),
    st.none(),
    st.lists(st.integers(), max_size=3),
    st.binary(max_size=8),
)


def _working(setting_parse: Any, value: Any, unset: Any = None) -> None:
    """A parsed value the code downstream can take (``unset``: the setting's default,
    which an empty string may stand for, as in Kafka's properties files)."""
    if isinstance(setting_parse, IntRange):
        assert isinstance(value, int) and not isinstance(value, bool)
        assert setting_parse.minimum <= value <= setting_parse.maximum <= INT32_MAX
    if isinstance(value, str):
        value.encode("utf-8")
        assert value == value.strip() and (value or value == unset)
    if isinstance(value, float):
        assert math.isfinite(value)


def _many(examples: int) -> Any:
    """Hypothesis settings of these sweeps: many examples, no deadline, no saved database."""
    return settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )


def test_the_settings_table_takes_extremes() -> None:
    counts: Counter[str] = Counter()

    @_many(3000)
    @given(index=st.integers(0, len(SETTINGS) - 1), value=values)
    def one(index: int, value: Any) -> None:
        s = SETTINGS[index]
        started = time.monotonic()
        try:
            parsed = parse_settings({s.key: value}, Role.ALL, require=False)
        except ConfigError as exc:
            assert s.key in str(exc), exc
            counts["refused"] += 1
        else:
            _working(s.parse, parsed[s.attr], s.default)
            counts["accepted"] += 1
        counts["cases"] += 1
        assert time.monotonic() - started < HANG_S, f"{s.key}={value!r} took too long"

    one()
    print(
        f"\nsettings table: {counts['cases']} generated cases ({counts['accepted']} accepted, "
        f"{counts['refused']} refused with ConfigError), crashes 0, hangs 0"
    )
    assert counts["cases"] >= 1000 and counts["refused"] and counts["accepted"]


# --- the command line -------------------------------------------------------------


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _commands(child, (*path, name))
            return
    yield path, parser


_REQUIRED = {"--to": "3", "--duration": "60", "--seed": "1"}
"""A working value of each required option (the one under test is replaced)."""


def _options() -> list[tuple[tuple[str, ...], str, argparse.ArgumentParser]]:
    out = []
    for path, parser in _commands(build_parser()):
        for action in parser._actions:
            if action.option_strings and action.nargs != 0 and action.dest != "help":
                out.append((path, action.option_strings[-1], parser))
    return out


OPTIONS = _options()


def _argv(
    path: tuple[str, ...], parser: argparse.ArgumentParser, flag: str, text: str
) -> list[str]:
    argv = list(path)
    for action in parser._actions:
        if not action.option_strings and action.nargs is None:
            argv.append("t")  # the TOPIC positional
        elif action.required and action.option_strings and action.option_strings[-1] != flag:
            argv += [action.option_strings[-1], _REQUIRED[action.option_strings[-1]]]
    return [*argv, f"{flag}={text}"]


def _working_arg(value: Any) -> None:
    """A parsed option value the code downstream can take (64-bit ints, finite floats
    below 1e10: no count, wait or rate of the tool is larger)."""
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int):
        assert -(2**63) <= value <= INT64_MAX, value
    if isinstance(value, float):
        assert math.isfinite(value) and abs(value) <= 1e10, value
    if isinstance(value, list):
        for item in value:
            _working_arg(item)


cli_text = st.one_of(
    st.sampled_from([str(v) for v in _INT_EXTREMES + _FLOAT_EXTREMES] + _ODD_TEXT),
    st.integers().map(str),
    st.floats().map(repr),
    st.text(max_size=30),
)


def test_every_cli_option_takes_extremes() -> None:
    counts: Counter[str] = Counter()
    parser = build_parser()

    @_many(4000)
    @given(index=st.integers(0, len(OPTIONS) - 1), text=cli_text)
    def one(index: int, text: str) -> None:
        path, flag, sub = OPTIONS[index]
        argv = _argv(path, sub, flag, text)
        err = io.StringIO()
        started = time.monotonic()
        with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
            try:
                args = parser.parse_args(argv)
            except SystemExit as exc:
                assert exc.code == 2, (argv, exc.code)
                assert "error:" in err.getvalue() and "Traceback" not in err.getvalue()
                counts["refused"] += 1
            else:
                check = getattr(args, "check", None)
                try:
                    if check is not None:
                        check(args)
                except CommandLineError as exc:
                    assert str(exc), argv
                    counts["refused"] += 1
                else:
                    for value in vars(args).values():
                        if not callable(value):
                            _working_arg(value)
                    counts["accepted"] += 1
        counts["cases"] += 1
        counts[" ".join(path)] += 1
        assert time.monotonic() - started < HANG_S, f"{argv} took too long"

    one()
    commands = len({" ".join(p) for p, _, _ in OPTIONS})
    print(
        f"\ncommand line: {counts['cases']} generated cases over {len(OPTIONS)} options of "
        f"{commands} commands ({counts['accepted']} accepted, {counts['refused']} refused "
        "with exit 2), crashes 0, hangs 0"
    )
    assert counts["cases"] >= 1000 and counts["refused"] and counts["accepted"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["autoscale", "t", "--max", "8"], "need --target-records-per-s"),
        (["autoscale", "t", "--off", "--max", "8"], "--off removes the policy"),
        (["autoscale", "t", "--target-records-per-s", "5", "--max", "100000"], "<= 10000"),
        (["autoscale", "t", "--target-records-per-s", "1e30"], "<= 10000000"),
        (["autoscale", "t", "--target-bytes-per-s", "inf"], "finite"),
        (["autoscale", "t", "--target-records-per-s", "5", "--up-window", "0.5"], ">= 1"),
        (["retention", "t", "--consumed-ms", "99999999999999999999999"], "between 1 and"),
        (["coordinator", "--session-timeout", "1e30"], "<= 2147483"),
        (["acl", "show", "--connect-timeout", "nan"], "finite"),
        (["cluster", "up", "--timeout", "-1"], "> 0"),
        (["trim", "t", "--partition", str(2**31), "--before", "1"], "<= 2147483647"),
        (["trim", "t", "--partition", "0", "--before", str(2**64)], "<= 9223372036854775807"),
        (["chaos", "--duration", "nan", "--seed", "1"], "finite"),
        (["demo", "--producers", "0"], ">= 1"),
    ],
)
def test_issue_29_values_are_usage_errors(argv: list[str], message: str) -> None:
    """The issue's findings, one by one: exit 2 with the flag, the value and the range."""
    from ordered.cli import main

    err = io.StringIO()
    with contextlib.redirect_stderr(err), contextlib.redirect_stdout(io.StringIO()):
        parser = build_parser()
        try:
            args = parser.parse_args(argv)
        except SystemExit as exc:
            assert exc.code == 2
        else:
            check = getattr(args, "check", None)
            assert check is not None, argv
            with pytest.raises(CommandLineError, match=message.replace("+", r"\+")):
                check(args)
            assert main(argv) == 2
            return
    assert message in err.getvalue(), err.getvalue()
