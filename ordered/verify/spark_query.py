"""A verifiable reader over the ``ordered-kafka`` source: a Spark query that records every row.

``python -m ordered.verify.spark_query --topic T --history FILE --stats FILE ...`` runs a
streaming query (``local[2]``, or ``--master spark://...``: a standalone cluster) on the
topic from its start, with its checkpoint in ``--checkpoint`` (a restart with the same
folder goes on from there) or a fresh temporary folder. Every micro-batch is ordered
by ``(partition, offset)`` (within a batch all records of a key come from one
partition, so that is key order) and each row is appended to the history as a
delivery of group ``--group`` by reader ``--reader`` (the event format of
:mod:`ordered.verify.history`), for the same checker as the ``OrderedConsumer`` readers.
After each batch the stats file holds ``{"rows", "delivered", "batches"}``; a failed
query writes ``{"error"}`` there and exits 1. SIGTERM stops the query and Spark; SIGHUP
drains: the query runs on and stops once no row came for ``--idle-exit`` seconds.

A Spark query keeps its offsets in its checkpoint, not in Kafka, so the drain monitor
and ``ordered trim --consumed`` cannot see how far it has read. This reader therefore
also commits, after each batch, the offsets it has read to the Kafka consumer group
``--commit-group`` (never joined: an admin call), which makes it an interested
group: no trim removes a record before the query has read it.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from types import FrameType
from typing import Any

from confluent_kafka import KafkaError

from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.kafka_retry import RetryPolicy, kafka_error_of, kafka_retriable
from ordered.verify.history import HistoryWriter, now_ns
from ordered.verify.producer import decode_value

__all__ = ["main", "session_builder"]

_stop = threading.Event()
_drain = threading.Event()


def _on_signal(signum: int, _frame: FrameType | None) -> None:
    (_drain if signum == signal.SIGHUP else _stop).set()


def _write_stats(path: str, stats: dict[str, Any]) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w") as handle:
        json.dump(stats, handle, sort_keys=True)
    os.replace(tmp, path)


_RELAY_CODES = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._ALL_BROKERS_DOWN,
    }
)


def _relay_retriable(exc: BaseException) -> bool:
    # A broker restart or a network cut outlasts one request: the relay waits it out (the
    # checker reads the group's progress, never ahead of what the batch delivered). An
    # answer that did not come in time is the helper's _TIMED_OUT.
    if kafka_retriable(exc):
        return True
    error = kafka_error_of(exc)
    return error is not None and error.code() in _RELAY_CODES


_RELAY = RetryPolicy(
    max_tries=None, deadline=300.0, delay=0.5, max_delay=5.0, retriable=_relay_retriable
)
"""How the query's progress relay to its Kafka group is repeated."""


def _commit(admin: KafkaAdmin, group: str, topic: str, offsets: dict[int, int]) -> None:
    """Commit ``offsets`` (partition -> offset of ``topic``) to ``group``."""
    _RELAY.call(admin.alter_group_offsets, group, {(topic, p): o for p, o in offsets.items()})


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m ordered.verify.spark_query")
    p.add_argument("--topic", required=True)
    p.add_argument("--bootstrap", required=True)
    p.add_argument("--zookeeper", required=True)
    p.add_argument("--root", required=True)
    p.add_argument("--history", required=True)
    p.add_argument("--stats", required=True)
    p.add_argument("--group", default="spark", help="the group name in the history")
    p.add_argument("--commit-group", required=True, help="Kafka group its progress goes to")
    p.add_argument("--reader", default="spark", help="the reader id in the history")
    p.add_argument("--trigger-ms", type=int, default=500)
    p.add_argument("--max-offsets", type=int, default=0, help="maxOffsetsPerTrigger (0: none)")
    p.add_argument("--master", default="local[2]", help="Spark master URL")
    p.add_argument("--checkpoint", default=None, help="checkpoint folder (default: a temp one)")
    p.add_argument(
        "--idle-exit", type=float, default=20.0, help="after SIGHUP: stop after this quiet time"
    )
    return p


