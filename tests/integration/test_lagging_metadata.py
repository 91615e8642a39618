"""A broker whose metadata lags (seen on three brokers): the controller and the offset
listing must not trust one stale answer (real Kafka, one lagging answer simulated).

A lagging broker cannot be produced on demand, so the admin helper here answers as one
would: the partition count from before an expansion, and librdkafka's "No leaders found"
for the partitions it has not heard of.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from kit import Kit

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin

pytestmark = pytest.mark.integration


class LaggingAdmin(KafkaAdmin):
    """Answers partition counts as a broker that missed the last CreatePartitions."""

    def __init__(self, bootstrap_servers: str) -> None:
        super().__init__(bootstrap_servers, timeout=10.0)
        self.stale: dict[str, int] = {}

    def create_partitions(self, topic: str, total: int) -> bool:
        before = self.partition_count(topic)
        created = super().create_partitions(topic, total)
        self.stale.setdefault(topic, before)
        return created

    def partition_count(self, topic: str) -> int:
        if topic in self.stale:
            return self.stale[topic]
        return super().partition_count(topic)


class _NoLeadersClient:
    """An AdminClient whose metadata cache never learns the new partitions."""

    def list_offsets(self, request: dict[TopicPartition, Any], **_: Any) -> dict[Any, Any]:
        futures: dict[TopicPartition, Future[Any]] = {}
        for tp in request:
            future: Future[Any] = Future()
            error = KafkaError(
                KafkaError._NOENT, "Failed to query partition leaders: No leaders found"
            )
            future.set_exception(KafkaException(error))
            futures[tp] = future
        return futures


def test_expand_trusts_create_partitions_not_a_lagging_count(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    admin = LaggingAdmin(kit.bootstrap)
    try:
        controller = Controller(kit.store, admin)
        controller.adopt(topic)
        result = controller.expand(topic, 4)
        record = kit.store.get_topic(topic)
        assert record is not None
        assert (record.active, record.physical) == (4, 4), record
        assert result.created_partitions
    finally:
        admin.close()


def test_no_leaders_found_is_asked_again_with_a_fresh_client(
    bootstrap: str, topic_factory: Callable[..., str]
) -> None:
    topic = topic_factory(3)
    admin = KafkaAdmin(bootstrap, timeout=5.0)
    try:
        admin._offsets._client = _NoLeadersClient()
        assert admin.end_offsets(topic, [1, 2]) == {1: 0, 2: 0}
    finally:
        admin.close()
