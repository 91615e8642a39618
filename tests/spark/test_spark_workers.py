"""``register()`` and the interpreter of Spark's Python workers, as a new user meets them.

One fresh driver runs in a subprocess of this venv's interpreter, with the venv
NOT activated: no ``PYSPARK_PYTHON``, no ``spark.pyspark.python``, and a ``PATH`` whose
``python3`` cannot import the package. Real local Spark, real Kafka.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]

DRIVER = r"""
import json, sys
from pyspark.sql import SparkSession
import spark_source
from spark_source.source import OrderedKafkaDataSource

mode, bootstrap, topic, bad_python = sys.argv[1:5]
spark = (
    SparkSession.builder.master("local[1]")
    .config("spark.ui.enabled", "false")
    .getOrCreate()
)
spark.sparkContext.setLogLevel("OFF")
out = {}

def count():
    frame = (
        spark.read.format("ordered-kafka")
        .option("kafka.bootstrap.servers", bootstrap)
        .option("subscribe", topic)
        .load()
    )
    return frame.count()

if mode == "raw":
    # What the package did before: register the class, nothing else.
    spark.dataSource.register(OrderedKafkaDataSource)
    try:
        out["raw"] = count()
    except Exception as exc:
        out["raw_error"] = str(exc)[-3000:]
try:
    spark_source.register(spark)
    out["worker_python"] = spark.sparkContext.pythonExec
    out["rows"] = count()
except Exception as exc:
    out["error"] = f"{type(exc).__name__}: {exc}"
# The same driver, now told to run workers with an interpreter that lacks the package.
import os
os.environ["PYSPARK_PYTHON"] = bad_python
try:
    spark_source.register(spark)
    out["misconfigured_rows"] = count()
except Exception as exc:
    out["misconfigured_error"] = f"{type(exc).__name__}: {exc}"
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
"""


def bare_env(**extra: str) -> dict[str, str]:
    """The environment of a user who runs the venv's python without activating it."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYSPARK_", "SPARK_"))}
    env.pop("VIRTUAL_ENV", None)
    venv_bin = os.path.dirname(sys.executable)
    env["PATH"] = os.pathsep.join(
        p for p in env.get("PATH", "").split(os.pathsep) if os.path.abspath(p) != venv_bin
    )
    env.update(extra)
    return env


def run_driver(
    tmp_path: Path, mode: str, bootstrap: str, topic: str, env: dict[str, str], bad_python: str
) -> dict:
    script = tmp_path / "driver.py"
    script.write_text(DRIVER)
    done = subprocess.run(
        [sys.executable, str(script), mode, bootstrap, topic, bad_python],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    for line in done.stdout.splitlines():
        if line.startswith("RESULT "):
            result: dict = json.loads(line[len("RESULT ") :])
            return result
    raise AssertionError(f"driver failed ({done.returncode}):\n{done.stderr[-4000:]}")


@pytest.fixture
def filled_topic(topic_factory: Callable[..., str], bootstrap: str) -> str:
    topic = topic_factory(2)
    producer = Producer({"bootstrap.servers": bootstrap})
    for i in range(50):
        producer.produce(topic, b"v", f"k{i}".encode())
    assert producer.flush(30) == 0
    return topic


def path_python_lacks_the_package(env: dict[str, str]) -> str:
    python3 = shutil.which("python3", path=env["PATH"])
    if python3 is None:
        pytest.skip("no python3 on PATH: Spark's default worker interpreter is missing")
    check = subprocess.run(
        [python3, "-c", "import spark_source, pyarrow"], env=env, capture_output=True, timeout=60
    )
    if check.returncode == 0:
        pytest.skip(f"{python3} imports the package: nothing to guard against here")
    return python3


def test_register_makes_workers_run_the_drivers_interpreter_or_fails_naming_both_settings(
    filled_topic: str, bootstrap: str, tmp_path: Path
) -> None:
    env = bare_env()
    python3 = path_python_lacks_the_package(env)
    result = run_driver(tmp_path, "raw", bootstrap, filled_topic, env, python3)
    # Registering the class alone fails at the first read, deep in a worker.
    assert "raw" not in result, result
    assert "No module named" in result["raw_error"], result["raw_error"]
    # Without PYSPARK_PYTHON, register() makes the same read work.
    assert result.get("error") is None, result
    assert result["worker_python"] == sys.executable
    assert result["rows"] == 50
    # With PYSPARK_PYTHON naming an interpreter without the package: refused at once.
    assert "misconfigured_rows" not in result, result
    error = result["misconfigured_error"]
    assert error.startswith("ConfigError: "), error
    assert "PYSPARK_PYTHON" in error and "spark.pyspark.python" in error, error
    assert python3 in error


def test_register_gives_only_the_sources_processes_the_startup_hook(spark: Any) -> None:
    # Spark starts the source's processes with the registered data source's environment:
    # the hook's folder first on their PYTHONPATH; the session's own environment (UDFs)
    # stays as the user set it.
    from spark_source.workers import STARTUP

    manager = spark._jsparkSession.sessionState().dataSourceManager()
    env = dict(manager.lookupDataSource("ordered-kafka").dataSourceCls().envVars())
    assert env["PYTHONPATH"].split(os.pathsep)[0] == STARTUP
    assert STARTUP not in spark.sparkContext.environment.get("PYTHONPATH", "")
