"""OrderedSerializingProducer and OrderedDeserializingConsumer against the real servers
(issue 30): confluent's serializer keys, context and errors; routing by the serialized key;
string keys and JSON values in order across 2 -> 3 -> 4 -> 2 with nothing lost."""

from __future__ import annotations

import contextlib
import json
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from confluent_kafka import KafkaError, TopicPartition
from confluent_kafka.error import (
    ConsumeError,
    KeyDeserializationError,
    KeySerializationError,
    ValueDeserializationError,
    ValueSerializationError,
)
from confluent_kafka.serialization import (
    DoubleSerializer,
    IntegerSerializer,
    MessageField,
    SerializationContext,
    StringDeserializer,
    StringSerializer,
)
from fixtures import consumer_config

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore
from ordered import OrderedDeserializingConsumer, OrderedProducer, OrderedSerializingProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(180)]


def json_serializer(obj: Any, ctx: SerializationContext) -> bytes | None:
    """A JSON value serializer (confluent's ``JSONSerializer`` needs a Schema Registry)."""
    return None if obj is None else json.dumps(obj, sort_keys=True).encode()


def json_deserializer(data: bytes | None, ctx: SerializationContext) -> Any:
    """The matching deserializer."""
    return None if data is None else json.loads(data)


@pytest.fixture
def settings(bootstrap: str, zk_hosts: str, zk_root: str) -> dict[str, Any]:
    return {
        "bootstrap.servers": bootstrap,
        "ordered.zookeeper.connect": zk_hosts,
        "ordered.zookeeper.root": zk_root,
        "linger.ms": 2,
    }


@pytest.fixture
def closing() -> Iterator[list[Any]]:
    """Clients to close at teardown, whatever happened."""
    made: list[Any] = []
    yield made
    for client in made:
        with contextlib.suppress(Exception):  # closed already by the test
            client.close()


@pytest.fixture
def make_deserializing(
    bootstrap: str,
    zk_hosts: str,
    zk_root: str,
    group_factory: Callable[[], str],
    closing: list[Any],
) -> Callable[[Any, Any], OrderedDeserializingConsumer[Any, Any]]:
    """Make an ``OrderedDeserializingConsumer`` in a new group with the given key and
    value deserializers: ``make_deserializing(key, value)``; closed at teardown."""

    def make(key: Any, value: Any) -> OrderedDeserializingConsumer[Any, Any]:
        consumer: OrderedDeserializingConsumer[Any, Any] = OrderedDeserializingConsumer(
            consumer_config(
                bootstrap,
                zk_hosts,
                zk_root,
                group_factory(),
                **{"key.deserializer": key, "value.deserializer": value},
            )
        )
        closing.append(consumer)
        return consumer

    return make


def delivered(producer: Any, produce: Callable[[Callable[..., None]], None]) -> list[Any]:
    """Run ``produce(on_delivery)``, flush, and return the delivered messages."""
    out: list[Any] = []

    def report(err: KafkaError | None, msg: Any) -> None:
        assert err is None, err
        out.append(msg)

    produce(report)
    assert producer.flush(30) == 0
    return out


