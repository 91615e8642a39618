"""What a Spark Python worker loads: the source never the clients, the sink no consumer.

Every Python worker that runs a task of the source unpickles the reader, so it imports
:mod:`spark_source.source`; the sink's tasks import :mod:`spark_source.sink`. The
source uses the coordinator and the settings table, never ``ordered.consumer`` nor
``ordered.producer`` (their imports cost most of a worker's start-up); the sink builds
an ``OrderedProducer`` but never loads the consumer. import-linter sees only the
imports written in ``spark_source``, not what a package's ``__init__`` pulls in, so
each import runs in a fresh interpreter here.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("pyspark")


def _loaded_after(module: str) -> set[str]:
    code = f"import json, sys\nimport {module}\nprint(json.dumps(sorted(sys.modules)))\n"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def _clients(modules: set[str]) -> list[str]:
    return sorted(
        m
        for m in modules
        if m in ("ordered.consumer", "ordered.producer") or m.startswith("ordered.consumer.")
    )


@pytest.mark.parametrize("module", ["spark_source", "spark_source.source"])
def test_the_source_loads_neither_client(module: str) -> None:
    loaded = _loaded_after(module)
    assert module in loaded
    assert _clients(loaded) == []


def test_the_driver_side_loads_the_layout_store_only_when_it_opens_it() -> None:
    # The stream reader's Cluster imports the store and opens ZooKeeper on a background
    # thread while its first Kafka requests are answered: importing it loads neither.
    loaded = _loaded_after("spark_source.cluster")
    assert "spark_source.cluster" in loaded
    assert _clients(loaded) == []
    assert sorted(m for m in loaded if m.startswith(("coordinator.kernel.store", "kazoo"))) == []


def test_the_sink_loads_the_producer_and_not_the_consumer() -> None:
    loaded = _loaded_after("spark_source.sink")
    assert _clients(loaded) == ["ordered.producer"]
