"""Which Python interpreter Spark's Python workers run, checked when the source registers.

A Python data source runs in Spark's Python workers (the driver-side planner process and
the executors' workers), started with ``spark.pyspark.python`` / ``PYSPARK_PYTHON``, or
``python3`` from ``PATH`` when neither is set: not the driver's ``sys.executable``. From
a virtual environment that is not activated, the workers would then miss this package
and the first batch would fail deep inside Spark's error with ``No module named ...``.

:func:`choose_worker_python` decides before any query runs:

* nothing set: the workers run the driver's interpreter (``sys.executable``);
* set, and the interpreter exists on this host: it must import this package and
  ``pyarrow``, else :class:`~coordinator.kernel.errors.ConfigError` names both settings;
* set, but not on this host (a cluster whose workers have their own environment):
  trusted as given.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from typing import Any

from coordinator.kernel.errors import ConfigError

__all__ = ["CONF", "ENV", "STARTUP", "choose_worker_python", "probe", "startup_environment"]

CONF = "spark.pyspark.python"
"""Spark's setting of the workers' interpreter."""
ENV = "PYSPARK_PYTHON"
"""The environment variable Spark reads when :data:`CONF` is not set."""

_log = logging.getLogger(__name__)

STARTUP = os.path.join(os.path.dirname(os.path.abspath(__file__)), "_startup")
"""The folder whose ``sitecustomize`` makes Spark's Python processes import the installed
pyspark instead of compiling Spark's ``pyspark.zip`` (:mod:`spark_source._startup`)."""

# What a worker imports to run the source and the sink.
_NEEDED = "import spark_source.source, spark_source.sink, pyarrow"


def probe(executable: str, timeout_s: float = 60.0) -> str | None:
    """Why ``executable`` cannot run the source's workers, or ``None`` if it can.

    Runs ``executable -c "import spark_source.source, ..."`` on this host.
    """
    try:
        done = subprocess.run(
            [executable, "-c", _NEEDED],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
    except OSError as exc:
        return f"cannot run it: {exc}"
    except subprocess.TimeoutExpired:
        return f"importing the source did not finish within {timeout_s:g} s"
    if done.returncode == 0:
        return None
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit status {done.returncode}"


def _configured(spark: Any) -> tuple[str, str] | None:
    """``(setting name, interpreter)`` the user chose, or ``None``."""
    conf = spark.sparkContext.getConf().get(CONF)
    if conf:
        return CONF, str(conf)
    env = os.environ.get(ENV)
    if env:
        return ENV, env
    return None


def choose_worker_python(spark: Any) -> str | None:
    """Make the workers of ``spark`` run an interpreter that can import this package.

    Args:
        spark: A classic SparkSession (a Spark Connect session is left alone: the
            server's ``PYSPARK_PYTHON`` decides there).

    Returns:
        The workers' interpreter, or ``None`` for a Spark Connect session.

    Raises:
        ConfigError: The configured interpreter exists on this host but cannot import
            this package (or ``pyarrow``); the message names ``PYSPARK_PYTHON`` and
            ``spark.pyspark.python``.
    """
    context = getattr(spark, "_sc", None)
    if context is None:
        return None
    chosen = _configured(spark)
    if chosen is None:
        # pyspark reads PYSPARK_PYTHON once, when the context starts, into pythonExec;
        # every Python function registered from now on (this source, UDFs) carries it.
        context.pythonExec = sys.executable
        _log.info(
            "ordered-kafka: neither %s nor %s is set: Spark's Python workers run the "
            "driver's interpreter %s",
            ENV,
            CONF,
            sys.executable,
        )
        return sys.executable
    name, executable = chosen
    local = executable if os.path.isabs(executable) else shutil.which(executable)
    if local is None or not os.path.exists(local):
        _log.info(
            "ordered-kafka: %s=%s is not on this host; trusting the workers' environment",
            name,
            executable,
        )
        return executable
    if os.path.abspath(local) == os.path.abspath(sys.executable):
        return executable  # the driver's own interpreter imports this package
    problem = probe(local)
    if problem is not None:
        raise ConfigError(
            f"Spark's Python workers cannot run the ordered-kafka source: {name}={executable} "
            f"({local}) fails to import it: {problem}. Point {ENV} (environment) or {CONF} "
            f"(Spark setting) at an interpreter that has ordered-kafka[spark] installed, "
            f"such as the driver's {sys.executable}, or unset both to use the driver's."
        )
    if context.pythonExec != executable and name == CONF:
        # pyspark's Python functions carry PYSPARK_PYTHON, not the Spark setting.
        context.pythonExec = executable
    return executable


def startup_environment(environment: dict[str, str]) -> dict[str, str]:
    """``environment`` (a SparkContext's workers' environment) with :data:`STARTUP` first.

    Spark gives every Python process of a data source the environment of the data
    source's registration, and appends its ``PYTHONPATH`` after Spark's own zips. The
    processes Spark starts for this source then run :mod:`spark_source._startup`'s
    ``sitecustomize`` first. A host without this folder (a worker with its own
    environment) skips the entry, as Python skips any missing ``PYTHONPATH`` entry.
    """
    out = dict(environment)
    given = out.get("PYTHONPATH")
    parts = [p for p in (given or "").split(os.pathsep) if p and p != STARTUP]
    out["PYTHONPATH"] = os.pathsep.join([STARTUP, *parts])
    return out
