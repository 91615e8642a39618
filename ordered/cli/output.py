"""How the CLI speaks: JSON on stdout with ``--json``, plain text otherwise.

Progress and errors always go to stderr, so ``--json`` output stays parseable. With
``--json`` stderr carries JSON lines too (``{"level": .., "message": .., "time": ..}``),
never a human-readable line: :func:`configure` picks the mode once per command, before
anything is printed, and Python's ``logging`` (kazoo, the daemon) is routed the same way.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time
from typing import Any

from coordinator.client.zk import KAZOO_LOGGER

__all__ = ["configure", "emit", "error", "json_mode", "progress", "warn"]

_state = {"json": False}

# One lock for every stderr line, ours and logging's: the daemon's threads (and
# kazoo's) log at once, and a line written in two pieces ("{...}" then "\n") by
# two threads would make two JSON records share a line.
_LOCK = threading.RLock()


def configure(as_json: bool, level: int = logging.WARNING) -> None:
    """Choose plain or JSON-lines stderr for this process, and route ``logging`` there.

    Args:
        as_json: Whether the command runs with ``--json``.
        level: The lowest ``logging`` level printed (the daemon passes ``INFO``).
    """
    _state["json"] = as_json
    root = logging.getLogger()
    for handler in list(root.handlers):
        if getattr(handler, "_ordered_cli", False):
            root.removeHandler(handler)
    handler = logging.StreamHandler(sys.stderr)
    handler.lock = _LOCK  # logging's lock is per handler: share ours
    handler.setFormatter(_JsonFormatter() if as_json else _TextFormatter())
    handler._ordered_cli = True  # type: ignore[attr-defined]
    root.addHandler(handler)
    root.setLevel(level)
    # librdkafka logs every refused connection; the failure reaches the user as one
    # error (the message of the exception), so its log stays quiet unless debugging.
    quiet = logging.DEBUG if os.environ.get("ORDERED_DEBUG") else logging.CRITICAL
    for name in ("coordinator.kafka.kafka_admin.librdkafka", KAZOO_LOGGER):
        logging.getLogger(name).setLevel(quiet)


def json_mode() -> bool:
    """Whether stderr speaks JSON lines (the command runs with ``--json``)."""
    return _state["json"]


def _line(level: str, message: str, **extra: Any) -> None:
    if _state["json"]:
        record = {"level": level, "message": message, "time": round(time.time(), 3), **extra}
        line = json.dumps(record, sort_keys=True)
    else:
        prefix = "ordered: " if level == "info" else f"ordered: {level}: "
        line = f"{prefix}{message}"
    with _LOCK:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()


def emit(payload: dict[str, Any], text: str, as_json: bool) -> None:
    """Print ``payload`` as one JSON document (sorted keys) or ``text`` as it is."""
    if as_json:
        print(json.dumps(payload, sort_keys=True))
    else:
        print(text)
    sys.stdout.flush()


def progress(message: str) -> None:
    """Print one line of progress on stderr (a JSON line with ``--json``)."""
    _line("info", message)


def warn(message: str) -> None:
    """Print a warning on stderr (a JSON line with ``--json``)."""
    _line("warning", message)


def error(message: str, as_json: bool, kind: str) -> None:
    """Print an error on stderr (and as JSON on stdout with ``--json``)."""
    _line("error", message, kind=kind)
    if as_json:
        print(json.dumps({"error": {"kind": kind, "message": message}}, sort_keys=True))
        sys.stdout.flush()


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        level = record.levelname.lower()
        return f"ordered: {level}: {record.name}: {record.getMessage()}"


class _JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return json.dumps(
            {
                "level": record.levelname.lower(),
                "logger": record.name,
                "message": record.getMessage(),
                "time": round(record.created, 3),
            },
            sort_keys=True,
        )
