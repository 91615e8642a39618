"""The source and the sink from a Spark Connect client.

A Spark Connect server is started from the pyspark wheel
(``sbin/start-connect-server.sh --wait``, local master, loopback, this interpreter as
``PYSPARK_PYTHON``); the client runs in a subprocess, because a Connect session in
this process would switch pyspark's dispatch for the classic session of the other
tests. Real Kafka, real ZooKeeper.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator

import pytest
from spark_cluster import spark_home
from spark_helpers import SparkQueries

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(300)]

CLIENT = r"""
import json, sys
from pyspark.sql import SparkSession
import spark_source

url, bootstrap, zk, root, topic, checkpoint = sys.argv[1:7]
spark = SparkSession.builder.remote(url).getOrCreate()
spark_source.register(spark)
ordered = {"ordered.zookeeper.connect": zk, "ordered.zookeeper.root": root}
out = {}
frame = spark.range(200).selectExpr(
    "concat('k', cast(id % 10 as string)) as key", "cast(id as string) as value"
).coalesce(1)
frame.write.format("ordered-kafka").option("kafka.bootstrap.servers", bootstrap).option(
    "topic", topic
).options(**ordered).mode("append").save()
query = (
    spark.readStream.format("ordered-kafka")
    .option("kafka.bootstrap.servers", bootstrap)
    .option("subscribe", topic)
    .option("startingOffsets", "earliest")
    .options(**ordered)
    .load()
    .writeStream.format("memory")
    .queryName("connect_read")
    .option("checkpointLocation", checkpoint)
    .trigger(availableNow=True)
    .start()
)
query.awaitTermination(180)
rows = spark.sql(
    "select cast(key as string) k, cast(value as string) v, partition p, offset o "
    "from connect_read"
).collect()
out["rows"] = [[r.k, int(r.v), r.p, r.o] for r in rows]
print("RESULT " + json.dumps(out), flush=True)
spark.stop()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


@pytest.fixture(scope="module")
def connect_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server (local[2]) for this module."""
    directory = tmp_path_factory.mktemp("spark-connect")
    port = _free_port()
    env = dict(
        os.environ,
        SPARK_HOME=spark_home(),
        SPARK_LOCAL_IP="127.0.0.1",
        SPARK_LOG_DIR=str(directory),
        SPARK_PID_DIR=str(directory),
        PYSPARK_PYTHON=sys.executable,
    )
    log = (directory / "server.out").open("wb")
    server = subprocess.Popen(
        [
            os.path.join(spark_home(), "sbin", "start-connect-server.sh"),
            "--wait",
            "--master",
            "local[2]",
            "--conf",
            f"spark.connect.grpc.binding.port={port}",
            "--conf",
            "spark.connect.grpc.binding.address=127.0.0.1",
            "--conf",
            "spark.ui.enabled=false",
            "--conf",
            "spark.sql.shuffle.partitions=2",
        ],
        env=env,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    deadline = time.monotonic() + 120
    try:
        while True:
            with socket.socket() as s:
                if s.connect_ex(("127.0.0.1", port)) == 0:
                    break
            if server.poll() is not None or time.monotonic() > deadline:
                logs = "\n".join(p.read_text(errors="replace")[-3000:] for p in directory.glob("*"))
                raise RuntimeError(f"the Spark Connect server did not start:\n{logs}")
            time.sleep(0.3)
        yield f"sc://127.0.0.1:{port}"
    finally:
        if server.poll() is None:
            os.killpg(server.pid, signal.SIGTERM)
            try:
                server.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(server.pid, signal.SIGKILL)
                server.wait(30)
        log.close()


def test_the_sink_and_the_source_work_from_a_connect_client(
    connect_url: str, queries: SparkQueries
) -> None:
    topic = queries.adopted_topic(2)
    script = queries.directory / "client.py"
    script.write_text(CLIENT)
    done = subprocess.run(
        [
            sys.executable,
            str(script),
            connect_url,
            queries.bootstrap,
            queries.zk_hosts,
            queries.zk_root,
            topic,
            str(queries.checkpoint),
        ],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"client failed ({done.returncode}):\n{done.stderr[-4000:]}"
    rows = json.loads(lines[0][len("RESULT ") :])["rows"]
    assert sorted(r[1] for r in rows) == list(range(200))
    # The sink routed by the layout: each key in one partition, written in order.
    by_key: dict[str, list[tuple[int, int, int]]] = {}
    for key, value, partition, offset in rows:
        by_key.setdefault(key, []).append((partition, offset, value))
    for key, seen in by_key.items():
        assert len({p for p, _o, _v in seen}) == 1, key
        values = [v for _p, _o, v in sorted(seen)]
        assert values == sorted(values), key
