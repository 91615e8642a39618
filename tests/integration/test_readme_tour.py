"""The README's five-minute tour, run exactly as written against the session cluster.

The commands are not copied here: the test takes every ``bash`` block of the README's
"Five-minute tour" section, in order, and runs them as one shell script (so the
variables one block exports serve the next), from a scratch directory that links the
checkout's ``.venv``. It then checks what the tour's own programs print.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from confluent_kafka.admin import AdminClient
from helpers import wait_until
from kazoo.client import KazooClient

from coordinator.kernel.store import DEFAULT_ROOT
from coordinator.kernel.store.paths import group_path, topic_path
from ordered.devcluster.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.spark]

ROOT = Path(__file__).resolve().parents[2]

# What the tour creates (its first blocks name them); removed first, so that a reused
# test cluster runs the tour from scratch.
_TOPIC, _GROUP = "orders", "tour"


def tour_blocks(readme: str) -> list[str]:
    """The ``bash`` blocks of the README's "Five-minute tour" section, in order."""
    match = re.search(r"^## Five-minute tour\n(.*?)(?=^## )", readme, re.M | re.S)
    assert match, "README.md has no '## Five-minute tour' section"
    return re.findall(r"^```bash\n(.*?)^```", match.group(1), re.M | re.S)


def _forget(bootstrap: str, zk: KazooClient) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap})
    if _TOPIC in admin.list_topics(timeout=10).topics:
        admin.delete_topics([_TOPIC])[_TOPIC].result(timeout=30)
        wait_until(
            lambda: _TOPIC not in admin.list_topics(timeout=10).topics,
            60,
            what=f"topic {_TOPIC} deleted",
            interval=0.2,
        )
    for path in (topic_path(DEFAULT_ROOT, _TOPIC), group_path(DEFAULT_ROOT, _GROUP)):
        zk.delete(path, recursive=True) if zk.exists(path) else None
    groups = admin.list_consumer_groups().result(timeout=30)
    if any(g.group_id == _GROUP for g in groups.valid):
        admin.delete_consumer_groups([_GROUP])[_GROUP].result(timeout=30)


def test_blocks_are_found() -> None:
    blocks = tour_blocks((ROOT / "README.md").read_text())
    assert len(blocks) >= 8
    assert blocks[0].splitlines()[0] == "source .venv/bin/activate"


@pytest.mark.timeout(900)  # Spark's start alone took 60 s on the loaded 2-core machine
def test_readme_tour_runs_as_written(
    cluster: ClusterState, zk: KazooClient, tmp_path: Path
) -> None:
    _forget(cluster.bootstrap_servers, zk)
    blocks = tour_blocks((ROOT / "README.md").read_text())
    (tmp_path / ".venv").symlink_to(ROOT / ".venv")
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("ORDERED_BOOTSTRAP_SERVERS", "ORDERED_ZOOKEEPER_CONNECT", "PYSPARK_PYTHON")
    }
    env["ORDERED_CLUSTER_DIR"] = cluster.directory  # the tour's cluster is the session's
    proc = subprocess.run(
        ["bash", "-c", "set -euo pipefail\n" + "\n".join(blocks)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
    assert "created topic orders" in out
    assert out.count("produced 1000 records") == 4
    reads = re.findall(r"read (\d+) records of 20 keys, every key in order", out)
    assert reads == ["1000", "2000", "1000"]
    assert "keys arrive in partitions [2]" in out  # the new partition's gate opened
    assert "epoch 1 sealed, 2 -> 3 partitions" in out and "epoch 2 sealed, 3 -> 2" in out
    assert "Spark read 20 keys up to sequence number 199, every key in order" in out
    assert re.search(r"retired partition 2 \(epoch 2\): draining", out)
    assert re.search(r"retired partition 2 \(epoch 2\): trimmed", out)
