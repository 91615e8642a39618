"""``ordered chaos`` end to end: a CI-sized fault run must hold; a stopped run leaves nothing.

The run starts its own cluster (it restarts ZooKeeper and kills processes, so it never
shares the session cluster).
"""

from __future__ import annotations

import json
import os
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from helpers import wait_until

pytestmark = [pytest.mark.integration]

ROOT = Path(__file__).resolve().parents[2]
CI_SEED = 11  # seeks and the offset reset come after four layout changes


def _chaos(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "ordered.cli", "chaos", *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _leftovers(directory: Path) -> list[str]:
    # Workers name their history files under the run directory in their command line,
    # the servers their config files.
    found = subprocess.run(["pgrep", "-af", str(directory)], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


@pytest.mark.timeout(420)
def test_a_ci_sized_chaos_run_holds(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _chaos(
        "--duration",
        "100",
        "--seed",
        str(CI_SEED),
        "--replays",
        "--json",
        "--keep",
        "--dir",
        str(run_dir),
    )
    try:
        out, err = proc.communicate(timeout=400)
    finally:
        proc.kill()
    sys.stderr.write(err[-6000:])  # the fault log, shown when the test fails
    assert proc.returncode == 0, err[-3000:]
    result = json.loads(out.strip().splitlines()[-1])
    assert result["holds"] is True
    assert result["violations"] == 0 and result["lost"] == 0
    assert result["seed"] == CI_SEED
    assert result["records"] > 10_000
    assert result["layout_changes"] >= 4
    assert result["process_kills"] >= 2
    assert len(result["fault_kinds"]) >= 12, result["fault_kinds"]
    for group in ("main", "lag", "replay"):
        assert result["groups"][group]["lost"] == 0
        assert result["groups"][group]["delivered"] >= result["records"]
    # Replays (a running member's seek back, a stopped group's offset reset) kept order.
    assert result["groups"]["replay"]["replayed"] > 0
    assert result["fault_kinds"].get("seek-back", 0) >= 1
    assert result["fault_kinds"].get("offset-reset", 0) >= 1
    # The lagging group was stopped across trims and still got everything.
    [proof] = result["trim_proof"]
    assert proof["group"] == "lag" and proof["lost"] == 0 and proof["paused_s"] > 0
    assert _leftovers(run_dir) == []


@pytest.mark.timeout(240)
def test_a_stopped_run_stops_everything_it_started(tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    proc = _chaos("--duration", "600", "--seed", "1", "--dir", str(run_dir))
    stderr = proc.stderr
    assert stderr is not None
    seen: list[str] = []

    def flowing() -> bool:
        ready, _, _ = select.select([stderr], [], [], 1.0)
        if ready:
            seen.append(stderr.readline())
        return "traffic flows" in "".join(seen)

    try:
        wait_until(flowing, 180, what=lambda: f"'traffic flows' in {''.join(seen)!r}", interval=0)
        time.sleep(5)
        assert _leftovers(run_dir), "nothing ran"
        os.kill(proc.pid, signal.SIGTERM)
        code = proc.wait(120)
    finally:
        proc.kill()
    assert code == 130
    assert "everything the run started was stopped" in proc.stderr.read()
    time.sleep(1)
    assert _leftovers(run_dir) == []
