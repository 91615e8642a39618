"""The producer answers as confluent's where confluent's own tests found it did not.

Against the session's real Kafka and ZooKeeper: a closed producer raises confluent's
``RuntimeError``, and a producer never closed leaves quietly at interpreter exit even
when the application's callbacks raise then.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError
from kit import Kit

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("adopted", [False, True], ids=["plain", "adopted"])
def test_produce_after_close_raises_runtime_error(kit: Kit, adopted: bool) -> None:
    topic = kit.adopted_topic(2) if adopted else kit.topic_factory(2)
    never_used = kit.topic_factory(1)
    producer = kit.make_producer()
    producer.produce(topic, b"v", b"k")
    assert producer.flush(10) == 0
    producer.close()
    for call in (
        lambda: producer.produce(topic, b"v", b"k"),
        lambda: producer.produce(topic, b"v"),
        lambda: producer.produce(topic, b"v", b"k", partition=0),
        lambda: producer.produce(never_used, b"v", b"k"),
        lambda: producer.produce_batch(topic, [{"value": b"v", "key": b"k"}]),
        lambda: producer.produce_batch(never_used, [{"value": b"v"}]),
        producer.poll,
        producer.flush,
    ):
        with pytest.raises(RuntimeError, match="Producer has been closed"):
            call()


# Never closed; its callbacks raise whenever they are served (as in confluent's own
# tests, whose producers are left to the interpreter's exit).
CHILD = textwrap.dedent(
    """
    import sys, time
    from ordered import OrderedProducer

    bootstrap, zookeeper, root, topic = sys.argv[1:5]

    def stats_cb(stats):
        raise RuntimeError("Test exception from stats_cb")

    def error_cb(err):
        raise ValueError("ValueError from error_cb")

    def report(err, msg):
        raise KeyError("from a delivery report")

    base = {"ordered.zookeeper.connect": zookeeper, "ordered.zookeeper.root": root}
    live = OrderedProducer({
        **base, "bootstrap.servers": bootstrap, "linger.ms": 200,
        "statistics.interval.ms": 50, "stats_cb": stats_cb, "error_cb": error_cb,
    })
    nowhere = OrderedProducer({
        **base, "bootstrap.servers": "127.0.0.1:1", "error_cb": error_cb,
        "statistics.interval.ms": 50, "stats_cb": stats_cb,
    })
    for i in range(100):
        live.produce(topic, b"v", b"k%d" % i, on_delivery=report)
    nowhere.produce(topic + "-nowhere", b"v", b"k")  # not adopted: no topic-id check
    time.sleep(0.3)
    print("last line", time.time(), flush=True)
    """
)


def test_unclosed_producers_leave_quietly_at_exit(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, kit.bootstrap, kit.zk_hosts, kit.zk_root, topic],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    last = float(proc.stdout.split()[-1])
    assert "Exception ignored" not in proc.stderr, proc.stderr
    assert "SystemError" not in proc.stderr, proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    # Bounded: 5 s of exit flush at most (and the unreachable one gives up after 1 s).
    assert time.time() - last < 8.0


def test_partition_the_topic_lacks_is_reported_not_raised(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    producer = kit.make_producer()
    try:
        producer.produce(topic, b"first", b"k")  # first use: the topic's metadata is known
        assert producer.flush(10) == 0
        reports: list[tuple[Any, Any]] = []
        # As confluent's application sees it: queued, the error in the delivery report.
        producer.produce(
            topic, b"v", b"k", partition=99, on_delivery=lambda e, m: reports.append((e, m))
        )
        producer.produce(topic, b"v", partition=99)  # no callback: nothing to call
        assert len(producer) >= 2
        assert producer.flush(10) == 0
        assert len(reports) == 1
        err, msg = reports[0]
        assert err.code() == KafkaError._UNKNOWN_PARTITION
        assert (msg.topic(), msg.partition(), msg.key(), msg.value()) == (topic, 99, b"k", b"v")
        assert msg.error() == err
        producer.produce(
            topic, b"v", b"k", partition=99, callback=lambda e, m: reports.append((e, m))
        )
        assert producer.poll(5) >= 1
        assert len(reports) == 2
    finally:
        producer.close()


BAD_BATCHES = [
    ("not_a_list", TypeError, "messages must be a list"),
    ([{"value": b"good"}, "not_dict"], TypeError, "Message at index 1 must be a dict"),
    ([{"value": 123}], TypeError, "Message value at index 0 must be bytes or str"),
    ([{"value": b"v", "key": ["k"]}], TypeError, "Message key at index 0 must be bytes or str"),
    ([{"value": b"v", "partition": "0"}], TypeError, "Message partition at index 0 must be int"),
    ([{"value": b"v", "timestamp": 1}], NotImplementedError, "timestamps are not currently"),
]


@pytest.mark.parametrize("adopted", [False, True], ids=["plain", "adopted"])
def test_a_bad_batch_is_refused_as_confluent_refuses_it(kit: Kit, adopted: bool) -> None:
    # confluent's test_produce_batch_input_validation, on a topic met first by the batch
    # (no route yet) and on one already routed: the same types and messages, nothing sent.
    from confluent_kafka import Producer

    plain = Producer({"bootstrap.servers": kit.bootstrap})
    producer = kit.make_producer()
    for fresh in (True, False):
        topic = kit.adopted_topic(2) if adopted else kit.topic_factory(2)
        if not fresh:
            producer.produce(topic, b"v", b"k")
            assert producer.flush(10) == 0
        for messages, error, text in BAD_BATCHES:
            with pytest.raises(error, match=text):
                plain.produce_batch(topic, messages)  # what confluent says, here too
            with pytest.raises(error, match=text):
                producer.produce_batch(topic, messages)
        assert len(producer) == 0
    producer.close()
