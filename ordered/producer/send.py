"""Which send path a new producer gets: the compiled one when it was built.

The choice is made once per producer, when it is made, in ``OrderedProducer.__new__``
(the one dispatch point, ``ordered.producer.client``): with ``ordered._fastproduce``
built (and ``ORDERED_PURE_PYTHON`` not set) the producer is an instance of a subclass
whose ``produce`` is the C method ``SendPath.produce``, a direct C call that hands
every call but ``produce(topic, value, key)`` on an unswitched topic to the Python
``OrderedProducer.produce`` (docs/protocol.md, "Fencing the route switch"). Nothing is
replaced on an instance.

Tests of the pure-Python path set :data:`_FAST` (and :data:`_ONLY_ERROR`) before they
make a producer.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final, TypeVar

from ordered.compiled import compiled_module
from ordered.producer.tracking import DeliveryCallback, OnlyError

__all__ = ["COMPILED", "producer_class"]

_MODULE = compiled_module()

_FAST: type[Any] | None = None if _MODULE is None else _MODULE.SendPath
"""The C base class of the compiled producer class, ``None`` for the Python path."""

# The compiled twin returns from a success without entering Python code: about 0.07 us
# of CPU less per delivered record of an untracked send than the Python class.
_ONLY_ERROR: Callable[[DeliveryCallback], DeliveryCallback] = (
    OnlyError if _MODULE is None else _MODULE.OnlyError
)
"""The ``delivery.report.only.error`` filter a new producer uses."""

COMPILED: Final = _FAST is not None
"""Whether the compiled send path (``ordered._fastproduce``) is in use."""

_P = TypeVar("_P")

_CLASSES: dict[tuple[type[Any], type[Any]], type[Any]] = {}


def producer_class(python: type[_P]) -> type[_P]:
    """The class a new producer is made as: ``python``, or its compiled subclass.

    Args:
        python: The producer class with the Python send path (``OrderedProducer``).

    Returns:
        ``python`` when the compiled send path is not in use, else (made once) the
        subclass whose ``produce`` is ``SendPath.produce``; its ``__init__`` binds the
        C send path to the producer's confluent ``produce``, its route table's fast
        table and ``python.produce`` (the fallback).
    """
    if _FAST is None:
        return python
    fast: type[Any] = _FAST
    found = _CLASSES.get((python, fast))
    if found is None:

        class CompiledOrderedProducer(python, fast):  # type: ignore[valid-type,misc]
            """An ``OrderedProducer`` whose ``produce`` is the compiled send path."""

            produce = fast.produce

            def __init__(self, config: dict[str, Any] | None = None, /, **kwargs: Any) -> None:
                super().__init__(config, **kwargs)
                # From here on the C produce reads this table (kept by the route table
                # under the lock) and falls back to the Python produce.
                self._bind_send_path(
                    self._rd_produce,
                    self._table.fast,
                    python.produce,  # type: ignore[attr-defined]
                )

        CompiledOrderedProducer.__qualname__ = f"Compiled{python.__qualname__}"
        found = _CLASSES[(python, fast)] = CompiledOrderedProducer
    return found
