"""``ordered list``: every adopted topic with its layout, epoch and state.

Reads ZooKeeper only, so it answers while Kafka is down.
"""

from __future__ import annotations

import argparse
from typing import Any

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import TopicRecord
from ordered.cli.admin import common_arguments, connect
from ordered.cli.output import emit

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``list``."""
    p = sub.add_parser("list", help="list the adopted topics with their layout, epoch and state")
    common_arguments(p, None)
    p.set_defaults(func=_list)


def _state(record: TopicRecord) -> str:
    if record.pending is not None:
        return f"pending epoch {record.pending}"
    return "sealed" if record.ordered else "unordered"


def _list(args: argparse.Namespace) -> int:
    rows: list[dict[str, Any]] = []
    with connect(args) as conn:
        for topic in conn.store.list_topics():
            try:
                record = conn.store.get_topic(topic)
            except StoreError as exc:
                # One bad record must not hide the others.
                rows.append({"name": topic, "error": str(exc)})
                continue
            if record is None:
                continue
            rows.append({"name": topic, "state": _state(record), **record.to_dict()})
        root = conn.store.root
    header = ("TOPIC", "INITIAL", "ACTIVE", "EPOCH", "STATE", "ALGORITHM")
    table = [header] + [
        (r["name"], "-", "-", "-", "error: " + r["error"], "-")
        if "error" in r
        else (
            r["name"],
            str(r["initial"]),
            str(r["active"]),
            str(r["epoch"]),
            r["state"],
            r["algorithm"],
        )
        for r in rows
    ]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    text = "\n".join(
        "  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in table
    )
    if not rows:
        text = f"no adopted topic under the store root {root}"
    emit({"root": root, "topics": rows}, text, args.json)
    return 0
