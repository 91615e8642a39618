"""``ordered trim`` and ``ordered retention``: DeleteRecords and consumed retention.

``ordered trim TOPIC`` takes one target: ``--partition P --before OFFSET``,
``--consumed`` (every partition to the minimum committed offset over the interested
groups, never past the high watermark) or ``--offset-json-file F`` (the format of
Kafka's ``kafka-delete-records`` tool). Everything is validated before anything is
sent. Per partition it prints the requested offset, the low watermark and the leader's
log start offset (``-1``: unknown). Exit code 1 when a partition is not trimmed.

``ordered retention TOPIC --consumed-ms MS`` sets the topic's consumed retention: the
coordinator daemon's sweep (``ordered coordinator``) applies it, so it takes effect only
while a daemon runs; ``--off`` clears it; neither shows it.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path
from typing import Any, Final

from coordinator.groups.interest import topic_interest
from coordinator.kernel.errors import NotAdoptedError, TrimRequestError
from coordinator.kernel.store import RetentionRecord
from coordinator.trims.retention import consumed_targets
from coordinator.trims.trim import Trimmer, TrimReport, validate
from ordered.cli.admin import Connections, common_arguments, connect
from ordered.cli.options import (
    CommandLineError,
    IntArg,
    interest_arguments,
    interest_settings,
    milliseconds,
    partition_index,
    topic_name,
)
from ordered.cli.output import emit, error, progress
from ordered.settings import INT64_MAX

__all__ = ["MAX_CONSUMED_MS", "add_parsers", "read_offset_file"]


MAX_CONSUMED_MS: Final = 10**12
"""The longest consumed retention, ms (about 31.7 years): the sweeper asks Kafka for the
first record newer than now minus it, and that time must not fall before 1970 (Kafka
takes no negative timestamp; a negative one means "latest" or "earliest" to it)."""

_consumed_ms = IntArg(1, MAX_CONSUMED_MS, "milliseconds")
_any_offset = IntArg(-INT64_MAX - 1, INT64_MAX, "an offset")


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``trim`` and ``retention``."""
    trim = sub.add_parser(
        "trim",
        help="delete records below an offset (DeleteRecords), per partition or as consumed",
    )
    trim.add_argument(
        "topic",
        metavar="TOPIC",
        type=topic_name,
        nargs="?",
        default=None,
        help="the topic (optional with --offset-json-file)",
    )
    trim.add_argument(
        "--partition", type=partition_index, default=None, metavar="P", help="the partition to trim"
    )
    trim.add_argument(
        "--before",
        type=_any_offset,
        default=None,
        metavar="OFFSET",
        help="with --partition: delete the records below OFFSET",
    )
    trim.add_argument(
        "--consumed",
        action="store_true",
        help="trim every partition to the minimum committed offset of the interested groups",
    )
    trim.add_argument(
        "--offset-json-file",
        type=Path,
        default=None,
        metavar="FILE",
        help='kafka-delete-records format: {"partitions": [{"topic": T, "partition": P, '
        '"offset": O}], "version": 1} (offset -1: the high watermark)',
    )
    trim.add_argument(
        "--leader-only",
        action="store_true",
        help="succeed once the leader truncated, even while a follower lags",
    )
    trim.add_argument(
        "--timeout-ms",
        type=milliseconds,
        default=30_000,
        help="how long to wait for the replicas",
    )
    trim.add_argument("--dry-run", action="store_true", help="validate and report; send nothing")
    interest_arguments(trim)
    common_arguments(trim, None)
    trim.set_defaults(func=_trim)

    retention = sub.add_parser(
        "retention",
        help="show or set a topic's consumed retention (KIP-68); the coordinator daemon runs it",
    )
    retention.add_argument("topic", metavar="TOPIC", type=topic_name, help="the Kafka topic")
    group = retention.add_mutually_exclusive_group()
    group.add_argument(
        "--consumed-ms",
        type=_consumed_ms,
        default=None,
        metavar="MS",
        help="trim records every interested group committed and older than MS milliseconds; "
        "the coordinator daemon (`ordered coordinator`) runs these trims every "
        "--sweep-interval, so this only takes effect while a daemon runs",
    )
    group.add_argument("--off", action="store_true", help="turn consumed retention off")
    common_arguments(retention, None)
    retention.set_defaults(func=_retention)