def session_builder(master: str, app_name: str) -> Any:
    """A ``SparkSession`` builder for ``master`` as this reader and the Spark tests use it.

    No UI, two shuffle partitions, a 30 s streaming stop timeout; on a standalone cluster
    (``spark://...``) the driver binds to loopback and the executors are sized for two
    one-core workers. The caller adds its own settings and calls ``getOrCreate()``.
    """
    from pyspark.sql import SparkSession

    builder = SparkSession.builder.master(master)
    if master.startswith("spark://"):
        builder = (
            builder.config("spark.driver.host", "127.0.0.1")
            .config("spark.driver.bindAddress", "127.0.0.1")
            .config("spark.executor.memory", "512m")
            .config("spark.executor.cores", "1")
            .config("spark.cores.max", "2")
        )
    return (
        builder.appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.sql.streaming.stopTimeout", "30s")
    )


def main(argv: Sequence[str] | None = None) -> int:
    """Run the query until SIGTERM (or, after SIGHUP, a quiet spell); 0, or 1 if it failed."""
    args = _parser().parse_args(argv)
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, _on_signal)
    # Spark's Python workers must import this environment's packages.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    admin = KafkaAdmin(args.bootstrap, timeout=30.0)
    # Hold trims back from the start: a group without commits would hold nothing back.
    known = range(admin.partition_count(args.topic))
    _commit(admin, args.commit_group, args.topic, dict.fromkeys(known, 0))
    _write_stats(args.stats, {"rows": 0, "delivered": 0, "batches": 0})
    import spark_source

    spark = session_builder(args.master, "ordered-demo-spark").getOrCreate()
    spark.sparkContext.setLogLevel("ERROR")
    spark_source.register(spark)
    history = HistoryWriter(args.history)
    stats = {"rows": 0, "delivered": 0, "batches": 0}
    last_row = [time.monotonic()]

    def record(batch: Any, _batch_id: int) -> None:
        rows = batch.select("key", "value", "partition", "offset").orderBy("partition", "offset")
        ts = now_ns()
        ends: dict[int, int] = {}
        for i, row in enumerate(rows.collect()):
            ends[int(row.partition)] = int(row.offset) + 1
            found = decode_value(bytes(row.value) if row.value is not None else None)
            if found is None:
                continue
            key = bytes(row.key).decode() if row.key is not None else ""
            history.add(
                {
                    "ev": "dlv",
                    "g": args.group,
                    "r": args.reader,
                    "n": 0,
                    "p": found[0],
                    "k": key,
                    "s": found[1],
                    "tp": int(row.partition),
                    "o": int(row.offset),
                    "e": -1,
                    "ts": ts + i,  # distinct stamps keep the batch's (partition, offset) order
                }
            )
            stats["rows"] += 1
        history.flush()
        stats["delivered"] = stats["rows"]
        if ends:
            last_row[0] = time.monotonic()
            _commit(admin, args.commit_group, args.topic, ends)
        stats["batches"] += 1
        _write_stats(args.stats, stats)

    reader = (
        spark.readStream.format(spark_source.NAME)
        .option("kafka.bootstrap.servers", args.bootstrap)
        .option("ordered.zookeeper.connect", args.zookeeper)
        .option("ordered.zookeeper.root", args.root)
        .option("subscribe", args.topic)
        .option("startingOffsets", "earliest")
    )
    if args.max_offsets > 0:
        reader = reader.option("maxOffsetsPerTrigger", str(args.max_offsets))
    reader = reader.load()
    query = (
        # stoppable: the stop at SIGTERM may land in a batch (spark_source.stopping).
        reader.writeStream.foreachBatch(spark_source.stoppable(record))
        .option(
            "checkpointLocation", args.checkpoint or tempfile.mkdtemp(prefix="ordered-demo-spark-")
        )
        .trigger(processingTime=f"{args.trigger_ms} milliseconds")
        .start()
    )
    code = 0
    try:
        while not _stop.is_set():
            if query.awaitTermination(1):
                break  # the query ended on its own: it failed
            # Draining: quiet for long enough once the query has run (asked its source).
            started = query.lastProgress is not None
            if _drain.is_set() and started and time.monotonic() - last_row[0] > args.idle_exit:
                break
        exc = query.exception()
        if exc is not None:
            _write_stats(args.stats, {**stats, "error": str(exc)[:2000]})
            code = 1
    finally:
        query.stop()
        history.close()
        spark.stop()
    return code


if __name__ == "__main__":
    sys.exit(main())
