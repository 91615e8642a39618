"""The CLI's small failures: a reader that leaves early, a --root that is not a path."""

from __future__ import annotations

import subprocess
import sys

import pytest
from kit import Kit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_a_reader_that_leaves_early_is_not_an_error(kit: Kit) -> None:
    kit.adopted_topic(2)
    proc = subprocess.Popen(
        [sys.executable, "-m", "ordered.cli", "list", *kit.cli_servers],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    # `ordered list | head -0`: the reader is gone before the command writes anything.
    assert proc.stdout is not None and proc.stderr is not None
    proc.stdout.close()
    stderr = proc.stderr.read().decode()
    assert proc.wait(60) == 0, stderr
    assert "BrokenPipe" not in stderr and "Exception ignored" not in stderr, stderr


def test_a_root_that_is_not_a_path_is_a_usage_error(kit: Kit) -> None:
    servers = list(kit.cli_servers)
    servers[servers.index("--root") + 1] = "noslash"
    done = subprocess.run(
        [sys.executable, "-m", "ordered.cli", "list", *servers],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--root: store root must be an absolute ZooKeeper path" in done.stderr
