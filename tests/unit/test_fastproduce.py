"""The compiled send path (``ordered._fastproduce``) against the pure-Python rules."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import mmh3
import pytest
from confluent_kafka import KafkaError
from hypothesis import given
from hypothesis import strategies as st

from linear_hash import Layout
from ordered.producer.tracking import OnlyError

fast = pytest.importorskip("ordered._fastproduce")

keys = st.one_of(st.binary(max_size=64), st.text(alphabet=st.characters(max_codepoint=127)))


@given(key=keys)
def test_hash_is_mmh3(key: bytes | str) -> None:
    assert fast.hash(key) == mmh3.hash(key, 0, False)


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[tuple[Any, ...], dict[str, Any]]] = []

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        self.calls.append((args, kwargs))


class Slow(Recorder):
    """The Python produce: called unbound, with the send path as ``self``."""

    def __init__(self, path: Any) -> None:
        super().__init__()
        self.path = path

    def __call__(self, *args: Any, **kwargs: Any) -> None:
        assert args[0] is self.path
        super().__call__(*args[1:], **kwargs)


def make(table: dict[str, Any]) -> tuple[Any, Recorder, Recorder]:
    path = fast.SendPath()
    rd, slow = Recorder(), Slow(path)
    path._bind_send_path(rd, table, slow)
    return path.produce, rd, slow


def test_routed_plain_and_fallbacks() -> None:
    layout = Layout(3, 5, 1)
    produce, rd, slow = make({"t": fast.Router(layout), "plain": None})
    produce("t", b"v", b"k1")
    produce("t", value=b"v", key="k2")
    produce("t", b"v", key=b"k3")
    produce("plain", b"v", b"k")
    produce("plain", b"v")
    assert rd.calls == [
        (("t", b"v", b"k1", layout.partition_for(b"k1")), {}),
        (("t", b"v", "k2", layout.partition_for("k2")), {}),
        (("t", b"v", b"k3", layout.partition_for(b"k3")), {}),
        (("plain", b"v", b"k"), {}),
        (("plain", b"v", None), {}),
    ]
    # Everything else goes to the pure-Python path, arguments unchanged.
    produce("unknown", b"v", b"k")  # topic not in the table (first use, switching)
    produce("t", b"v")  # unkeyed: round-robin
    produce("t", b"v", "ключ")  # not ASCII
    produce("t", b"v", bytearray(b"k"))  # not exact bytes
    produce("t", b"v", b"k", 2)  # explicit partition
    produce("t", b"v", b"k", on_delivery=print)  # a callback
    produce("t", b"v", b"k", headers=[("a", b"1")])
    produce("t", bytearray(b"v"), b"k")  # a value of another type: parsed by Python rules
    assert len(rd.calls) == 5
    assert slow.calls == [
        (("unknown", b"v", b"k"), {}),
        (("t", b"v"), {}),
        (("t", b"v", "ключ"), {}),
        (("t", b"v", bytearray(b"k")), {}),
        (("t", b"v", b"k", 2), {}),
        (("t", b"v", b"k"), {"on_delivery": print}),
        (("t", b"v", b"k"), {"headers": [("a", b"1")]}),
        (("t", bytearray(b"v"), b"k"), {}),
    ]


def test_an_entry_that_is_not_a_compiled_router_takes_the_slow_path() -> None:
    layout = Layout(3, 5, 1)
    produce, rd, slow = make({"t": layout, "u": fast.Router.__new__(fast.Router)})
    produce("t", b"v", b"k")  # a Python router: the C path reads only its own type
    produce("u", b"v", b"k")  # a compiled router never initialised
    assert rd.calls == [] and len(slow.calls) == 2


def test_the_table_is_read_at_every_call() -> None:
    table: dict[str, Any] = {"t": None}
    produce, rd, slow = make(table)
    produce("t", b"v", b"k")
    del table["t"]  # what a switch does first
    produce("t", b"v", b"k")
    assert len(rd.calls) == 1 and len(slow.calls) == 1


def test_errors_propagate() -> None:
    def full(*_args: Any) -> None:
        raise BufferError("queue full")

    path = fast.SendPath()
    path._bind_send_path(full, {"t": None}, full)
    with pytest.raises(BufferError):
        path.produce("t", b"v", b"k")
    with pytest.raises(TypeError):
        path._bind_send_path(full, [], full)


def test_an_unbound_send_path_refuses() -> None:
    with pytest.raises(TypeError, match="not bound"):
        fast.SendPath().produce("t", b"v", b"k")


@pytest.mark.parametrize("only_error", [fast.OnlyError, OnlyError], ids=["compiled", "python"])
def test_only_error_reports_failures_only(only_error: Any) -> None:
    """The compiled OnlyError behaves as its Python reference, call for call."""
    user = Recorder()
    report = only_error(user)
    assert report(None, "delivered") is None
    assert report(err=None, msg="delivered") is None
    failure = KafkaError(KafkaError._MSG_TIMED_OUT)
    report(failure, "lost")
    report(msg="also lost", err=failure)
    assert user.calls == [((failure, "lost"), {}), ((failure, "also lost"), {})]
    with pytest.raises(TypeError):
        report(failure)


@pytest.mark.parametrize("only_error", [fast.OnlyError, OnlyError], ids=["compiled", "python"])
def test_only_error_passes_the_callbacks_exception_on(only_error: Any) -> None:
    def broken(_err: Any, _msg: Any) -> None:
        raise ValueError("from the user's callback")

    report = only_error(broken)
    report(None, "delivered")
    with pytest.raises(ValueError, match="user's callback"):
        report(KafkaError(KafkaError._PURGE_QUEUE), "purged")


def test_compiled_only_error_is_collected_in_a_cycle() -> None:
    """A callback that refers back to its OnlyError (a producer's bound method) is freed."""

    class Owner:
        def on_delivery(self, err: Any, msg: Any) -> None:
            pass

    owner = Owner()
    owner.report = fast.OnlyError(owner.on_delivery)  # type: ignore[attr-defined]
    gone = weakref.ref(owner)
    del owner
    gc.collect()
    assert gone() is None


def test_compiled_only_error_without_init_refuses_a_failure() -> None:
    report = fast.OnlyError.__new__(fast.OnlyError)
    report(None, "delivered")
    with pytest.raises(TypeError, match="no callback"):
        report(KafkaError(KafkaError._PURGE_QUEUE), "purged")
    with pytest.raises(TypeError, match="must be callable"):
        fast.OnlyError(42)
