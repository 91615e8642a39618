"""The Spark source's planner asks Kafka for the metadata it needs, not the cluster's.

``Cluster.partitions`` runs at every micro-batch: with ``subscribe`` it must name the
subscribed topics (a request for every topic grows with the whole cluster), skip a
topic that does not exist without creating it, and with ``subscribePattern`` match
whole names against the cluster's topics. Real Kafka, no Spark.
"""

from __future__ import annotations

from typing import Any

import pytest
from helpers import create_topic, unique

pytest.importorskip("pyspark")
from spark_source.cluster import Cluster
from spark_source.options import parse_source_options

pytestmark = [pytest.mark.integration, pytest.mark.timeout(90)]


class _Recording:
    """The real AdminClient, with the topic of each ``list_topics`` call noted."""

    def __init__(self, admin: Any) -> None:
        self.admin = admin
        self.asked: list[str | None] = []

    def list_topics(self, topic: str | None = None, **kwargs: Any) -> Any:
        self.asked.append(topic)
        return self.admin.list_topics(topic, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.admin, name)


def _cluster(bootstrap: str, **options: str) -> tuple[Cluster, _Recording]:
    parsed = parse_source_options({"kafka.bootstrap.servers": bootstrap, **options}, streaming=True)
    cluster = Cluster(parsed, timeout=20, open_store=False)
    recording = _Recording(cluster._admin._admin)
    cluster._admin._admin = recording
    return cluster, recording


def test_subscribe_asks_for_the_named_topics_only(bootstrap: str) -> None:
    a = create_topic(bootstrap, unique("meta-a"), 2)
    b = create_topic(bootstrap, unique("meta-b"), 3)
    missing = unique("meta-missing")
    cluster, recording = _cluster(bootstrap, subscribe=f"{a},{missing},{b}")
    try:
        assert cluster.partitions() == {a: [0, 1], b: [0, 1, 2]}
        assert sorted(t for t in recording.asked if t is not None) == sorted([a, missing, b])
        assert None not in recording.asked  # never the whole cluster's metadata
        assert missing not in recording.admin.list_topics(timeout=10).topics  # not created
    finally:
        cluster.close()


def test_a_pattern_matches_whole_names_among_the_clusters_topics(bootstrap: str) -> None:
    prefix = unique("meta-p")
    one = create_topic(bootstrap, f"{prefix}-1", 1)
    two = create_topic(bootstrap, f"{prefix}-2", 2)
    create_topic(bootstrap, f"x{prefix}-3", 1)  # matches only as a substring
    cluster, _recording = _cluster(bootstrap, subscribePattern=f"{prefix}-.*")
    try:
        assert cluster.partitions() == {one: [0], two: [0, 1]}
    finally:
        cluster.close()
