"""confluent-kafka-python's own unit tests against the wrappers (issue 30).

Runs ``scripts/confluent_suite.py --unit-only`` (about two minutes: confluent's unit tests
once on confluent's classes, once on the ordered ones) against the session's cluster, and
checks that the tests failing only wrapped are exactly those ``docs/clients.md`` lists:
a new difference fails here, and so does one that is fixed (then drop it from the docs
and from :data:`DOCUMENTED`).

Needs PyPI (the sdist, the test requirements) and confluent's tests: from the sdist,
else from ``ORDERED_CONFLUENT_SOURCE`` (a checkout or git directory of
confluent-kafka-python). Skipped when none of them can be had.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ordered.devcluster.cluster import ClusterState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]

DOCUMENTED = {
    "tests.test_Producer::test_produce_batch_threading_basic",
    "tests.test_AIOProducer.TestAIOProducer::test_multiple_concurrent_produce",
}
"""The wrapped-only failures of confluent's unit tests, as docs/clients.md explains them."""


def test_wrapped_only_failures_are_the_documented_ones(
    cluster: ClusterState, tmp_path: Path
) -> None:
    out = tmp_path / "suite.json"
    command = [
        sys.executable,
        str(ROOT / "scripts" / "confluent_suite.py"),
        "--unit-only",
        "--work",
        str(tmp_path / "work"),
        "--json",
        str(out),
        "--brokers",
        cluster.bootstrap_servers,
        "--zookeeper",
        cluster.zookeeper_connect,
    ]
    source = os.environ.get("ORDERED_CONFLUENT_SOURCE")
    if source:
        command += ["--source", source]
    proc = subprocess.run(command, capture_output=True, text=True, timeout=850, check=False)
    if proc.returncode != 0 and "pass --source" in proc.stderr:
        pytest.skip("confluent's tests cannot be had here: " + proc.stderr.strip()[-300:])
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    baseline = result["runs"]["baseline"]["counts"]
    assert baseline["passed"] > 100, result["runs"]
    found = {f["test"] for f in result["wrapped_only_failures"]["wrapped-plain"]}
    assert found == DOCUMENTED, result["wrapped_only_failures"]["wrapped-plain"]
    docs = (ROOT / "docs" / "clients.md").read_text()
    for test in DOCUMENTED:
        dotted, name = test.split("::")
        parts = dotted.split(".")[1:]  # the file, then its class if any
        named = "::".join([f"{parts[0]}.py", *parts[1:], name])
        assert named in docs, f"{test} is not in the docs (as {named})"
