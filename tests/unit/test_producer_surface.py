"""The wrapper's surface: every public confluent Producer method is wrapped explicitly."""

from __future__ import annotations

import inspect

import confluent_kafka

from ordered.producer import PASSED_THROUGH, OrderedProducer

# Protocol methods confluent's Producer defines that a drop-in must keep.
_DUNDERS = ("__len__", "__bool__", "__enter__", "__exit__")


def unwrapped(confluent: type, wrapper: type, passed: frozenset[str]) -> set[str]:
    """Public methods (and protocol dunders) of ``confluent`` that ``wrapper`` lacks."""
    names = {n for n in dir(confluent) if not n.startswith("_")}
    names |= {n for n in _DUNDERS if n in dir(confluent)}
    return {n for n in names if n not in passed and n not in vars(wrapper)}


def test_every_public_confluent_method_is_wrapped_or_listed() -> None:
    missing = unwrapped(confluent_kafka.Producer, OrderedProducer, PASSED_THROUGH)
    assert not missing, (
        f"confluent_kafka.Producer has {sorted(missing)}: wrap them in OrderedProducer "
        "(or list them in ordered.producer.PASSED_THROUGH after checking they cannot "
        "bypass the routing)"
    )


def test_the_check_catches_a_new_confluent_method() -> None:
    class NewerProducer(confluent_kafka.Producer):  # type: ignore[misc]
        def produce_v2(self) -> None:
            """A method a later confluent-kafka might add."""

    assert unwrapped(NewerProducer, OrderedProducer, PASSED_THROUGH) == {"produce_v2"}
    assert unwrapped(NewerProducer, OrderedProducer, frozenset({"produce_v2"})) == set()


def test_no_attribute_fall_through() -> None:
    assert "__getattr__" not in vars(OrderedProducer)
    assert OrderedProducer.__getattribute__ is object.__getattribute__


def test_constructor_shape_is_confluents() -> None:
    params = list(inspect.signature(OrderedProducer.__init__).parameters.values())
    assert [p.kind for p in params[1:]] == [
        inspect.Parameter.POSITIONAL_ONLY,
        inspect.Parameter.VAR_KEYWORD,
    ]
