"""``ordered autoscale TOPIC``: set, show or remove a topic's autoscaling policy.

With ``--target-records-per-s`` or ``--target-bytes-per-s`` it stores a policy that the
leading coordinator daemon applies (``docs/autoscale.md``); ``--off`` removes it; with
neither it shows the policy and the latest decisions. Every value is checked, and the
topic must be adopted, before anything is written.
"""

from __future__ import annotations

import argparse
import time
from typing import Final

from coordinator.autoscale.report import autoscale_summary, policy_text
from coordinator.kernel.errors import CommandLineError, NotAdoptedError, UsageError
from coordinator.kernel.store.autoscale_records import AutoscalePolicy
from ordered.cli.admin import common_arguments, connect
from ordered.cli.options import MAX_PARTITIONS, FloatArg, IntArg
from ordered.cli.output import emit
from ordered.settings import INT64_MAX

__all__ = [
    "DEFAULT_COOLDOWN_S",
    "DEFAULT_DOWN_WINDOW_S",
    "DEFAULT_MAX_ACTIVE",
    "DEFAULT_UP_WINDOW_S",
    "MAX_TARGET_BYTES_PER_S",
    "MAX_TARGET_RECORDS_PER_S",
    "MAX_WINDOW_S",
    "MIN_TARGET_PER_S",
    "MIN_WINDOW_S",
    "add_parsers",
    "check_flags",
]

DEFAULT_UP_WINDOW_S: Final = 120.0
"""Pravega's shortest scale-up window (its 2-minute rate)."""
DEFAULT_DOWN_WINDOW_S: Final = 600.0
"""Twice Pulsar's 300 s merge cold window; Pravega looks back 20 minutes."""
DEFAULT_COOLDOWN_S: Final = 300.0
"""Pulsar's merge cooldown; between its 60 s split and Pravega's 10 min cooldowns."""
DEFAULT_MAX_ACTIVE: Final = 64
"""Pulsar 5's segment limit per topic."""
DEFAULT_STEP_FACTOR: Final = 2
"""Kinesis on-demand: at most x2 or /2 per step."""


MAX_TARGET_RECORDS_PER_S: Final = 10_000_000.0
"""The highest records target per partition: one Kafka partition takes about a million
small records a second on fast hardware, so a higher target could never be reached and
the policy would never act."""
MAX_TARGET_BYTES_PER_S: Final = 10_000_000_000.0
"""The highest bytes target per partition (10 GB/s, beyond any broker's network)."""
MIN_TARGET_PER_S: Final = 0.001
"""The lowest target: below it the partition count it asks for is not a number."""
MIN_WINDOW_S: Final = 1.0
"""The shortest window. A window shorter than two of the daemon's ticks
(``ordered coordinator --autoscale-interval``, default 10 s) is decided over the samples
there are: the rate between the two newest samples that span it."""
MAX_WINDOW_S: Final = 86_400.0
"""The longest window or cooldown: a day (the daemon keeps 1.5 windows of samples in
memory per topic)."""

_records_target = FloatArg(
    MIN_TARGET_PER_S, MAX_TARGET_RECORDS_PER_S, "records/s", include_minimum=True
)
_bytes_target = FloatArg(MIN_TARGET_PER_S, MAX_TARGET_BYTES_PER_S, "bytes/s", include_minimum=True)
_window = FloatArg(MIN_WINDOW_S, MAX_WINDOW_S, "seconds", include_minimum=True)
_cooldown = FloatArg(0.0, MAX_WINDOW_S, "seconds")
_count = IntArg(1, MAX_PARTITIONS, "a partition count")
_factor = IntArg(2, MAX_PARTITIONS, "a factor")
_lag = IntArg(1, INT64_MAX, "an integer")

_POLICY_FLAGS: Final = (
    ("min_active", "--min"),
    ("max_active", "--max"),
    ("up_window", "--up-window"),
    ("down_window", "--down-window"),
    ("cooldown", "--cooldown"),
    ("max_step_factor", "--max-step-factor"),
    ("max_lag", "--max-lag"),
    ("dry_run", "--dry-run"),
)
"""The flags that shape a policy: they need a target (and mean nothing with ``--off``)."""


