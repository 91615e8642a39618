"""A Python and Java producers in one barrier (issue 27), against the real cluster.

A Python ``OrderedProducer`` and Java ``KafkaProducer``s with ``OrderedPartitioner`` and
its interceptor write the same keys while the topic goes 2 -> 3 -> 4 -> 2 -> 4. Before the
last expansion one Java producer is frozen and then killed with SIGKILL: the barrier
waits for it only for its grace (its session timeout, then its ``delivery.timeout.ms``
+ 1 s). An ``OrderedConsumer`` group then reads every key in order with nothing lost
(the verify checker, on both languages' histories), and every key went to one
partition per epoch whichever language wrote it.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from fixtures import consumer_config, run_in_background
from helpers import wait_until
from jvm_helpers import JavaProducer, plugin_properties

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore
from linear_hash import partition_for
from ordered.verify import VerifiableProducer, VerifiableReader, check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

KEYS = [f"k{i}" for i in range(20)]


@pytest.fixture
def java_producers() -> Iterator[list[JavaProducer]]:
    started: list[JavaProducer] = []
    yield started
    for producer in started:
        producer.kill()


def _read_all(readers: list[VerifiableReader], want: int, timeout: float = 120.0) -> None:
    for reader in readers:
        reader.subscribe()
    deadline = time.monotonic() + timeout
    while sum(r.delivered for r in readers) < want:
        delivered = sum(r.delivered for r in readers)
        assert time.monotonic() < deadline, f"delivered {delivered} of {want}"
        for reader in readers:
            reader.poll_once(0.2)


def test_python_and_java_producers_share_the_barrier_through_grow_and_shrink(
    tmp_path: Path,
    topic_factory: Callable[..., str],
    controller: Controller,
    store: LayoutStore,
    java_producers: list[JavaProducer],
    ordered_cli: Callable[..., Any],
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
) -> None:
    topic = topic_factory(2)
    adopted = controller.adopt(topic)
    history = tmp_path / "history"
    props = plugin_properties(bootstrap, zk_hosts, zk_root, **{"client.id": "jv-main"})
    main = JavaProducer("java", topic, history / "java.jsonl", props, seed=1)
    # The victim: a short session and delivery timeout, so its grace is a few seconds.
    victim_props = plugin_properties(
        bootstrap,
        zk_hosts,
        zk_root,
        **{
            "client.id": "jv-victim",
            "ordered.zookeeper.session.timeout.ms": "2000",
            "delivery.timeout.ms": "3000",
            "request.timeout.ms": "2000",
        },
    )
    victim = JavaProducer("victim", topic, history / "victim.jsonl", victim_props, seed=2)
    java_producers += [main, victim]
    python = VerifiableProducer(
        {
            "bootstrap.servers": bootstrap,
            "ordered.zookeeper.connect": zk_hosts,
            "ordered.zookeeper.root": zk_root,
            "linger.ms": 5,
        },
        "python",
        topic,
        history / "python.jsonl",
        KEYS,
        seed=3,
    )
    stop_python = False
    writer = run_in_background(python.run, 300.0, stop=lambda: stop_python)
    try:
        main.ready()
        victim.ready()
        deadline = time.monotonic() + 30
        while len(store.producers(topic)) < 3:
            assert time.monotonic() < deadline, (
                f"3 producers, not {store.producers(topic)}\n{main.log()}\n{victim.log()}"
            )
            time.sleep(0.1)

        # describe lists each producer with its language, client id and host.
        described = json.loads(ordered_cli("describe", topic, "--json").stdout)
        by_client = {p["client_id"]: p for p in described["producers"].values()}
        assert by_client["jv-main"]["language"] == "java", by_client
        assert by_client["jv-victim"]["language"] == "java"
        assert [p["language"] for p in described["producers"].values()].count("python") == 1
        assert all(p["host"] for p in by_client.values())
        text = ordered_cli("describe", topic).stdout
        assert "producers: 3 registered (2 java, 1 python)" in text, text
        assert "(java, host " in text and "client.id jv-main" in text, text
        ids = set(store.producers(topic))
        victim_id = next(i for i, p in store.producers(topic).items() if p.client_id == "jv-victim")

        time.sleep(1.0)
        for step, to in (("expand", 3), ("expand", 4), ("shrink", 2)):
            result = getattr(controller, step)(topic, to, timeout=30)
            # Every producer, Java or Python, acked: none expired, within seconds.
            assert ids <= set(result.producers), (result.producers, ids)
            assert result.expired == {}, result
            assert result.seconds < 10, result
            time.sleep(1.0)

        # The victim stops acking (frozen), then dies inside the pending epoch.
        victim.freeze()
        frozen = time.monotonic()
        expand = run_in_background(controller.expand, topic, 4, timeout=60)
        wait_until(lambda: (t := store.get_topic(topic)) is not None and t.pending == 4, 20)
        victim.kill()
        result = expand.join(60)
        sealed_after = expand.finished_at - frozen
        assert set(result.expired) == {victim_id}, result
        epoch = store.get_epoch(topic, 4)
        assert epoch.sealed and epoch.sealed_at is not None
        # Held for its grace: delivery.timeout.ms + 1 s after its session was seen gone...
        assert epoch.sealed_at - epoch.expired[victim_id] >= 3.0 + 1.0 - 0.05, epoch
        # ... after its session timeout: well under Java's default 120 s of grace.
        assert 2.0 + 3.0 <= sealed_after < 20.0, sealed_after
        time.sleep(1.0)
    finally:
        stop_python = True
        writer.join(30)
        python.close()
    counts = main.finish()
    assert counts["nacked"] == 0 and counts["acked"] == counts["sent"] > 500, counts
    assert python.acked == python.sent > 500 and python.nacked == 0

    epochs = store.epochs(topic)
    assert [e.to_active for e in epochs] == [2, 3, 4, 2, 4]
    group = "cross-" + topic
    config = consumer_config(bootstrap, zk_hosts, zk_root, group)
    readers = [
        VerifiableReader(config, group, f"r{i}", topic, history / f"r{i}.jsonl") for i in (1, 2)
    ]
    events = list(read_events(sorted(history.glob("*.jsonl"))))
    acked = sum(1 for e in events if e["ev"] == "ack")
    try:
        _read_all(readers, acked)
    finally:
        for reader in readers:
            reader.close()

    events = list(read_events(sorted(history.glob("*.jsonl"))))
    verdict = check(events)
    assert verdict.holds, verdict.to_dict()
    assert verdict.records == acked
    assert verdict.groups[group]["delivered"] >= acked and verdict.groups[group]["lost"] == 0
    acks = [e for e in events if e["ev"] == "ack"]
    assert {e["p"] for e in acks} == {"java", "victim", "python"}

    # The Python records carry their epoch (the header): each went where linear_hash
    # routes its key in that epoch. A JVM partitioner cannot add a header, so each Java
    # record is checked against the routes its key had in some epoch of the run; Kafka's
    # own murmur2 % n would put many keys elsewhere.
    active = {e.epoch: e.to_active for e in epochs}
    routes = {
        (key, n): partition_for(key.encode(), adopted.initial, count, adopted.algorithm)
        for key in KEYS
        for n, count in active.items()
    }
    dlv = [e for e in events if e["ev"] == "dlv"]
    python_dlv = [e for e in dlv if e["p"] == "python"]
    assert python_dlv and all(e["e"] in active for e in python_dlv)
    for e in python_dlv:
        assert e["tp"] == routes[(e["k"], e["e"])], e
    java_dlv = [e for e in dlv if e["p"] != "python"]
    assert java_dlv
    for e in java_dlv:
        assert e["tp"] in {routes[(e["k"], n)] for n in active}, e
    # Both languages wrote the same keys into the same partitions.
    shared = {(e["k"], e["tp"]) for e in python_dlv} & {(e["k"], e["tp"]) for e in java_dlv}
    assert len(shared) >= len(KEYS), shared
