"""The ``ordered`` command line.

Exit codes (:data:`EXIT_CODES`), as Kafka's own tools keep them apart: 0 success, 1 the
operation failed or the state does not allow it (the message says why: a topic that
is not adopted, a server that does not answer, a barrier that timed out), 2 the
command line itself is wrong (an unknown flag, a bad value, a missing argument), 130
interrupted. A reader that leaves early (``ordered list | head -1``) ends the command
with 0, as it does a Unix tool. No traceback reaches the user: an unexpected error is
reported in one line (set ``ORDERED_DEBUG=1`` to see the traceback).
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from collections.abc import Sequence
from importlib import metadata
from typing import NoReturn

from coordinator.kernel.errors import OrderedError
from ordered.cli import (
    acl,
    admin,
    autoscale,
    bench,
    chaos,
    cluster,
    compact,
    demo,
    features,
    jvm,
    listing,
    trim,
)
from ordered.cli.options import CommandLineError, HelpFormatter
from ordered.cli.output import configure, error, json_mode

__all__ = ["EXIT_CODES", "build_parser", "main", "version"]

EXIT_CODES = {
    0: "success",
    1: "the operation failed or the state does not allow it (the message says why)",
    2: "usage error: the command line is wrong (unknown flag, bad value, missing argument)",
    130: "interrupted (Ctrl-C)",
}
"""The exit codes of every ``ordered`` command."""

_EPILOG = "exit codes: " + "; ".join(f"{code} {text}" for code, text in EXIT_CODES.items())


def version() -> str:
    """The installed ``ordered-kafka`` version (``unknown`` when not installed)."""
    try:
        return metadata.version("ordered-kafka")
    except metadata.PackageNotFoundError:
        return "unknown"


class _Parser(argparse.ArgumentParser):
    """argparse with the usage error in JSON (on stdout and stderr) under ``--json``."""

    def error(self, message: str) -> NoReturn:
        if json_mode():
            error(f"{self.prog}: {message}", True, "UsageError")
            self.exit(2)
        super().error(message)


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``ordered`` command."""
    parser = _Parser(
        prog="ordered",
        description="Ordered Kafka: grow and shrink topics while every key keeps its order.",
        epilog=_EPILOG,
        formatter_class=HelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub: argparse._SubParsersAction[argparse.ArgumentParser] = parser.add_subparsers(
        dest="command",
        required=True,
        metavar="COMMAND",
        parser_class=_Parser,
    )
    cluster.add_parser(sub)
    admin.add_parsers(sub)
    listing.add_parser(sub)
    trim.add_parsers(sub)
    compact.add_parser(sub)
    features.add_parser(sub)
    autoscale.add_parsers(sub)
    bench.add_parsers(sub)
    acl.add_parser(sub)
    demo.add_parser(sub)
    chaos.add_parser(sub)
    jvm.add_parser(sub)
    for choice in sub.choices.values():
        _inherit(choice)
    return parser


def _inherit(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)command the defaults-showing help and the exit-code epilog."""
    parser.formatter_class = HelpFormatter
    if parser.epilog is None:
        parser.epilog = _EPILOG
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in action.choices.values():
                _inherit(child)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ordered`` command and return its exit code."""
    try:
        code = _main(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader left (`ordered list | head -1`): as for a Unix tool, not an error.
        _quiet_stdout()
        return 0
    return code


def _main(argv: Sequence[str] | None) -> int:
    args_list = list(sys.argv[1:] if argv is None else argv)
    as_json = "--json" in args_list
    configure(as_json)
    parser = build_parser()
    try:
        args = parser.parse_args(args_list)
    except SystemExit as exc:
        return int(exc.code or 0) if isinstance(exc.code, int) else 2
    try:
        code: int = args.func(args)
    except CommandLineError as exc:
        error(str(exc), as_json, "UsageError")
        return 2
    except OrderedError as exc:
        error(str(exc), as_json, type(exc).__name__)
        return 1
    except KeyboardInterrupt:
        error("interrupted", as_json, "KeyboardInterrupt")
        return 130
    except BrokenPipeError:
        raise  # handled by main
    except Exception as exc:  # the safety net: no traceback reaches a user
        if os.environ.get("ORDERED_DEBUG"):
            traceback.print_exc()
        error(
            f"unexpected {type(exc).__name__}: {exc} (set ORDERED_DEBUG=1 for the traceback)",
            as_json,
            type(exc).__name__,
        )
        return 1
    return code


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's last flush must not fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):
        pass  # no real file descriptor (a test's captured stdout): nothing to flush


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