def test_serializers_get_confluent_context_keys_and_errors(
    make_deserializing: Callable[[Any, Any], OrderedDeserializingConsumer[Any, Any]],
    settings: dict[str, Any],
    topic_factory: Callable[..., str],
    controller: Controller,
    closing: list[Any],
) -> None:
    """The serializer keys are taken out of the config (OrderedProducer refuses them),
    serializers see confluent's context, and their failures raise confluent's errors."""
    topic = topic_factory(2)
    controller.adopt(topic)
    seen: list[tuple[str, Any, Any]] = []

    def value_serializer(obj: Any, ctx: SerializationContext) -> bytes:
        seen.append((ctx.topic, ctx.field, ctx.headers))
        if obj == "bad":
            raise ValueError("bad value")
        return json_serializer(obj, ctx) or b""

    def key_serializer(obj: Any, ctx: SerializationContext) -> bytes:
        seen.append((ctx.topic, ctx.field, ctx.headers))
        if obj == "bad":
            raise ValueError("bad key")
        return str(obj).encode()

    config = {**settings, "key.serializer": key_serializer, "value.serializer": value_serializer}
    with pytest.raises(Exception, match=r"key\.serializer"):
        OrderedProducer(dict(config))  # the plain wrapper does not know these keys
    producer: OrderedSerializingProducer[str, Any] = OrderedSerializingProducer(config)
    closing.append(producer)
    assert "key.serializer" in config  # the caller's dict is not modified
    headers = [("h", b"1")]
    msgs = delivered(
        producer,
        lambda cb: producer.produce(
            topic, key="k1", value={"n": 1}, headers=headers, on_delivery=cb
        ),
    )
    assert seen == [(topic, MessageField.KEY, headers), (topic, MessageField.VALUE, headers)]
    assert [(m.key(), m.value()) for m in msgs] == [(b"k1", b'{"n": 1}')]
    with pytest.raises(KeySerializationError, match="bad key"):
        producer.produce(topic, key="bad", value=1)
    with pytest.raises(ValueSerializationError, match="bad value"):
        producer.produce(topic, key="k", value="bad")
    with pytest.raises(TypeError):
        producer.produce(b"not a str", key="k", value=1)  # type: ignore[arg-type]
    assert producer.close() is True
    calls = len(seen)
    with pytest.raises(RuntimeError, match="closed"):
        producer.produce(topic, key="k", value=1)
    assert len(seen) == calls  # refused before the serializers ran, as in confluent

    def key_deserializer(data: bytes | None, ctx: SerializationContext) -> str:
        assert (ctx.topic, ctx.field) == (topic, MessageField.KEY)
        assert ctx.headers == headers
        if data == b"bad":
            raise ValueError("bad key")
        return (data or b"").decode()

    def value_deserializer(data: bytes | None, ctx: SerializationContext) -> Any:
        assert (ctx.topic, ctx.field) == (topic, MessageField.VALUE)
        return json_deserializer(data, ctx)

    raw = OrderedProducer(dict(settings))
    closing.append(raw)
    raw.produce(topic, value=b"not json", key=b"k1", headers=headers)
    raw.produce(topic, value=b"{}", key=b"bad", headers=headers)
    assert raw.flush(30) == 0
    consumer: OrderedDeserializingConsumer[str, Any] = make_deserializing(
        key_deserializer, value_deserializer
    )
    with pytest.raises(NotImplementedError):
        consumer.consume(10, 1.0)
    consumer.assign([TopicPartition(topic, p, 0) for p in (0, 1)])
    got: list[Any] = []
    errors: list[Exception] = []
    deadline = time.monotonic() + 30
    while len(got) + len(errors) < 4 and time.monotonic() < deadline:
        try:
            msg = consumer.poll(0.5)
        except (KeyDeserializationError, ValueDeserializationError) as exc:
            errors.append(exc)
            continue
        except ConsumeError:
            continue  # transient events of a fresh topic
        if msg is not None:
            got.append(msg)
    assert [(m.key(), m.value()) for m in got] == [("k1", {"n": 1})]
    assert got[0].deserialized_key() == "k1"
    assert sorted(type(e).__name__ for e in errors) == [
        "KeyDeserializationError",
        "ValueDeserializationError",
    ]
    for exc in errors:
        assert exc.kafka_message is not None and exc.kafka_message.topic() == topic  # type: ignore[attr-defined]


def test_routing_by_serialized_key_agrees_with_ordered_producer(
    settings: dict[str, Any],
    topic_factory: Callable[..., str],
    controller: Controller,
    store: LayoutStore,
    closing: list[Any],
) -> None:
    """A key through confluent's String/Integer/Double serializers lands where
    OrderedProducer puts the same bytes, and where the layout says, after an expansion."""
    topic = topic_factory(2)
    controller.adopt(topic)
    controller.expand(topic, 3)
    layout = store.get_topic(topic)
    assert layout is not None and layout.active == 3
    cases: list[tuple[Any, Any]] = [
        (StringSerializer("utf_8"), [f"customer-{i}" for i in range(40)]),
        # Not UTF-8: routing the str itself would place these keys elsewhere.
        (StringSerializer("utf_16"), [f"customer-{i}" for i in range(40)]),
        (IntegerSerializer(), list(range(40))),
        (DoubleSerializer(), [i / 7 for i in range(40)]),
    ]
    plain = OrderedProducer(dict(settings))
    closing.append(plain)
    for serializer, keys in cases:
        producer: OrderedSerializingProducer[Any, str] = OrderedSerializingProducer(
            {**settings, "key.serializer": serializer, "value.serializer": StringSerializer()}
        )
        closing.append(producer)
        ours = delivered(
            producer,
            lambda cb, p=producer, ks=keys: (
                [p.produce(topic, key=k, value="v", on_delivery=cb) for k in ks] and None
            ),
        )
        raw = [serializer(k, SerializationContext(topic, MessageField.KEY)) for k in keys]
        theirs = delivered(
            plain,
            lambda cb, rs=raw: [plain.produce(topic, b"v", r, on_delivery=cb) for r in rs] and None,
        )
        route = plain.layout(topic)
        assert route is not None and route.active == 3
        by_key = {m.key(): m.partition() for m in ours}
        assert by_key == {m.key(): m.partition() for m in theirs}
        assert by_key == {r: route.partition_for(r) for r in raw}
        assert len(set(by_key.values())) == 3  # the keys spread over the 3 partitions
        producer.close()


