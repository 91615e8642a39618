"""The serializing clients' surface is confluent's SerializingProducer/DeserializingConsumer."""

from __future__ import annotations

import inspect

import pytest
from confluent_kafka import DeserializingConsumer, SerializingProducer

from ordered import OrderedDeserializingConsumer, OrderedSerializingProducer

_DUNDERS = ("__len__", "__bool__", "__enter__", "__exit__")


def missing(confluent: type, ours: type) -> set[str]:
    """Public methods (and protocol dunders) of ``confluent`` that ``ours`` lacks."""
    names = {n for n in dir(confluent) if not n.startswith("_")}
    names |= {n for n in _DUNDERS if n in dir(confluent)}
    return {n for n in names if n not in vars(ours)}


@pytest.mark.parametrize(
    ("confluent", "ours"),
    [
        (SerializingProducer, OrderedSerializingProducer),
        (DeserializingConsumer, OrderedDeserializingConsumer),
    ],
)
def test_every_public_method_is_forwarded(confluent: type, ours: type) -> None:
    assert missing(confluent, ours) == set()
    assert "__getattr__" not in vars(ours)


@pytest.mark.parametrize(
    ("confluent", "ours", "method"),
    [
        (SerializingProducer, OrderedSerializingProducer, "produce"),
        (DeserializingConsumer, OrderedDeserializingConsumer, "poll"),
        (DeserializingConsumer, OrderedDeserializingConsumer, "consume"),
    ],
)
def test_signature_is_confluents(confluent: type, ours: type, method: str) -> None:
    def shape(cls: type) -> list[tuple[str, object, object]]:
        params = inspect.signature(getattr(cls, method)).parameters.values()
        return [(p.name, p.kind, p.default) for p in params]

    assert shape(ours) == shape(confluent)


@pytest.mark.parametrize(
    ("cls", "prop"),
    [
        (OrderedSerializingProducer, "key.serializer"),
        (OrderedSerializingProducer, "value.serializer"),
        (OrderedDeserializingConsumer, "key.deserializer"),
        (OrderedDeserializingConsumer, "value.deserializer"),
    ],
)
def test_a_serde_and_its_builder_are_refused_before_any_connection(cls: type, prop: str) -> None:
    # No ZooKeeper or Kafka address at all: the check comes first, as in confluent.
    with pytest.raises(ValueError, match="Cannot configure both"):
        cls({prop: lambda obj, ctx: obj, prop + ".builder": object()})
