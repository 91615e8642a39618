"""Command-line options and value checks shared by several ``ordered`` commands.

Every check here runs while the command line is parsed, so a bad value is a usage
error (exit code 2) that names the flag, before any server is contacted.
"""

from __future__ import annotations

import argparse
import math
import re
from pathlib import Path
from typing import Final

from coordinator.groups.interest import DEFAULT_STALE_AFTER_MS, InterestSettings
from coordinator.kernel.errors import CommandLineError, ConfigError
from ordered.settings import INT32_MAX, INT64_MAX, parse_zookeeper_connect

__all__ = [
    "MAX_PARTITIONS",
    "MAX_SECONDS",
    "CommandLineError",
    "FloatArg",
    "HelpFormatter",
    "IntArg",
    "cluster_dir_arguments",
    "interest_arguments",
    "interest_settings",
    "kafka_seconds",
    "milliseconds",
    "nonneg_int",
    "offset",
    "partition_count",
    "partition_index",
    "seconds",
    "seconds_or_zero",
    "session_seconds",
    "topic_name",
    "zookeeper_connect",
]

MAX_PARTITIONS: Final = 10_000
"""The largest partition count ``expand --to`` accepts (Kafka's CreatePartitions takes
up to 100000, but each partition costs the brokers files and memory: a typo such as
``--to 1000000`` must not reach them)."""

_INTEGER = re.compile(r"[+-]?[0-9]{1,40}")
"""A decimal integer of at most 40 digits (longer is out of every range)."""

_ZK: Final = "ZooKeeper connect string"

_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
_TOPIC_MAX = 249


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each flag's default (``(default: ...)``), as Kafka's tools do."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if isinstance(action.type, (IntArg, FloatArg)):
            text += f" ({action.type.range_text})"
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text


class IntArg:
    """argparse type: an integer in ``[minimum, maximum]``.

    The one shared integer check of the command line: the range is declared where the
    flag is (``type=IntArg(1, MAX_PARTITIONS, "a partition count")``), and a value out
    of it is a usage error (exit code 2) naming the flag (argparse adds it), the value
    and the range.
    """

    def __init__(self, minimum: int, maximum: int, what: str = "an integer") -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.what = what
        self.__name__ = what  # argparse names the type in "invalid <name> value"

    def __call__(self, text: str) -> int:
        stripped = text.strip()
        if not _INTEGER.fullmatch(stripped):
            raise argparse.ArgumentTypeError(f"expected {self.what}, got {_short(text)}")
        value = int(stripped)
        if value < self.minimum:
            bound = f"must be >= {self.minimum}"
        elif value > self.maximum:
            bound = f"must be <= {self.maximum}"
        else:
            return value
        raise argparse.ArgumentTypeError(
            f"{self.what} {bound}, got {_short(stripped)} "
            f"(between {self.minimum} and {self.maximum})"
        )

    @property
    def range_text(self) -> str:
        """The allowed range in words, for ``--help`` and the reference."""
        return f"{self.minimum} to {self.maximum}"

    def __repr__(self) -> str:
        return f"IntArg({self.minimum}, {self.maximum})"


