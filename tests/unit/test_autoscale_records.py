"""The autoscaler's records: the optional max lag of a policy and the lag of a decision,
and the version 1 records written before either existed."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store.autoscale_records import AutoscalePolicy, AutoscaleStatus

PATH = "/ordered/topics/t/autoscale"


def policy(**over: Any) -> AutoscalePolicy:
    base: dict[str, Any] = {
        "topic": "t",
        "metric": "records",
        "target_per_s": 100.0,
        "min_active": 2,
        "max_active": 8,
        "up_window_s": 120.0,
        "down_window_s": 600.0,
        "cooldown_s": 300.0,
        "max_step_factor": 2,
        "enabled": True,
        "dry_run": False,
        "updated_at": 1700000000.0,
    }
    return AutoscalePolicy(**(base | over))


DECISION: dict[str, Any] = {
    "at": 1700000000.0,
    "action": "hold",
    "active": 2,
    "to": 2,
    "rate_up": 1.0,
    "rate_down": 1.0,
    "rule": "band",
    "reason": "within the target band",
    "acted": False,
    "dry_run": False,
}


def test_max_lag_round_trips_and_defaults_to_off() -> None:
    assert policy().max_lag is None
    lagged = policy(max_lag=1000)
    raw = json.loads(lagged.to_json())
    assert (raw["version"], raw["max_lag"]) == (2, 1000)
    assert AutoscalePolicy.from_json(lagged.to_json(), PATH) == lagged


def test_version_1_policy_reads_with_the_lag_off() -> None:
    raw = json.loads(policy().to_json())
    raw.pop("max_lag")
    raw["version"] = 1
    old = AutoscalePolicy.from_json(json.dumps(raw).encode(), PATH)
    assert old.max_lag is None
    assert old == policy()
    # A version 2 record must carry the field.
    raw["version"] = 2
    with pytest.raises(StoreError, match="missing field"):
        AutoscalePolicy.from_json(json.dumps(raw).encode(), PATH)


@pytest.mark.parametrize("bad", [0, -5, 1.5, True, "10"])
def test_a_bad_max_lag_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="max_lag"):
        policy(max_lag=bad)
    raw = json.loads(policy().to_json()) | {"max_lag": bad}
    with pytest.raises(StoreError, match="max_lag"):
        AutoscalePolicy.from_json(json.dumps(raw).encode(), PATH)


def test_version_1_status_reads_its_decisions_without_lag() -> None:
    raw = {
        "version": 1,
        "topic": "t",
        "leader": "d",
        "last_change_at": None,
        "decisions": [DECISION],
        "updated_at": 1700000000.0,
    }
    old = AutoscaleStatus.from_json(json.dumps(raw).encode(), PATH)
    assert old.decisions == (DECISION | {"lag": None},)
    assert json.loads(old.to_json())["version"] == 2
    # A version 2 decision must carry the lag.
    raw["version"] = 2
    with pytest.raises(StoreError, match="decision with fields"):
        AutoscaleStatus.from_json(json.dumps(raw).encode(), PATH)
    raw["decisions"] = [DECISION | {"lag": 12.5}]
    assert AutoscaleStatus.from_json(json.dumps(raw).encode(), PATH).decisions[0]["lag"] == 12.5