def add_parsers(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``autoscale``."""
    p = sub.add_parser(
        "autoscale",
        help="set, show or remove a topic's autoscaling policy (the coordinator applies it)",
    )
    p.add_argument("topic", metavar="TOPIC")
    target = p.add_mutually_exclusive_group()
    target.add_argument(
        "--target-records-per-s",
        type=_records_target,
        default=None,
        metavar="R",
        help="target write rate per active partition, records per second",
    )
    target.add_argument(
        "--target-bytes-per-s",
        type=_bytes_target,
        default=None,
        metavar="B",
        help="target write rate per active partition, bytes (key + value) per second",
    )
    target.add_argument("--off", action="store_true", help="remove the policy")
    p.add_argument(
        "--min",
        type=_count,
        default=None,
        dest="min_active",
        metavar="U",
        help="never fewer active partitions (default: the topic's initial count)",
    )
    p.add_argument(
        "--max",
        type=_count,
        default=None,
        dest="max_active",
        metavar="U",
        help=f"never more active partitions (default {DEFAULT_MAX_ACTIVE})",
    )
    p.add_argument(
        "--up-window",
        type=_window,
        default=None,
        metavar="S",
        help=f"seconds above the target before growing (default {DEFAULT_UP_WINDOW_S:g})",
    )
    p.add_argument(
        "--down-window",
        type=_window,
        default=None,
        metavar="S",
        help=f"seconds below half the target before shrinking (default {DEFAULT_DOWN_WINDOW_S:g})",
    )
    p.add_argument(
        "--cooldown",
        type=_cooldown,
        default=None,
        metavar="S",
        help="seconds after any layout change before acting again "
        f"(default {DEFAULT_COOLDOWN_S:g})",
    )
    p.add_argument(
        "--max-step-factor",
        type=_factor,
        default=None,
        metavar="F",
        help=f"at most xF or /F per change (default {DEFAULT_STEP_FACTOR})",
    )
    p.add_argument(
        "--max-lag",
        type=_lag,
        default=None,
        metavar="R",
        help="also grow when the most lagging interested group is more than R records per "
        "active partition behind for the up-window (and not catching up), and never shrink "
        "while it is more than R/2 behind (default: off)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="the coordinator decides and logs, but never changes the layout",
    )
    common_arguments(p, None)
    p.set_defaults(func=_autoscale, check=check_flags)


def _given(args: argparse.Namespace) -> list[str]:
    """The policy-shaping flags on the command line."""
    return [flag for attr, flag in _POLICY_FLAGS if getattr(args, attr) not in (None, False)]


def check_flags(args: argparse.Namespace) -> None:
    """Check the flags together, before any server is asked; fill in the defaults.

    Raises:
        CommandLineError: ``--max`` and the like without ``--target-records-per-s`` or
            ``--target-bytes-per-s`` (they would be silently ignored), or with ``--off``;
            a ``--down-window`` shorter than the up-window; ``--max`` below ``--min``.
    """
    given = _given(args)
    setting = args.target_records_per_s is not None or args.target_bytes_per_s is not None
    if given and not setting:
        what = "--off removes the policy" if args.off else "showing the policy takes no flags"
        raise CommandLineError(
            f"{', '.join(given)}: policy flags need --target-records-per-s or "
            f"--target-bytes-per-s ({what})"
        )
    for attr, value in (
        ("max_active", DEFAULT_MAX_ACTIVE),
        ("up_window", DEFAULT_UP_WINDOW_S),
        ("down_window", DEFAULT_DOWN_WINDOW_S),
        ("cooldown", DEFAULT_COOLDOWN_S),
        ("max_step_factor", DEFAULT_STEP_FACTOR),
    ):
        if getattr(args, attr) is None:
            setattr(args, attr, value)
    if args.down_window < args.up_window:
        raise CommandLineError(
            f"--down-window {args.down_window:g} is shorter than --up-window "
            f"{args.up_window:g}: shrinks must look back at least as long as growths"
        )
    if args.min_active is not None and args.max_active < args.min_active:
        raise CommandLineError(f"--max {args.max_active} is below the minimum {args.min_active}")


def _build(args: argparse.Namespace, initial: int) -> AutoscalePolicy:
    """The policy of the flags (checked by :func:`check_flags`), checked against the
    topic's initial count."""
    min_active = initial if args.min_active is None else args.min_active
    if min_active < initial:
        raise UsageError(
            f"--min {min_active} is below the topic's initial partition count {initial} "
            "(a topic never shrinks below it)"
        )
    if args.max_active < min_active:
        # Two flags that contradict each other are a usage error; a --max below the
        # topic's initial count is the topic's state refusing it.
        kind = CommandLineError if args.min_active is not None else UsageError
        raise kind(f"--max {args.max_active} is below the minimum {min_active}")
    records = args.target_records_per_s is not None
    return AutoscalePolicy(
        topic=args.topic,
        metric="records" if records else "bytes",
        target_per_s=args.target_records_per_s if records else args.target_bytes_per_s,
        min_active=min_active,
        max_active=args.max_active,
        up_window_s=args.up_window,
        down_window_s=args.down_window,
        cooldown_s=args.cooldown,
        max_step_factor=args.max_step_factor,
        enabled=True,
        dry_run=bool(args.dry_run),
        updated_at=time.time(),
        max_lag=args.max_lag,
    )


def _autoscale(args: argparse.Namespace) -> int:
    check_flags(args)
    setting = args.target_records_per_s is not None or args.target_bytes_per_s is not None
    if not setting and not args.off:
        with connect(args) as conn:
            payload, text = autoscale_summary(conn.store, args.topic)
        emit({"name": args.topic, "autoscale": payload}, text, args.json)
        return 0
    if args.off:
        with connect(args) as conn:
            removed = conn.store.clear_autoscale_policy(args.topic)
        text = f"autoscale {args.topic}: " + ("removed" if removed else "was off; nothing to do")
        emit({"name": args.topic, "autoscale": None, "removed": removed}, text, args.json)
        return 0
    with connect(args) as conn:
        record = conn.store.get_topic(args.topic)
        if record is None:
            raise NotAdoptedError(
                f"topic {args.topic} is not adopted (adopt it first: ordered adopt {args.topic})"
            )
        policy = _build(args, record.initial)
        conn.store.set_autoscale_policy(policy)
    emit(
        {"name": args.topic, "autoscale": {"policy": policy.to_dict()}},
        policy_text(policy),
        args.json,
    )
    return 0
