"""``ordered chaos --spark``: a CI-sized run with the Spark reader kind must hold.

The run starts its own Kafka, ZooKeeper and Spark standalone cluster (a master, two
workers), a Spark driver reading the chaos topic with the ``ordered-kafka`` source as
group ``spark``, and kills executors and the driver while layouts change. The verdict
covers the Spark group as it covers the others: per key in order, nothing lost.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from chaos_helpers import leftovers, run_chaos

pytestmark = [pytest.mark.integration, pytest.mark.spark]

# Seed 40: the Spark kills come before the ZooKeeper restart, and the session expiry
# goes to the main group (seed 1 sent it to the paused lag group: skipped, a missing kind).
SEED = 40


@pytest.mark.timeout(1200)
def test_a_ci_sized_chaos_run_with_spark_holds(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    args = ("--duration", "90", "--seed", str(SEED), "--spark", "--rate", "100")
    result = run_chaos(run_dir, *args, "--drain-timeout", "240", wall_s=1160)
    assert result["holds"] is True
    assert result["violations"] == 0 and result["lost"] == 0
    assert result["missing_fault_kinds"] == []
    assert result["spark"] is True
    kinds = result["fault_kinds"]
    assert kinds.get("kill-spark-executor", 0) >= 1 and kinds.get("kill-spark-driver", 0) >= 1
    spark = result["groups"]["spark"]
    assert spark["lost"] == 0 and spark["delivered"] >= result["records"] > 3_000
    # A driver replaced after a kill went on from the checkpoint: two incarnations read.
    drivers = result["spark_drivers"]
    assert len(drivers) >= 2 and all("error" not in s for s in drivers.values()), drivers
    assert sum(int(s.get("rows", 0)) for s in drivers.values()) >= result["records"]
    assert result["layout_changes"] >= 3
    logs = result["spark_logs"]
    assert logs["stack_overflow_errors"] == 0 and logs["dead_stream_threads"] == 0, logs
    assert logs["lost_executors"] >= 1, logs  # the driver saw the executor it lost
    assert leftovers(run_dir) == []
