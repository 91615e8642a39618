"""``ordered demo --json`` in its short form, against the session cluster (CI-sized)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from matplotlib.image import imread

from ordered.devcluster.cluster import ClusterState

pytestmark = pytest.mark.integration

# The timeline's colours of the states every run must show (ordered.demo.timeline).
_ACTIVE = (0x2C, 0xA0, 0x2C)
_DRAINING = (0x4A, 0x7F, 0xD6)
_TRIMMED = (0xB0, 0xB0, 0xB0)


def _pixels(image: np.ndarray, rgb: tuple[int, int, int]) -> int:
    want = np.array(rgb, dtype=float) / 255.0
    return int((np.abs(image[:, :, :3] - want).max(axis=2) < 0.02).sum())


def _read(path: Path) -> bytes:
    try:
        return path.read_bytes()
    except OSError:  # the process ended while we looked
        return b""


def test_demo_json_short_run(cluster: ClusterState, zk_root: str, tmp_path: Path) -> None:
    began = time.monotonic()
    where = ["--dir", cluster.directory, "--out", str(tmp_path), "--root", zk_root]
    proc = subprocess.run(
        [sys.executable, "-m", "ordered.cli", "demo", "--duration", "15", "--json", *where],
        capture_output=True,
        text=True,
        timeout=170,
    )
    took = time.monotonic() - began
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert proc.stderr == ""  # --json: nothing human-readable on stderr
    summary = json.loads(proc.stdout)
    assert summary["violations"] == 0 and summary["lost"] == 0
    # The demo's point: the first expansion holds the new partition at its gate for a
    # few seconds, while the late group reads its backlog.
    assert summary["gate_held"] is True
    assert summary["longest_gate_wait_s"] >= 1.0, summary["longest_gate_wait_s"]
    assert summary["records"] > 1000
    assert summary["delivered"] == summary["records"] == summary["produced"]
    assert [(c["from"], c["to"]) for c in summary["layout_changes"]] == [
        (2, 3),
        (3, 4),
        (4, 2),
        (2, 4),
    ]
    assert summary["epochs"] == 4
    assert all(step["ok"] for step in summary["steps"])
    assert [s["partitions"] for s in summary["steps"] if s["step"] == "trim"] == [[2, 3]]
    assert took < 120, f"the short demo took {took:.0f} s"
    # Everything it started has stopped: no process names its topic (the workers) or its
    # store root (the coordinator daemon) any more.
    needles = (summary["topic"].encode(), zk_root.encode())
    left = [
        cmd.parent.name
        for cmd in Path("/proc").glob("[0-9]*/cmdline")
        if any(n in _read(cmd) for n in needles)
    ]
    assert left == []
    png = Path(summary["png"])
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    image = imread(png)
    assert image.shape[0] > 500 and image.shape[1] > 1000
    # The lanes show every partition active, the retired ones draining, then trimmed.
    for colour in (_ACTIVE, _DRAINING, _TRIMMED):
        assert _pixels(image, colour) > 500, colour