class FloatArg:
    """argparse type: a finite number in ``(minimum, maximum]`` (``[minimum, maximum]``
    with ``include_minimum``); NaN and infinities are refused.

    The one shared number check of the command line, like :class:`IntArg`.
    """

    def __init__(
        self,
        minimum: float,
        maximum: float,
        what: str = "a number",
        *,
        include_minimum: bool = False,
    ) -> None:
        self.minimum = minimum
        self.maximum = maximum
        self.what = what
        self.include_minimum = include_minimum
        self.__name__ = what

    def __call__(self, text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {self.what}, got {_short(text)}") from None
        low_ok = value >= self.minimum if self.include_minimum else value > self.minimum
        if math.isfinite(value) and low_ok and value <= self.maximum:
            return value
        low = f"{'>=' if self.include_minimum else '>'} {_num(self.minimum)}"
        if not math.isfinite(value):
            bound = f"must be a finite number {low}"
        elif low_ok:
            bound = f"must be <= {_num(self.maximum)}"
        else:
            bound = f"must be a finite number {low}"
        raise argparse.ArgumentTypeError(
            f"{self.what} {bound}, got {_short(text)} "
            f"(between {_num(self.minimum)} and {_num(self.maximum)})"
        )

    @property
    def range_text(self) -> str:
        """The allowed range in words, for ``--help`` and the reference."""
        low = _num(self.minimum) if self.include_minimum else f"above {_num(self.minimum)}"
        return f"{low} to {_num(self.maximum)}"

    def __repr__(self) -> str:
        return f"FloatArg({self.minimum}, {self.maximum})"


def _num(value: float) -> str:
    """A bound for a message: whole numbers in full (2147483, not 2.14748e+06)."""
    return str(int(value)) if float(value).is_integer() and abs(value) < 1e15 else f"{value:g}"


def _short(text: str) -> str:
    """A value for a message: a huge one is cut, so the message stays one line."""
    return repr(text) if len(text) <= 40 else repr(text[:24] + "...") + f" ({len(text)} chars)"


nonneg_int = IntArg(0, INT64_MAX, "an integer >= 0")
"""argparse type: an integer from 0 to 2**63-1 (Kafka's ``long``)."""

partition_count = IntArg(1, MAX_PARTITIONS, "a partition count")
"""argparse type: a partition count between 1 and :data:`MAX_PARTITIONS`."""

partition_index = IntArg(0, INT32_MAX, "a partition")
"""argparse type: a partition number (Kafka's protocol: a 32-bit int)."""

offset = IntArg(0, INT64_MAX, "an offset")
"""argparse type: a Kafka offset (a 64-bit ``long``, >= 0)."""

milliseconds = IntArg(1, INT32_MAX, "milliseconds")
"""argparse type: a timeout in milliseconds, 1 to 2**31-1 (librdkafka's and Kafka's
request timeouts are 32-bit ints)."""

MAX_SECONDS: Final = INT32_MAX // 1000
"""The longest wait any flag takes, in seconds: 2147483 s (about 24.8 days), the largest
32-bit count of milliseconds (kazoo sends the session timeout as one; librdkafka's
timeouts are ints of ms)."""

seconds = FloatArg(0.0, MAX_SECONDS, "seconds")
"""argparse type: seconds > 0, finite, at most :data:`MAX_SECONDS`."""

seconds_or_zero = FloatArg(0.0, MAX_SECONDS, "seconds", include_minimum=True)
"""argparse type: seconds >= 0, finite, at most :data:`MAX_SECONDS`."""

session_seconds = FloatArg(1.0, MAX_SECONDS, "seconds", include_minimum=True)
"""argparse type: a ZooKeeper session timeout in seconds, 1 to :data:`MAX_SECONDS` (the
rule of ``ordered.zookeeper.session.timeout.ms``: kazoo waits a fraction of it for the
connect handshake, and sends it as a 32-bit count of ms)."""

kafka_seconds = FloatArg(0.01, 300.0, "seconds for one Kafka request", include_minimum=True)
"""argparse type: seconds for one Kafka request (librdkafka takes 0.01 to 300)."""


def topic_name(text: str) -> str:
    """argparse type: a legal Kafka topic name (Kafka's own rule, checked before asking)."""
    if not text:
        raise argparse.ArgumentTypeError("a topic name must not be empty")
    if text in (".", ".."):
        raise argparse.ArgumentTypeError(f"{text!r} is not a legal topic name")
    if len(text) > _TOPIC_MAX:
        raise argparse.ArgumentTypeError(
            f"a topic name has at most {_TOPIC_MAX} characters, got {len(text)}"
        )
    if not _TOPIC_CHARS.match(text):
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a legal topic name (letters, digits, '.', '_' and '-' only)"
        )
    return text


def zookeeper_connect(text: str) -> str:
    """argparse type: ``host[:port][,host[:port]...][/chroot]``, ports 1-65535 (the rule
    of ``ordered.zookeeper.connect``)."""
    try:
        return parse_zookeeper_connect(_ZK, text)
    except ConfigError as exc:
        raise argparse.ArgumentTypeError(str(exc).removeprefix(f"{_ZK}: ")) from None


def cluster_dir_arguments(p: argparse.ArgumentParser) -> None:
    """Add ``--dir`` (the local cluster's directory) and ``--json``, as every ``ordered
    cluster`` action that looks at a cluster takes them."""
    p.add_argument(
        "--dir",
        type=Path,
        default=None,
        help="cluster directory (default: $ORDERED_CLUSTER_DIR, else "
        "~/.local/state/ordered/cluster)",
    )
    p.add_argument("--json", action="store_true", help="print JSON")


def interest_arguments(p: argparse.ArgumentParser) -> None:
    """Add the flags that choose which consumer groups hold trims back."""
    p.add_argument(
        "--registered-groups-only",
        action="store_true",
        help="count only registered ordered groups, not every group with commits on the topic",
    )
    p.add_argument(
        "--stale-group-ms",
        type=nonneg_int,
        default=DEFAULT_STALE_AFTER_MS,
        help="an empty group whose commits are older than this holds nothing back "
        "(default: %(default)s, Kafka's offsets.retention.minutes)",
    )


def interest_settings(args: argparse.Namespace) -> InterestSettings:
    """The :class:`InterestSettings` of :func:`interest_arguments`' flags."""
    return InterestSettings(
        registered_only=bool(args.registered_groups_only), stale_after_ms=args.stale_group_ms
    )
