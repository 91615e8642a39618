"""A producer under a store root where its topic has no layout: it says so, and tidies up.

With ``ordered.zookeeper.root`` pointing elsewhere than where the topic was adopted, a
producer routes the topic as a plain one (librdkafka's partitioner): keys may land on
retired partitions. It warns once per topic, naming the topic and the root (and the
default root, when the topic is adopted there). Its registration under that root
lives while it produces (a later adoption's barrier must list it) and goes, with the
empty topic node, when it closes.
"""

from __future__ import annotations

import logging

import pytest
from kit import Kit

from coordinator.kernel.store import DEFAULT_ROOT

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

_LOGGER = "ordered.producer.topics"


def _warnings(caplog: pytest.LogCaptureFixture, topic: str) -> list[str]:
    return [
        r.getMessage()
        for r in caplog.records
        if r.name == _LOGGER and r.levelno == logging.WARNING and topic in r.getMessage()
    ]


def test_keyed_records_without_a_layout_warn_once(
    kit: Kit, caplog: pytest.LogCaptureFixture
) -> None:
    topic = kit.adopted_topic(2)  # adopted under this test's root
    other = kit.zk_root + "-other"
    # The same name adopted under the default root too: the warning says so.
    marker = f"{DEFAULT_ROOT}/topics/{topic}"
    kit.zk.create(marker, b'{"topic": "x"}', makepath=True)
    try:
        caplog.set_level(logging.WARNING, logger=_LOGGER)
        producer = kit.make_producer(**{"ordered.zookeeper.root": other})
        for i in range(20):
            producer.produce(topic, value=b"v", key=f"k{i}")
        assert producer.flush(30) == 0
        found = _warnings(caplog, topic)
        assert len(found) == 1, found  # once per topic, not per record
        assert f"{topic} has no layout under the store root {other}" in found[0]
        assert f"adopted under {DEFAULT_ROOT}" in found[0]
        producer.close()
    finally:
        kit.zk.delete(marker)


def test_registration_nodes_go_with_the_last_producer(kit: Kit) -> None:
    other = kit.zk_root + "-other"
    unadopted = kit.topic_factory(2)
    missing = f"missing-{unadopted}"  # no such topic in Kafka
    adopted = kit.adopted_topic(2)
    first = kit.make_producer(**{"ordered.zookeeper.root": other, "message.timeout.ms": 3000})
    second = kit.make_producer(**{"ordered.zookeeper.root": other})
    for topic in (unadopted, missing):
        first.produce(topic, value=b"v", key=b"k")
    first.produce(adopted, value=b"v", key=b"k")
    second.produce(unadopted, value=b"v", key=b"k")
    first.flush(10)
    assert second.flush(30) == 0
    nodes = {t: f"{other}/topics/{t}" for t in (unadopted, missing)}
    # Registered while producing: a later adoption's barrier must list them.
    assert kit.zk.exists(nodes[unadopted] + "/producers") is not None
    assert kit.zk.exists(nodes[missing] + "/producers") is not None

    first.close()
    assert kit.zk.exists(nodes[missing]) is None  # nobody left on it
    assert kit.zk.exists(nodes[unadopted] + "/producers") is not None  # second is on it
    second.close()
    assert kit.zk.exists(nodes[unadopted]) is None

    # Under the test's own root the adopted topic keeps its node (and producers node).
    mine = kit.make_producer()
    mine.produce(adopted, value=b"v", key=b"k")
    assert mine.flush(30) == 0
    mine.close()
    assert kit.zk.exists(f"{kit.zk_root}/topics/{adopted}/producers") is not None