def read_offset_file(path: Path) -> dict[tuple[str, int], int]:
    """Read a ``kafka-delete-records`` offset file.

    Raises:
        TrimRequestError: The file is unreadable, not JSON, or not in the format.
    """
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise TrimRequestError(f"cannot read {path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise TrimRequestError(f"{path} is not JSON: {exc}") from None
    if not isinstance(raw, dict) or not isinstance(raw.get("partitions"), list):
        raise TrimRequestError(
            f'{path}: expected {{"partitions": [{{"topic": .., "partition": .., "offset": ..}}], '
            '"version": 1}'
        )
    version = raw.get("version", 1)
    if version != 1 or isinstance(version, bool):
        raise TrimRequestError(f"{path}: unsupported version {version!r} (expected 1)")
    extra = set(raw) - {"partitions", "version"}
    if extra:
        raise TrimRequestError(f"{path}: unknown field(s) {', '.join(sorted(extra))}")
    out: dict[tuple[str, int], int] = {}
    for i, entry in enumerate(raw["partitions"]):
        where = f"{path}: partitions[{i}]"
        if not isinstance(entry, dict) or set(entry) != {"topic", "partition", "offset"}:
            raise TrimRequestError(f"{where}: expected exactly topic, partition and offset")
        topic, partition, offset = entry["topic"], entry["partition"], entry["offset"]
        if not isinstance(topic, str) or not topic:
            raise TrimRequestError(f"{where}: topic must be a non-empty string")
        for name, value in (("partition", partition), ("offset", offset)):
            if isinstance(value, bool) or not isinstance(value, int):
                raise TrimRequestError(f"{where}: {name} must be an integer, got {value!r}")
        if (topic, partition) in out:
            raise TrimRequestError(f"{where}: {topic}[{partition}] is listed twice")
        out[(topic, partition)] = offset
    if not out:
        raise TrimRequestError(f"{path}: no partitions")
    return out


def _requests(
    args: argparse.Namespace, conn: Connections, holds: Holds | None = None
) -> tuple[dict[tuple[str, int], int], bool]:
    """The validated ``(topic, partition) -> offset`` of the command line; nothing sent.

    With ``--consumed``, ``holds`` receives per partition the groups at its minimum.
    """
    chosen = [
        name
        for name, on in (
            ("--partition/--before", args.partition is not None or args.before is not None),
            ("--consumed", args.consumed),
            ("--offset-json-file", args.offset_json_file is not None),
        )
        if on
    ]
    if len(chosen) != 1:
        raise CommandLineError(
            "name exactly one target: --partition P --before OFFSET, --consumed or "
            "--offset-json-file FILE" + (f" (got {', '.join(chosen)})" if chosen else "")
        )
    if args.offset_json_file is not None:
        requests = read_offset_file(args.offset_json_file)
        if args.topic is not None:
            others = sorted({t for t, _ in requests if t != args.topic})
            if others:
                raise TrimRequestError(
                    f"{args.offset_json_file} names other topics than {args.topic}: "
                    + ", ".join(others)
                )
        return validate(conn.admin, requests, allow_end=True), False
    if args.topic is None:
        raise CommandLineError("TOPIC is required unless --offset-json-file is given")
    if args.consumed:
        if conn.store.get_topic(args.topic) is None:
            raise NotAdoptedError(
                f"topic {args.topic} is not adopted: --consumed needs its interested groups "
                f"(adopt it, or name offsets with --partition/--offset-json-file)"
            )
        return _consumed(args, conn, {} if holds is None else holds), True
    if args.partition is None or args.before is None:
        raise CommandLineError("--partition and --before go together")
    return validate(conn.admin, {(args.topic, args.partition): args.before}), False


Holds = dict[int, list[dict[str, Any]]]
"""Partition -> the groups at its minimum committed offset (what holds a consumed trim)."""


def _consumed(
    args: argparse.Namespace, conn: Connections, holds: Holds
) -> dict[tuple[str, int], int]:
    topic = args.topic
    count = conn.admin.partition_count(topic)
    interest = topic_interest(conn.store, conn.admin, topic, range(count), interest_settings(args))
    if interest.unreadable:
        progress(
            "offsets unreadable, no partition trimmed: "
            + "; ".join(f"{g}: {m}" for g, m in sorted(interest.unreadable.items()))
        )
        return {}
    if not interest.holding:
        progress(f"no interested group has committed on {topic}: nothing is known to be consumed")
        return {}
    starts = conn.admin.start_offsets(topic, range(count))
    ends = conn.admin.end_offsets(topic, range(count))
    for p in range(count):
        low = interest.min_committed(p)
        at_low = interest.minimum_holders(p)
        holds[p] = [
            {
                "group": g.group,
                "committed": g.committed.get(p),
                "why": "interest but no commit" if not g.committed else f"at {g.position(p)}",
                "reason": g.reason,
            }
            for g in at_low
        ]
        named = ", ".join(f"{g['group']} ({g['why']})" for g in holds[p])
        progress(
            f"{topic}[{p}]: log {starts[p]}..{ends[p]}, minimum committed {low}"
            + (f", held by {named}" if named else "")
        )
    for g in interest.holding:
        if not g.committed:
            progress(f"{topic}: group {g.group} holds every partition at 0: {g.reason}")
    return {(topic, p): o for p, o in consumed_targets(interest, starts, ends).items()}


def _report_text(report: TrimReport) -> str:
    mode = "leader-only" if report.leader_only else "all replicas"
    lines = [
        f"trim ({mode}{', dry run' if report.dry_run else ''}): "
        f"{len(report.results)} partition(s) in {report.seconds:.2f} s"
    ]
    for r in report.results:
        lines.append(
            f"{r.topic}[{r.partition}]: {r.status.value}, requested {r.requested}, "
            f"low watermark {r.low_watermark}, leader log start {r.leader_log_start}"
            + ("" if r.error is None else f": {r.message}")
        )
    return "\n".join(lines)


def _trim(args: argparse.Namespace) -> int:
    holds: Holds = {}
    with connect(args) as conn:
        requests, consumed = _requests(args, conn, holds)
        if not requests:
            report = TrimReport((), args.leader_only, args.dry_run, 0.0)
        else:
            trimmer = Trimmer(conn.admin, progress=progress)
            report = trimmer.trim(
                requests,
                timeout=args.timeout_ms / 1000.0,
                leader_only=args.leader_only,
                dry_run=args.dry_run,
            )
    payload: dict[str, Any] = report.to_dict()
    payload["consumed"] = consumed
    if consumed:
        payload["held_by"] = {str(p): groups for p, groups in sorted(holds.items())}
    text = _report_text(report)
    for p, groups in sorted(holds.items()):
        if groups:
            names = ", ".join(f"{g['group']} ({g['why']})" for g in groups)
            text += f"\n{args.topic}[{p}]: held by {names}"
    emit(payload, text, args.json)
    if not report.ok:
        error(report.summary(), False, "TrimError")
        return 1
    return 0


def _retention(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        if conn.store.get_topic(args.topic) is None:
            raise NotAdoptedError(
                f"topic {args.topic} is not adopted (adopt it first: ordered adopt {args.topic})"
            )
        if args.off:
            was = conn.store.clear_retention(args.topic)
            record = None
            text = f"consumed retention of {args.topic}: off" + ("" if was else " (was off)")
        elif args.consumed_ms is not None:
            record = RetentionRecord(args.topic, args.consumed_ms, time.time())
            conn.store.set_retention(record)
            text = f"consumed retention of {args.topic}: {args.consumed_ms} ms"
        else:
            record = conn.store.get_retention(args.topic)
            text = f"consumed retention of {args.topic}: " + (
                "off" if record is None else f"{record.consumed_ms} ms"
            )
    emit(
        {
            "topic": args.topic,
            "consumed_ms": None if record is None else record.consumed_ms,
        },
        text,
        args.json,
    )
    return 0
