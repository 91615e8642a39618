"""``ordered describe`` lists producers with their client (python or java), host, client id.

A real ``OrderedProducer`` registers as ``python``; a registration as the JVM plugins write
it (``ProducerRecord`` version 2, ``"language": "java"``) is listed as ``java``; and a
version 1 registration, as an older Python producer wrote it, reads as ``python``. The
running Java producer itself is checked in ``test_jvm_cross_language.py``.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import Any

import pytest
from kazoo.client import KazooClient

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore, ProducerRecord
from ordered import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def test_describe_lists_each_producers_language_client_id_and_host(
    topic_factory: Callable[..., str],
    controller: Controller,
    make_producer: Callable[..., OrderedProducer],
    kazoo_factory: Callable[..., KazooClient],
    ordered_cli: Callable[..., Any],
    zk_root: str,
) -> None:
    topic = topic_factory(2)
    controller.adopt(topic)
    producer = make_producer(**{"client.id": "py-orders"})
    producer.produce(topic, b"v", b"k")
    assert producer.flush(30) == 0
    # A registration as the JVM plugins write it, from another session (ephemeral).
    jvm_session = kazoo_factory()
    LayoutStore(jvm_session, zk_root).register_producer(
        topic,
        ProducerRecord(
            id="java-web-2-1",
            host="web-2",
            pid=4242,
            delivery_timeout_ms=120000,
            registered_at=time.time(),
            client_id="producer-1",
            language="java",
        ),
    )
    # And one as an ordered before JVM producers wrote it: version 1, no language.
    old = ProducerRecord(
        id="py-old-1", host="web-3", pid=7, delivery_timeout_ms=60000, registered_at=1.0,
        client_id="legacy",
    )  # fmt: skip
    raw = json.loads(old.to_json())
    raw.pop("language")
    raw["version"] = 1
    jvm_session.create(
        f"{zk_root}/topics/{topic}/producers/py-old-1",
        json.dumps(raw, sort_keys=True).encode(),
        ephemeral=True,
    )

    payload = json.loads(ordered_cli("describe", topic, "--json").stdout)
    producers = payload["producers"]
    assert producers["java-web-2-1"]["language"] == "java"
    assert producers["java-web-2-1"]["host"] == "web-2"
    assert producers["py-old-1"]["language"] == "python"
    mine = producers[producer.producer_id]
    assert mine["language"] == "python" and mine["client_id"] == "py-orders" and mine["host"]
    assert mine["version"] == 2

    text = ordered_cli("describe", topic).stdout
    assert "producers: 3 registered (1 java, 2 python)" in text, text
    assert "java-web-2-1 (java, host web-2, pid 4242, client.id producer-1)" in text, text
    assert f"{producer.producer_id} (python, host {mine['host']}, pid " in text, text
