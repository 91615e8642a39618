"""The wrappers answer as confluent's clients where nothing needs a server.

Each case is checked against confluent's own class first, so a test fails if confluent
changes its answer as well as if the wrapper stops matching it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from typing import Any

import confluent_kafka
import pytest
from confluent_kafka import TopicPartition

from coordinator.kernel.errors import ConfigError
from ordered import OrderedConsumer, OrderedProducer
from ordered.producer.config import split_producer_config

_ZK = {"ordered.zookeeper.connect": "127.0.0.1:1"}


@pytest.mark.parametrize(
    ("theirs", "ours"),
    [(confluent_kafka.Producer, OrderedProducer), (confluent_kafka.Consumer, OrderedConsumer)],
)
@pytest.mark.parametrize("args", [(), ("not a dict",), (["bootstrap.servers"],)])
def test_no_configuration_dict_is_a_type_error(
    theirs: Any, ours: Any, args: tuple[Any, ...]
) -> None:
    with pytest.raises(TypeError, match="expected configuration dict"):
        theirs(*args)
    # Before the ordered.zookeeper.connect check (a ConfigError).
    with pytest.raises(TypeError, match="expected configuration dict"):
        ours(*args)


def _producer_calls(p: Any) -> list[Callable[[], Any]]:
    return [
        lambda: p.produce("topic", value=b"test"),
        lambda: p.produce("topic", b"test", b"key"),
        p.poll,
        p.flush,
        p.purge,
        lambda: p.produce_batch("topic", [{"value": b"test"}]),
        p.init_transactions,
        p.begin_transaction,
        p.commit_transaction,
        p.abort_transaction,
        lambda: p.list_topics(timeout=0.1),
        lambda: p.cluster_id(timeout=0.1),
    ]


def test_uninitialized_producer_methods_raise_runtime_error() -> None:
    class Theirs(confluent_kafka.Producer):
        def __init__(self, config: dict[str, Any]) -> None:
            pass

    class Ours(OrderedProducer):
        def __init__(self, config: dict[str, Any]) -> None:
            pass

    for producer in (Theirs({}), Ours({})):
        for call in _producer_calls(producer):
            # confluent: "Producer has been closed" ("Handle ..." for the metadata calls).
            with pytest.raises(RuntimeError, match="has been closed"):
                call()
        assert len(producer) == 0  # confluent's answer too: nothing is queued


def _consumer_calls(c: Any) -> list[Callable[[], Any]]:
    tp = TopicPartition("topic", 0)
    return [
        lambda: c.subscribe(["topic"]),
        c.unsubscribe,
        c.poll,
        c.consume,
        lambda: c.assign([tp]),
        c.unassign,
        c.assignment,
        c.commit,
        lambda: c.committed([tp]),
        lambda: c.position([tp]),
        lambda: c.seek(TopicPartition("topic", 0, 0)),
        lambda: c.get_watermark_offsets(tp),
        lambda: c.store_offsets([TopicPartition("topic", 0, 42)]),
        lambda: c.offsets_for_times([tp]),
        lambda: c.pause([tp]),
        lambda: c.resume([tp]),
    ]


def test_uninitialized_consumer_methods_raise_runtime_error() -> None:
    class Theirs(confluent_kafka.Consumer):
        def __init__(self, config: dict[str, Any]) -> None:
            pass

    class Ours(OrderedConsumer):
        def __init__(self, config: dict[str, Any]) -> None:
            pass

    for consumer in (Theirs({"group.id": "g"}), Ours({"group.id": "g"})):
        for call in _consumer_calls(consumer):
            with pytest.raises(RuntimeError, match="Consumer closed"):
                call()
        with pytest.raises(RuntimeError, match="Handle has been closed"):
            consumer.list_topics()
        consumer.close()  # succeeds, as confluent's
        with pytest.raises(RuntimeError, match="Consumer closed"):
            consumer.consumer_group_metadata()


def test_subclass_constructor_may_take_more_than_the_configuration() -> None:
    made: list[Any] = []

    class Sub(OrderedProducer):
        def __init__(self, config: dict[str, Any], topic: str) -> None:
            made.append(topic)  # the wrapper's __init__ is not needed to get here

    Sub({}, "t")
    assert made == ["t"]


@pytest.mark.parametrize("key", ["acks", "request.required.acks"])
@pytest.mark.parametrize("value", [0, 1, "0", "1"])
def test_acks_other_than_all_is_refused_at_the_door(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=rf"{key}=.*enable\.idempotence.*acks=all"):
        split_producer_config({**_ZK, key: value})
    # The constructor says so before it tries ZooKeeper (unreachable here).
    with pytest.raises(ConfigError, match=key):
        OrderedProducer({**_ZK, key: value})


@pytest.mark.parametrize("value", ["all", "-1", -1, "ALL"])
def test_acks_all_is_accepted(value: Any) -> None:
    split = split_producer_config({**_ZK, "acks": value})
    assert split.kafka["acks"] == value
    assert split.kafka["enable.idempotence"] is True


def test_wrappers_are_not_instances_of_confluents_classes() -> None:
    # Decided (docs/clients.md, "isinstance"): the wrappers wrap, they do not subclass,
    # so a method added by a later confluent-kafka cannot bypass the routing.
    assert not issubclass(OrderedProducer, confluent_kafka.Producer)
    assert not issubclass(OrderedConsumer, confluent_kafka.Consumer)
    from ordered.producer import send

    assert not issubclass(send.producer_class(OrderedProducer), confluent_kafka.Producer)


_UNREACHABLE = """
import time
from ordered import OrderedProducer, StoreUnavailableError
start = time.monotonic()
try:
    OrderedProducer({"bootstrap.servers": "127.0.0.1:1",
                     "ordered.zookeeper.connect": "127.0.0.1:1"})
except StoreUnavailableError as exc:
    print("refused after", time.monotonic() - start, exc)
"""


def test_unreachable_zookeeper_prints_nothing_and_is_bounded() -> None:
    proc = subprocess.run(
        [sys.executable, "-c", _UNREACHABLE],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    words = proc.stdout.split()
    assert words[:2] == ["refused", "after"], proc.stdout + proc.stderr
    # The documented bound: max(ordered.zookeeper.session.timeout.ms, 10 s).
    assert float(words[2]) < 12.0
    assert proc.stderr == "", proc.stderr  # kazoo's ~15 lines went to its NullHandler
