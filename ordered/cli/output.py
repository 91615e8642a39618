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
import re
import sys
import threading
import time
from typing import Any, Final

from coordinator.kernel.zk import KAZOO_LOGGER

__all__ = [
    "LIBRDKAFKA_LOGGER",
    "THROTTLE_S",
    "LogThrottle",
    "configure",
    "emit",
    "error",
    "json_mode",
    "progress",
    "warn",
]

LIBRDKAFKA_LOGGER: Final = "ordered.cli.librdkafka"
"""The ``logger`` the CLI hands the Kafka clients it makes (librdkafka's own log lines)."""

THROTTLE_S: Final = 30.0
"""How long a repeated librdkafka line stays quiet (:class:`LogThrottle`)."""

_state = {"json": False, "stamp": False}

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
    # A long-running command (the daemon, which logs at INFO) stamps its own lines too:
    # its output is read later, next to other logs.
    _state["stamp"] = level <= logging.INFO
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
    # librdkafka logs every refused connection; a command's failure reaches the user as
    # one error (the message of the exception), so its log stays quiet unless debugging.
    # The daemon, which rides out outages, shows it throttled (LogThrottle).
    debug = bool(os.environ.get("ORDERED_DEBUG"))
    handler.addFilter(LogThrottle(mute=not debug and level > logging.INFO, off=debug))
    logging.getLogger(KAZOO_LOGGER).setLevel(logging.DEBUG if debug else logging.CRITICAL)


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
        if _state["stamp"]:
            line = f"{_stamp(time.time())} {line}"
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


class LogThrottle(logging.Filter):
    """Let one line of a kind through per :data:`THROTTLE_S` from a ``*.librdkafka`` logger.

    Every Kafka client the project makes hands librdkafka a logger named
    ``<module>.librdkafka`` (not stderr, where librdkafka writes by default, even at
    shutdown). librdkafka logs every failed connection attempt of every broker
    (thousands of ``Connection refused`` lines in a two-minute outage). Lines that
    differ only in numbers (times, counts) are one kind; the next line let through says
    how many were held back. Other loggers pass untouched.

    Args:
        interval: Seconds a kind stays quiet after a line of it is let through.
        clock: The time source (a test's).
        mute: Drop every librdkafka line (a one-off command: its failure is its error).
        off: Let every line through (``ORDERED_DEBUG``).
    """

    _NUMBERS = re.compile(r"\d+")

    def __init__(
        self,
        interval: float = THROTTLE_S,
        clock: Any = time.monotonic,
        *,
        mute: bool = False,
        off: bool = False,
    ) -> None:
        super().__init__()
        self._interval = interval
        self._clock = clock
        self._mute = mute
        self._off = off
        self._seen: dict[tuple[str, str], tuple[float, int]] = {}
        self._lock = threading.Lock()

    def filter(self, record: logging.LogRecord) -> bool:
        if self._off or not record.name.endswith(".librdkafka"):
            return True
        if self._mute:
            return False
        key = (record.name, self._NUMBERS.sub("#", record.getMessage()))
        now = self._clock()
        with self._lock:
            last, held = self._seen.get(key, (None, 0))
            if last is not None and now - last < self._interval:
                self._seen[key] = (last, held + 1)
                return False
            self._seen[key] = (now, 0)
        if held:
            record.msg = f"{record.getMessage()} ({held} more like it in {self._interval:g} s)"
            record.args = None
        return True


def _stamp(at: float) -> str:
    """``at`` as ISO 8601 UTC with milliseconds, as Kafka's and ZooKeeper's logs have it."""
    whole = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(at))
    return f"{whole}.{int(at * 1000) % 1000:03d}Z"


class _TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        # A log line comes from any thread at any time (kazoo, librdkafka, the daemon's
        # loops): without its time it cannot be put next to the servers' logs.
        level = record.levelname.lower()
        return f"{_stamp(record.created)} ordered: {level}: {record.name}: {record.getMessage()}"


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
