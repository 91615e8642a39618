"""``ordered features``: the cluster's feature flags (``docs/consumer-barrier.md``).

``ordered features status`` lists every flag; ``ordered features enable FEATURE`` and
``disable FEATURE`` turn one on or off. Both validate the name before anything is
written and are idempotent (nothing is written when the flag already says so).
Turn ``consumer-barrier`` on only once every controller (``ordered coordinator``
daemons and the ``ordered`` commands that expand or shrink) runs a version that
announces epochs: a controller of v0.5.0 or before publishes without announcing, and
consumers relying on the barrier would then judge records of an epoch they do not know.
"""

from __future__ import annotations

import argparse
import time
from typing import Any

from coordinator.kernel.errors import UsageError
from coordinator.kernel.identity import process_identity
from coordinator.kernel.store import FEATURES, FeatureRecord, LayoutStore
from ordered.cli.admin import common_arguments, connect
from ordered.cli.output import emit

__all__ = ["add_parser", "set_feature"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``features``."""
    features = sub.add_parser("features", help="the cluster's feature flags (consumer-barrier)")
    actions = features.add_subparsers(dest="action", required=True, metavar="ACTION")
    status = actions.add_parser("status", help="show every feature flag")
    common_arguments(status, None)
    status.set_defaults(func=_status)
    for name, text in (
        ("enable", "turn a feature on (idempotent)"),
        ("disable", "turn a feature off (idempotent)"),
    ):
        p = actions.add_parser(name, help=text)
        # Refused (exit 2) before anything connects.
        p.add_argument("feature", metavar="FEATURE", choices=FEATURES, help="the feature")
        common_arguments(p, None)
        p.set_defaults(func=_change, enabled=name == "enable")


def set_feature(store: LayoutStore, feature: str, enabled: bool) -> dict[str, Any]:
    """Turn ``feature`` on or off; validated first, idempotent.

    Returns:
        ``{"feature", "enabled", "changed"}`` (``changed``: something was written).

    Raises:
        UsageError: An unknown feature (nothing is written).
        StoreError: ZooKeeper failed.
    """
    if feature not in FEATURES:
        raise UsageError(f"unknown feature {feature!r} (known: {', '.join(FEATURES)})")
    current = store.get_feature(feature)
    # An absent flag is off, but "off" is still written: it is the operator's choice,
    # which a new root's first adoption must not overturn (it turns on only a flag that
    # was never written).
    if current is not None and current.enabled == enabled:
        return {"feature": feature, "enabled": enabled, "changed": False}
    store.set_feature(
        FeatureRecord(
            feature=feature,
            enabled=enabled,
            changed_at=time.time(),
            changed_by=process_identity(),
        )
    )
    return {"feature": feature, "enabled": enabled, "changed": True}


def _change(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        result = set_feature(conn.store, args.feature, args.enabled)
    state = "on" if result["enabled"] else "off"
    text = f"{result['feature']}: {state}" + ("" if result["changed"] else " (already)")
    emit(result, text, args.json)
    return 0


def _status(args: argparse.Namespace) -> int:
    with connect(args) as conn:
        records = {name: conn.store.get_feature(name) for name in FEATURES}
    data = {
        name: {
            "enabled": record is not None and record.enabled,
            "changed_at": None if record is None else record.changed_at,
        }
        for name, record in records.items()
    }
    text = "\n".join(f"{name}: {'on' if v['enabled'] else 'off'}" for name, v in data.items())
    emit(data, text, args.json)
    return 0
