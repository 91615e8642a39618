"""A Spark stream thread that dies as its driver's JVM shuts down is not a dead query.

When the chaos run kills a Spark driver's Python process, its JVM shuts down, and the
stream thread may die reporting the query's end to an RPC system already stopped
(``RpcEnvStoppedException``), printed twice. That is the kill itself; a stream thread
that dies of anything else in a running driver is what the run must report.
"""

from __future__ import annotations

from pathlib import Path

from ordered.chaos.spark_reader import dead_stream_threads

HEADER = (
    'Exception in thread "stream execution thread for [id = ef9e, runId = 79f6]" '
    "org.apache.spark.SparkException: Exception thrown in awaitResult: "
)
SHUTDOWN = [
    HEADER,
    "\tat org.apache.spark.sql.execution.streaming.runtime.StreamExecution.run(x.scala:236)",
    HEADER,
    "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)",
    "Caused by: org.apache.spark.rpc.RpcEnvStoppedException: RpcEnv already stopped.",
    "\tat org.apache.spark.rpc.netty.Dispatcher.postMessage(Dispatcher.scala:179)",
    "\t... 8 more",
    "WARNING: Using incubator modules: jdk.incubator.vector",
]
DIED = [
    HEADER,
    "\tat org.apache.spark.util.SparkThreadUtils$.awaitResult(SparkThreadUtils.scala:70)",
    "Caused by: java.lang.IllegalStateException: the source failed",
    "\t... 8 more",
    "2026-12-07 17:14:15,489 INFO spark_source.progress: ordered-kafka progress {}",
]


def test_a_death_in_the_drivers_shutdown_is_left_out_and_any_other_counts(
    tmp_path: Path,
) -> None:
    killed = tmp_path / "killed.log"
    killed.write_text("\n".join(SHUTDOWN) + "\n")
    assert dead_stream_threads([killed]) == []
    running = tmp_path / "running.log"
    running.write_text("\n".join(SHUTDOWN + DIED) + "\n")
    dead = dead_stream_threads([running])
    assert len(dead) == 1 and dead[0].startswith(f"{running}: Exception in thread")
    assert dead_stream_threads([tmp_path / "absent.log"]) == []
