"""``ordered chaos --zookeepers 3``: a CI-sized run on a ZooKeeper ensemble must hold.

Every fault kind of the run comes at least once, the ensemble's own among them: a
member killed (``kill-zookeeper-member``), a majority killed (``zookeeper-quorum-loss``)
and every member killed (``zookeeper-restart``). The run starts its own cluster.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_helpers import leftovers, run_chaos

pytestmark = [pytest.mark.integration]

SEED = 1  # its expire-consumer-session targets the main group (the lag group may be stopped)
ENSEMBLE_KINDS = ("kill-zookeeper-member", "zookeeper-quorum-loss", "zookeeper-restart")


@pytest.mark.timeout(600)
def test_a_ci_sized_chaos_run_on_a_zookeeper_ensemble_holds(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ("--duration", "60", "--seed", str(SEED), "--zookeepers", "3", "--rate", "150")
    result = run_chaos(run_dir, *args, wall_s=560)
    assert result["holds"] is True
    assert result["violations"] == 0 and result["lost"] == 0
    assert result["zookeepers"] == 3
    assert result["missing_fault_kinds"] == []
    for kind in ENSEMBLE_KINDS:
        assert result["fault_kinds"].get(kind, 0) >= 1, kind
    outages = {o["kind"]: o for o in result["zookeeper_outages"]}
    assert set(outages) == set(ENSEMBLE_KINDS)
    assert outages["zookeeper-quorum-loss"]["quorum_lost"] is True
    assert len(outages["zookeeper-quorum-loss"]["members"]) == 2
    assert outages["kill-zookeeper-member"]["quorum_lost"] is False
    assert len(outages["kill-zookeeper-member"]["members"]) == 1
    assert len(outages["zookeeper-restart"]["members"]) == 3
    assert result["layout_changes"] >= 3
    assert result["records"] > 3_000
    for group in ("main", "lag"):
        assert result["groups"][group]["lost"] == 0
        assert result["groups"][group]["delivered"] >= result["records"]
    assert leftovers(run_dir) == []
