"""Running ``ordered chaos`` from a test: one runner for every CI-sized chaos test.

A chaos run starts its own cluster and processes under a run directory (``--keep``
leaves the directory, so that a failure can show what each process said). The runner
returns the run's JSON verdict; a run that fails, or does not end, fails the test with
the fault log, the verdict's summary, and the last lines each process logged (a reader
that stopped early logs ``drained:`` with what every gate said then).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parents[1]

_SUMMARY = (
    "holds",
    "violations",
    "lost",
    "records",
    "faults",
    "groups",
    "lost_samples",
    "violation_samples",
    "missing_fault_kinds",
)


def chaos_argv(*args: str) -> list[str]:
    """The command line of ``ordered chaos`` with ``args``, run by this interpreter."""
    # ORDERED_TEST_CONSUMER_BARRIER=1: the same runs with the consumer barrier on.
    barrier = ["--consumer-barrier"] if os.environ.get("ORDERED_TEST_CONSUMER_BARRIER") else []
    return [sys.executable, "-m", "ordered.cli", "chaos", *barrier, *args]


def leftovers(directory: Path) -> list[str]:
    """The processes still running whose command line names ``directory``.

    Workers name their history files under the run directory in their command line,
    the servers their config files, Spark's workers and driver the directory itself.
    """
    found = subprocess.run(["pgrep", "-af", str(directory)], capture_output=True, text=True)
    return [line for line in found.stdout.splitlines() if "pgrep" not in line]


def process_logs(run_dir: Path, lines: int = 12) -> str:
    """The last ``lines`` lines of each process's log in the run (librdkafka's left out)."""
    parts: list[str] = []
    for log in sorted((run_dir / "logs").glob("*.log")):
        try:
            text = log.read_text(errors="replace").splitlines()
        except OSError as exc:
            parts.append(f"--- {log.name}: {exc}")
            continue
        ours = [line[:2000] for line in text if not line.startswith("%")]
        parts.append(f"--- {log.name}\n" + "\n".join(ours[-lines:]))
    return "\n".join(parts)


def run_chaos(run_dir: Path, *args: str, wall_s: float) -> dict[str, Any]:
    """Run ``ordered chaos ARGS --json --keep --dir RUN_DIR``; return its verdict.

    The fault log goes to stderr (shown when the test fails). A run that outlives
    ``wall_s`` gets SIGTERM (it stops its cluster and processes) and fails the test; so
    does a non-zero exit, with the verdict's summary and each process's last lines.
    """
    argv = chaos_argv(*args, "--json", "--keep", "--dir", str(run_dir))
    proc = subprocess.Popen(
        argv, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    try:
        out, err = proc.communicate(timeout=wall_s)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=120)
        pytest.fail(f"the run did not end in {wall_s:g} s:\n{err[-6000:]}\n{process_logs(run_dir)}")
    finally:
        proc.kill()
    sys.stderr.write(err[-8000:])
    result: dict[str, Any] = {}
    lines = out.strip().splitlines()
    if lines:
        try:
            result = json.loads(lines[-1])
        except ValueError:
            result = {}
    if proc.returncode != 0:
        summary = json.dumps({k: result.get(k) for k in _SUMMARY}, sort_keys=True)
        pytest.fail(
            f"ordered chaos exited {proc.returncode}\n{err[-3000:]}\nverdict: {summary}\n"
            f"{process_logs(run_dir)}"
        )
    sys.stderr.write(json.dumps({k: result.get(k) for k in _SUMMARY}) + "\n")
    return result
