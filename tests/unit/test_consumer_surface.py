"""OrderedConsumer covers confluent's Consumer method by method, with no fall-through."""

from __future__ import annotations

import inspect

from confluent_kafka import Consumer

from ordered import OrderedConsumer
from ordered.consumer import OrderedConsumer as FromPackage
from ordered.consumer.wrapper import PASSED_THROUGH, WRAPPED


def public_methods(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")}


def test_every_public_confluent_method_is_wrapped_or_listed_as_passed_through() -> None:
    missing = public_methods(Consumer) - WRAPPED - PASSED_THROUGH
    assert not missing, f"confluent Consumer methods the wrapper does not cover: {missing}"
    for name in public_methods(Consumer):
        # Defined on the wrapper itself, not reached through some fall-through.
        assert name in vars(OrderedConsumer), name
    assert not WRAPPED & PASSED_THROUGH


def test_no_attribute_fall_through() -> None:
    assert "__getattr__" not in vars(OrderedConsumer)
    assert "__getattribute__" not in vars(OrderedConsumer)


def test_constructor_shape_is_confluents() -> None:
    params = list(inspect.signature(OrderedConsumer.__init__).parameters.values())
    assert [p.kind for p in params[1:]] == [
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    ]


def test_public_imports() -> None:
    assert OrderedConsumer is FromPackage
