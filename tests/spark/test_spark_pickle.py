"""What crosses the pickle boundary: the reader and its tasks carry options, never clients.

Spark pickles the stream reader (to the driver-side planner process and to the
executors) and every ``InputPartition``. After the driver has planned with live Kafka
and ZooKeeper clients, the pickles must name no client class and no lock.
"""

from __future__ import annotations

import pickle
import pickletools

import pytest
from pyspark.sql.streaming.datasource import ReadAllAvailable
from spark_helpers import SparkQueries

from spark_source.options import parse_source_options
from spark_source.source import OrderedKafkaStreamReader

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_FORBIDDEN = ("confluent_kafka", "cimpl", "kazoo", "_thread", "threading", "socket")


def modules_named(data: bytes) -> set[str]:
    """The modules of every class or function a pickle refers to."""
    names: set[str] = set()
    strings: list[str] = []
    for op, arg, _pos in pickletools.genops(data):
        if op.name in ("GLOBAL", "INST"):
            names.add(str(arg).split(" ")[0])
        elif op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(str(arg))
        elif op.name == "STACK_GLOBAL" and len(strings) >= 2:
            names.add(strings[-2])
    return names


def test_a_reader_that_planned_pickles_without_clients(queries: SparkQueries) -> None:
    topic = queries.adopted_topic(2)
    writer = queries.writer()
    writer.write(topic, 100)
    writer.flush()
    writer.close()
    options = queries.options(topic)
    reader = OrderedKafkaStreamReader(parse_source_options(options, streaming=True))
    try:
        start = reader.initialOffset()
        end = reader.latestOffset(start, ReadAllAvailable())
        tasks = reader.partitions(start, end)
        assert reader._cluster is not None  # the driver's clients are open now
        assert sum(t.part.size for t in tasks) == 100

        data = pickle.dumps(reader)
        bad = {m for m in modules_named(data) if m.startswith(_FORBIDDEN)}
        assert not bad, bad
        copy = pickle.loads(data)
        assert copy._cluster is None and copy.options == reader.options
        for task in tasks:
            task_data = pickle.dumps(task)
            assert modules_named(task_data) <= {"spark_source.source", "spark_source.planner"}, (
                modules_named(task_data)
            )
            assert pickle.loads(task_data).part == task.part
    finally:
        reader.stop()
