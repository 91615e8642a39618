"""Command-line options and value checks shared by several ``ordered`` commands.

Every check here runs while the command line is parsed, so a bad value is a usage
error (exit code 2) that names the flag, before any server is contacted.
"""

from __future__ import annotations

import argparse
import re
from typing import Final

from coordinator.client.errors import CommandLineError
from coordinator.groups.interest import DEFAULT_STALE_AFTER_MS, InterestSettings

__all__ = [
    "MAX_PARTITIONS",
    "CommandLineError",
    "HelpFormatter",
    "interest_arguments",
    "interest_settings",
    "kafka_seconds",
    "nonneg_int",
    "partition_count",
    "seconds",
    "seconds_or_zero",
    "topic_name",
    "zookeeper_connect",
]

MAX_PARTITIONS: Final = 10_000
"""The largest partition count ``expand --to`` accepts (Kafka's CreatePartitions takes
up to 100000, but each partition costs the brokers files and memory: a typo such as
``--to 1000000`` must not reach them)."""

_TOPIC_CHARS = re.compile(r"^[a-zA-Z0-9._-]+$")
_TOPIC_MAX = 249


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """``--help`` shows each flag's default (``(default: ...)``), as Kafka's tools do."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text or action.default in (None, False, argparse.SUPPRESS):
            return text
        return super()._get_help_string(action) or text


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def partition_count(text: str) -> int:
    """argparse type: a partition count between 1 and :data:`MAX_PARTITIONS`."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a partition count, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"a partition count must be >= 1, got {value}")
    if value > MAX_PARTITIONS:
        raise argparse.ArgumentTypeError(
            f"a partition count must be <= {MAX_PARTITIONS} (this tool's limit), got {value}"
        )
    return value


def seconds(text: str) -> float:
    """argparse type: seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be > 0 and finite, got {text}")
    return value


def seconds_or_zero(text: str) -> float:
    """argparse type: seconds >= 0."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected seconds, got {text!r}") from None
    if not value >= 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"seconds must be >= 0 and finite, got {text}")
    return value


def kafka_seconds(text: str) -> float:
    """argparse type: seconds for one Kafka request (librdkafka takes 0.01 to 300)."""
    value = seconds(text)
    if not 0.01 <= value <= 300:
        raise argparse.ArgumentTypeError(f"must be between 0.01 and 300 seconds, got {text}")
    return value


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
    """argparse type: ``host[:port][,host[:port]...][/chroot]``, ports 1-65535."""
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise argparse.ArgumentTypeError(
            f"expected host:port[,host:port...][/chroot], got {text!r}"
        )
    for part in hosts.split(","):
        host, port = part, "2181"
        if part.startswith("["):
            close = part.find("]")
            if close < 0 or (part[close + 1 :] and not part[close + 1 :].startswith(":")):
                raise argparse.ArgumentTypeError(f"bad ZooKeeper host {part!r} in {text!r}")
            host, port = part[: close + 1], part[close + 2 :] or "2181"
        elif ":" in part:
            host, port = part.rsplit(":", 1)
        if not host or (not host.startswith("[") and ":" in host):
            raise argparse.ArgumentTypeError(
                f"bad ZooKeeper host {part!r} in {text!r} (expected host:port)"
            )
        if not port.isdigit() or not 1 <= int(port) <= 65535:
            raise argparse.ArgumentTypeError(
                f"bad ZooKeeper port {port!r} in {text!r} (expected 1-65535)"
            )
    if slash and chroot.endswith("/"):
        raise argparse.ArgumentTypeError(f"a chroot must not end with '/': {text!r}")
    return text


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
