"""``query.stop()`` while a ``foreachBatch`` function runs a Spark job (issue 29).

Real Spark (a standalone master and two workers unless ORDERED_TEST_SPARK_MASTER says
otherwise), real Kafka. Without :func:`spark_source.stoppable` the stop kills the
stream execution thread with ``java.lang.StackOverflowError`` in Spark's own matching
of the function's error message (:mod:`spark_source.stopping`); with it the query
stops cleanly, the interrupted batch stays uncommitted and runs again on restart.
"""

from __future__ import annotations

import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from py4j.java_gateway import JavaClass
from spark_cluster import find_in_logs, run_logs
from spark_helpers import Collector, KeyedWriter, source_options, start

from spark_source import BatchStoppedError, stoppable
from spark_source.stopping import INTERRUPTIONS, PY4J_PREFIX, stopped_message

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(480)]


def test_a_stop_during_a_batch_stops_the_query_cleanly_and_the_batch_runs_again(
    spark: Any,
    topic_factory: Callable[..., str],
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
    tmp_path: Path,
    tmp_path_factory: pytest.TempPathFactory,
) -> None:
    topic = topic_factory(2)
    writer = KeyedWriter(bootstrap, zk_hosts, zk_root)
    writer.write(topic, 200)
    written = writer.flush()
    writer.close()
    options = source_options(bootstrap, zk_hosts, zk_root, topic)
    checkpoint = tmp_path / "checkpoint"
    entered = threading.Event()
    stopped: list[str] = []

    def busy(frame: Any, batch_id: int) -> None:
        entered.set()
        for _ in range(1200):  # Spark jobs until the stop interrupts one (2 min at most)
            frame.count()
            time.sleep(0.05)

    wrapped = stoppable(busy)

    def observed(frame: Any, batch_id: int) -> None:
        try:
            wrapped(frame, batch_id)
        except BatchStoppedError as error:
            stopped.append(str(error))
            raise

    query = start(spark, options, checkpoint, observed)
    assert entered.wait(180), "the first batch never started"
    time.sleep(1.0)
    query.stop()

    # Spark took it as a stop, not as a failure, and the wrapper is what said so.
    assert query.exception() is None
    assert len(stopped) == 1, stopped
    assert stopped[0].startswith(PY4J_PREFIX) and "Exception" in stopped[0], stopped
    assert len(stopped[0]) < 1000, len(stopped[0])
    assert not (checkpoint / "commits" / "0").exists(), "the interrupted batch was committed"

    driver, others = run_logs(spark, tmp_path_factory.getbasetemp())
    overflow = find_in_logs([*others, *([driver] if driver else [])], "StackOverflowError")
    assert overflow == [], overflow[:5]

    # Restarted from the checkpoint: the interrupted batch runs again, nothing lost.
    sink = Collector()
    query = start(spark, options, checkpoint, stoppable(sink))
    try:
        query.processAllAvailable()
    finally:
        query.stop()
    assert query.exception() is None
    assert 0 in sink.batches
    assert sink.total() == written

    if driver is None:
        pytest.skip("the driver's stderr is a terminal or a pipe: its log was not checked")


class _Interrupted(Exception):
    """Stands for the Py4JJavaError of an interrupted ``count()`` (its ``errmsg``)."""

    errmsg = "An error occurred while calling o124.count.\n"


def test_sparks_own_check_takes_the_wrappers_message_for_a_stop(spark: Any) -> None:
    # The message as py4j hands it to the JVM: the traceback of what the wrapper raises.
    try:
        raise BatchStoppedError(stopped_message(_Interrupted(), INTERRUPTIONS[0], 3)) from None
    except BatchStoppedError:
        text = "An exception was raised by the Python Proxy. Return Message: "
        text += traceback.format_exc()
    jvm = spark.sparkContext._jvm
    error = jvm.py4j.Py4JException(text)
    # Spark 4.3 has it in ...streaming.runtime, older releases in ...streaming.
    streaming = jvm.org.apache.spark.sql.execution.streaming
    execution = streaming.runtime.StreamExecution
    if not isinstance(execution, JavaClass):
        execution = streaming.StreamExecution
    assert isinstance(execution, JavaClass)
    assert execution.isInterruptionException(error, spark.sparkContext._jsc.sc()) is True
