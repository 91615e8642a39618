"""The Spark tests' view of a standalone cluster: :mod:`ordered.chaos.spark_cluster`
(shared with ``ordered chaos --spark``), and where a test session's logs are.
"""

from __future__ import annotations

from pathlib import Path

from ordered.chaos.spark_cluster import (
    StandaloneCluster,
    find_in_logs,
    spark_home,
    standalone_logs,
)

__all__ = [
    "StandaloneCluster",
    "driver_log",
    "find_in_logs",
    "run_logs",
    "spark_home",
    "standalone_logs",
]


def driver_log(spark: object) -> Path | None:
    """The driver JVM's stderr as a file, or ``None`` when it is a terminal or a pipe.

    The JVM inherits the stderr of the Python process that started it: pytest's
    capture file, or the file a run's output is redirected to. A dying thread's stack
    (``Exception in thread ...``) goes there, not to log4j.
    """
    proc = getattr(getattr(spark, "sparkContext", None), "_gateway", None)
    proc = getattr(proc, "proc", None)
    if proc is None:
        return None
    path = Path(f"/proc/{proc.pid}/fd/2")
    try:
        return path if path.is_file() else None  # a pipe or a terminal is no file
    except OSError:
        return None


def run_logs(spark: object, base: Path) -> tuple[Path | None, list[Path]]:
    """The driver's stderr (:func:`driver_log`) and the logs of every standalone cluster
    started under ``base`` (a pytest base temp: ``spark-standalone*`` folders)."""
    found: list[Path] = []
    for directory in sorted(base.glob("spark-standalone*")):
        found += standalone_logs(directory)
    return driver_log(spark), found
