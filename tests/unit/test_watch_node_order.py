"""watch_node never delivers its first read after a newer one (store.watches).

The sequencing alone, with a fake client: the first read runs on the caller's thread,
and an event's asynchronous re-read can complete before that thread delivers it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from coordinator.kernel.store.watches import watch_node


class _Result:
    def __init__(self, value: Any) -> None:
        self._value = value

    def get(self) -> Any:
        return self._value

    def rawlink(self, callback: Callable[[Any], None]) -> None:
        callback(self)  # as if kazoo answered at once


class _Client:
    """Holds ``b"old"`` until the first synchronous read has returned from ZooKeeper;
    the change to ``b"new"`` fires the watch, whose re-read completes before the
    caller's thread gets to deliver its (older) first read."""

    def __init__(self) -> None:
        self.data = b"old"
        self.watch: Callable[[Any], None] | None = None
        self.listeners: set[Any] = set()
        self.handler = self

    def spawn(self, func: Callable[[], None]) -> None:
        func()

    def add_listener(self, listener: Any) -> None:
        self.listeners.add(listener)

    def remove_listener(self, listener: Any) -> None:
        self.listeners.discard(listener)

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> object:
        self.watch = watch
        return object()

    def get(self, path: str) -> tuple[bytes, object]:
        read = self.data
        self.data = b"new"
        assert self.watch is not None
        self.watch(object())  # the change's event and its re-read, on "kazoo's thread"
        return read, object()

    def exists_async(self, path: str, watch: Callable[[Any], None] | None = None) -> _Result:
        return _Result(object())

    def get_async(self, path: str) -> _Result:
        return _Result((self.data, object()))


def test_a_first_read_overtaken_by_an_event_is_not_delivered() -> None:
    client = _Client()
    seen: list[bytes | None] = []
    watch = watch_node(client, "/x", seen.append)  # type: ignore[arg-type]
    assert seen == [b"new"]  # never b"old" after b"new"
    watch.stop()
    assert client.listeners == set()  # a stopped watch leaves no listener behind
