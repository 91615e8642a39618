"""The ``ordered`` command line.

Exit codes: 0 success, 1 an operation failed (the message says why), 2 a usage error
(bad arguments or a request that cannot be done as asked).
"""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

from coordinator.errors import OrderedError, UsageError
from coordinator.zk import KAZOO_LOGGER
from ordered.cli import admin, chaos, cluster, demo, trim
from ordered.cli.output import error

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """Return the argument parser of the ``ordered`` command."""
    parser = argparse.ArgumentParser(
        prog="ordered",
        description="Ordered Kafka: grow and shrink topics while every key keeps its order.",
    )
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    cluster.add_parser(sub)
    admin.add_parsers(sub)
    trim.add_parsers(sub)
    demo.add_parser(sub)
    chaos.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the ``ordered`` command and return its exit code."""
    # kazoo logs every refused connection; the command reports one error instead.
    logging.getLogger(KAZOO_LOGGER).setLevel(logging.CRITICAL)
    parser = build_parser()
    args = parser.parse_args(argv)
    as_json = bool(getattr(args, "json", False))
    try:
        code: int = args.func(args)
    except UsageError as exc:
        error(str(exc), as_json, type(exc).__name__)
        return 2
    except OrderedError as exc:
        error(str(exc), as_json, type(exc).__name__)
        return 1
    except KeyboardInterrupt:
        error("interrupted", as_json, "KeyboardInterrupt")
        return 130
    return code


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
