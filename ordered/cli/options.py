"""Command-line options shared by several ``ordered`` commands."""

from __future__ import annotations

import argparse

from coordinator.interest import DEFAULT_STALE_AFTER_MS, InterestSettings

__all__ = ["interest_arguments", "interest_settings", "nonneg_int"]


def nonneg_int(text: str) -> int:
    """argparse type: an integer >= 0."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


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
        f"(default {DEFAULT_STALE_AFTER_MS}: Kafka's offsets.retention.minutes)",
    )


def interest_settings(args: argparse.Namespace) -> InterestSettings:
    """The :class:`InterestSettings` of :func:`interest_arguments`' flags."""
    return InterestSettings(
        registered_only=bool(args.registered_groups_only), stale_after_ms=args.stale_group_ms
    )
