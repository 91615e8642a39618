"""A JVM tool that ships with Kafka keeps key order with the ordered jar (issue 27).

Kafka's console producer (``org.apache.kafka.tools.ConsoleProducer``, what
``kafka-console-producer.sh`` runs) takes a producer properties file
(``--command-config``): with ``partitioner.class``, ``interceptor.classes`` and the
``ordered.*`` keys in it and the jar on its classpath, keyed lines fed to it while the
adopted topic expands 2 -> 3 -> 4 reach an ``OrderedConsumer`` in order, nothing lost.
Unchanged tool, configuration only.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from helpers import wait_until
from jvm_helpers import (
    clients_classpath,
    java,
    ordered_jar,
    plugin_properties,
    read_keyed,
    write_properties,
)

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore
from ordered.consumer import OrderedConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
KEYS = 20


def test_console_producer_with_a_properties_file_keeps_order_across_expansions(
    tmp_path: Path,
    topic_factory: Callable[..., str],
    controller: Controller,
    store: LayoutStore,
    make_consumer: Callable[..., OrderedConsumer],
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
) -> None:
    topic = topic_factory(2)
    controller.adopt(topic)
    config = write_properties(
        tmp_path / "producer.properties",
        # A fresh view of the partitions within a second: without the plugins, Kafka's
        # own partitioner would spread the keys over the new partitions at once.
        plugin_properties(
            bootstrap, zk_hosts, zk_root, **{"client.id": "console", "metadata.max.age.ms": 1000}
        ),
    )
    log = open(tmp_path / "console.log", "wb")  # noqa: SIM115 (closed below)
    tool = subprocess.Popen(
        [
            java(),
            "-cp",
            f"{ordered_jar()}:{clients_classpath('4')}",
            "org.apache.kafka.tools.ConsoleProducer",
            "--bootstrap-server",
            bootstrap,
            "--topic",
            topic,
            "--command-config",
            str(config),
            "--reader-property",
            "parse.key=true",
        ],
        stdin=subprocess.PIPE,
        stdout=log,
        stderr=subprocess.STDOUT,
        text=True,
        cwd=ROOT,
    )
    assert tool.stdin is not None
    sent = [0] * KEYS
    stop = threading.Event()
    failure: list[BaseException] = []

    def feed() -> None:
        # "key<TAB>value" lines, about 400 a second, round robin over the keys.
        assert tool.stdin is not None
        i = 0
        try:
            while not stop.is_set():
                k = i % KEYS
                tool.stdin.write(f"k{k}\tk{k}:{sent[k]}\n")
                sent[k] += 1
                i += 1
                if i % 20 == 0:
                    tool.stdin.flush()
                    time.sleep(0.05)
        except BaseException as exc:  # the test fails below with the tool's log
            failure.append(exc)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        registered = wait_until(lambda: store.producers(topic), timeout=60)
        assert [r.language for r in registered.values()] == ["java"], registered
        assert [r.client_id for r in registered.values()] == ["console"], registered
        time.sleep(1.0)
        for to in (3, 4):
            result = controller.expand(topic, to, timeout=30)
            assert set(registered) <= set(result.producers) and result.expired == {}, result
            time.sleep(1.0)
    finally:
        stop.set()
        feeder.join(10)
        tool.stdin.close()  # end of input: the tool flushes, closes and exits
        code = tool.wait(60)
        log.close()
    output = (tmp_path / "console.log").read_text(errors="replace")
    assert not failure and code == 0, f"rc {code} {failure}\n{output[-3000:]}"

    total = sum(sent)
    consumer = make_consumer("console-" + topic)
    consumer.subscribe([topic])
    seqs, partitions = read_keyed(consumer, total, 90)
    assert total > 1000, total
    for k in range(KEYS):
        assert seqs[f"k{k}"] == list(range(sent[k])), (k, seqs[f"k{k}"][:20])
    assert any(len(p) > 1 for p in partitions.values()), partitions
    assert [e.to_active for e in store.epochs(topic)] == [2, 3, 4]