KEYS = 30


def test_string_keys_json_values_in_order_across_2_3_4_2(
    make_deserializing: Callable[[Any, Any], OrderedDeserializingConsumer[Any, Any]],
    settings: dict[str, Any],
    topic_factory: Callable[..., str],
    controller: Controller,
    store: LayoutStore,
    closing: list[Any],
) -> None:
    """The issue's must-show: a serializing producer writes while the topic goes
    2 -> 3 -> 4 -> 2; a deserializing consumer reads every key in order, nothing lost."""
    topic = topic_factory(2)
    controller.adopt(topic)
    producer: OrderedSerializingProducer[str, dict[str, Any]] = OrderedSerializingProducer(
        {**settings, "key.serializer": StringSerializer(), "value.serializer": json_serializer}
    )
    closing.append(producer)
    stop = threading.Event()
    acked: list[int] = [0]
    failures: list[Any] = []
    seq = [0] * KEYS

    def report(err: KafkaError | None, msg: Any) -> None:
        if err is None:
            acked[0] += 1
        else:
            failures.append(err)

    def write() -> None:
        i = 0
        while not stop.is_set():
            j = i % KEYS
            try:
                producer.produce(
                    topic, key=f"key-{j}", value={"key": j, "seq": seq[j]}, on_delivery=report
                )
            except BufferError:
                producer.poll(0.02)
                continue
            seq[j] += 1
            i += 1
            if i % 20 == 0:
                producer.poll(0)
                time.sleep(0.002)

    writer = threading.Thread(target=write, name="serializing-writer")
    writer.start()
    try:
        for step in ("expand 3", "expand 4", "shrink 2"):
            time.sleep(1.0)
            verb, to = step.split()
            result = getattr(controller, verb)(topic, int(to))
            # The producer acked the barrier itself (no expiry, no grace waited).
            assert result.epoch > 0 and not result.expired, (step, result)
        time.sleep(1.0)
    finally:
        stop.set()
        writer.join(30)
    assert producer.flush(30) == 0
    assert failures == []
    sent = sum(seq)
    assert acked[0] == sent and sent > 500
    epochs = store.epochs(topic)
    assert [(e.from_active, e.to_active) for e in epochs[1:]] == [(2, 3), (3, 4), (4, 2)]
    assert all(e.sealed for e in epochs)

    consumer: OrderedDeserializingConsumer[str, dict[str, Any]] = make_deserializing(
        StringDeserializer(), json_deserializer
    )
    assigned: list[Any] = []
    consumer.subscribe([topic], on_assign=lambda c, partitions: assigned.append(c))
    per_key: dict[str, list[int]] = defaultdict(list)
    count = 0
    deadline = time.monotonic() + 90
    while count < sent and time.monotonic() < deadline:
        try:
            msg = consumer.poll(0.5)
        except ConsumeError:
            continue  # transient events of a fresh group
        if msg is None:
            continue
        key, value = msg.key(), msg.value()
        assert isinstance(key, str) and key == f"key-{value['key']}"
        per_key[key].append(value["seq"])
        count += 1
    assert count == sent, f"read {count} of {sent}"
    # Rebalance callbacks get the deserializing consumer, as confluent's get theirs.
    assert assigned and all(c is consumer for c in assigned)
    for j in range(KEYS):
        got = per_key[f"key-{j}"]
        assert got == list(range(seq[j])), f"key-{j}: out of order or lost"
