"""How the suite is split over pytest-xdist's workers (``tests/conftest.py`` schedules by it)."""

from __future__ import annotations

__all__ = ["CHAOS_FILES", "CLUSTER3_FILES", "GROUP_ORDER", "queue_rank", "worker_group"]

# How the suite is split over pytest-xdist's workers (``scripts/test.sh`` runs
# ``-n 3 --dist loadgroup``). Each worker starts its own session servers, so tests that
# share an expensive server stay on one worker: the chaos-style runs (which start their
# own clusters and load both cores, so two at once would slow each other past their
# bounds), the Spark tests (a standalone Spark cluster per worker), the secure cluster's
# tests and the three-broker cluster's. Every other test file is a group of its own. The
# heavy groups are queued first so that no long run starts last.
CHAOS_FILES = frozenset(
    {
        "test_chaos.py",
        "test_chaos_network.py",
        "test_chaos_zk_ensemble.py",
        "test_chaos_spark.py",
        "test_chaos_pipeline_stall.py",
    }
)
CLUSTER3_FILES = frozenset({"test_trim_replicated.py"})
GROUP_ORDER = ("chaos", "spark", "secure", "cluster3")


def worker_group(nodeid: str) -> str:
    """The worker group of the test ``nodeid``: a shared-server group or its own file."""
    path = nodeid.split("::", 1)[0]
    folder, _, name = path.rpartition("/")
    if name in CHAOS_FILES:
        return "chaos"
    if folder.endswith("spark"):
        return "spark"
    if name.startswith("test_security"):
        return "secure"
    if name in CLUSTER3_FILES:
        return "cluster3"
    return path


def queue_rank(nodeid: str) -> int:
    group = worker_group(nodeid)
    if group in GROUP_ORDER:
        return GROUP_ORDER.index(group)
    # Integration files before the unit tests, whose many short tests fill the tail.
    return len(GROUP_ORDER) + (1 if group.startswith("tests/unit/") else 0)
