"""The ``ordered-kafka`` source reads the secure cluster: SCRAM as Spark's Kafka source takes it.

The security options are Java client properties under ``kafka.`` (``kafka.sasl.jaas.config``
with a ``ScramLoginModule``), exactly as a query on Spark's own ``kafka`` format passes
them; ZooKeeper credentials come as ``ordered.zookeeper.auth``, as the reader role, over TLS
(``ordered.zookeeper.ssl.*``).
"""

from __future__ import annotations

from typing import Any

import pytest
from secure_fixtures import Secure

from coordinator.control.controller import Controller
from ordered import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.spark, pytest.mark.timeout(360)]


def test_the_source_reads_the_secure_cluster(spark: Any, secure: Secure, secure_root: str) -> None:
    topic = secure.topic(2)
    controller = Controller(secure.store("coordinator", secure_root), secure.admin("coordinator"))
    controller.adopt(topic)
    producer = OrderedProducer(secure.producer_config(secure_root))
    sent = 0
    for phase in range(2):
        for i in range(60):
            producer.produce(topic, f"{phase}:{i}".encode(), f"k{i % 7}".encode())
            sent += 1
        assert producer.flush(30) == 0
        if phase == 0:
            controller.expand(topic, 3, timeout=30)
    producer.close()

    password = secure.password("reader")
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="reader" password="{password}";'
    )
    rows = (
        spark.read.format("ordered-kafka")
        .option("kafka.bootstrap.servers", secure.bootstrap)
        .option("kafka.security.protocol", "SASL_PLAINTEXT")
        .option("kafka.sasl.mechanism", "SCRAM-SHA-512")
        .option("kafka.sasl.jaas.config", jaas)
        .option("subscribe", topic)
        .option("startingOffsets", "earliest")
        .option("ordered.zookeeper.connect", secure.zk_hosts)
        .option("ordered.zookeeper.root", secure_root)
        .option("ordered.zookeeper.auth", secure.zk_auth("reader"))
        .options(**secure.zk_tls_settings())
        .load()
        .orderBy("partition", "offset")
        .collect()
    )
    assert len(rows) == sent
    values = sorted(bytes(row.value).decode() for row in rows)
    assert values == sorted(f"{phase}:{i}" for phase in range(2) for i in range(60))
    # Phase 1 went to three partitions: the expansion was read through.
    assert {row.partition for row in rows} == {0, 1, 2}
