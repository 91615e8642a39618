"""``ordered compact``: drop a topic's old layout epochs that no record in Kafka needs.

An old sealed epoch goes once the log start offset of every partition it has a boundary
on is at or past that boundary (trims, time retention and consumed retention move log
starts), oldest first; the last such epoch stays as the base. ``--dry-run`` shows what
would go and what holds the rest; nothing is written. The coordinator daemon does the
same for every adopted topic after each sweep.
"""

from __future__ import annotations

import argparse

from coordinator.trims.history_compaction import compact_topic
from ordered.cli.admin import common_arguments, connect
from ordered.cli.options import topic_name
from ordered.cli.output import emit

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``compact``."""
    parser = sub.add_parser(
        "compact",
        help="drop old layout epochs whose boundaries every log start has passed",
    )
    parser.add_argument("topic", metavar="TOPIC", type=topic_name, help="the Kafka topic")
    parser.add_argument(
        "--dry-run", action="store_true", help="show what would be dropped; write nothing"
    )
    common_arguments(parser, None)
    parser.set_defaults(func=_compact)


def _compact(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        report = compact_topic(conn.store, conn.admin, args.topic, dry_run=args.dry_run)
    emit(report.to_dict(), report.text(), args.json)
    return 0
