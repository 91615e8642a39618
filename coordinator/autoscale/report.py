"""An autoscaling policy and its latest decisions, as ``describe`` and the CLI show them."""

from __future__ import annotations

import time
from typing import Any

from coordinator.kernel.store import LayoutStore
from coordinator.kernel.store.autoscale_records import AutoscalePolicy, AutoscaleStatus

__all__ = ["autoscale_summary", "policy_text"]


def policy_text(policy: AutoscalePolicy) -> str:
    """One line describing ``policy``."""
    unit = "records/s" if policy.metric == "records" else "bytes/s"
    return (
        f"autoscale {policy.topic}: target {policy.target_per_s:g} {unit} per partition, "
        f"active {policy.min_active}..{policy.max_active}, up-window {policy.up_window_s:g} s, "
        f"down-window {policy.down_window_s:g} s, cooldown {policy.cooldown_s:g} s, "
        f"step x{policy.max_step_factor}"
        + ("" if policy.max_lag is None else f", max lag {policy.max_lag} records per partition")
        + (", dry run" if policy.dry_run else "")
        + ("" if policy.enabled else ", disabled")
    )


def _decision_text(d: dict[str, Any]) -> str:
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(d["at"]))
    flag = " (dry run)" if d["dry_run"] and d["action"] != "hold" else ""
    return f"  {stamp} {d['action']} {d['active']} -> {d['to']}{flag}: {d['reason']}"


def autoscale_summary(store: LayoutStore, topic: str) -> tuple[dict[str, Any] | None, str]:
    """The policy and latest decisions of ``topic``, as a JSON-ready dict and as text.

    Returns ``(None, "autoscale off")`` when no policy is set.
    """
    policy = store.autoscale_policy(topic)
    status: AutoscaleStatus | None = store.autoscale_status(topic)
    if policy is None:
        return None, "autoscale off"
    payload = {
        "policy": policy.to_dict(),
        "last_change_at": None if status is None else status.last_change_at,
        "decisions": [] if status is None else list(status.decisions),
        "leader": None if status is None else status.leader,
    }
    lines = [policy_text(policy)]
    if status is not None:
        lines += [_decision_text(d) for d in status.decisions[-5:]]
    else:
        lines.append("  no decision yet (is a coordinator daemon running?)")
    return payload, "\n".join(lines)
