"""An in-memory ZooKeeper for conformance runs, and the run's one clock.

* :class:`Clock`: the one clock of a run (``monotonic``, ``time``, ``sleep`` advance it);
* :class:`FakeZk`: kazoo's calls over in-memory znodes (with ``mzxid``, one-shot watches
  fired at once, the session listener, async results), recording every write under the
  group's nodes.

Nothing here knows the consumer's internals.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fakes import FakeClock
from kazoo.client import KazooState
from kazoo.exceptions import ConnectionLoss, NodeExistsError, NoNodeError

__all__ = ["Clock", "FakeZk", "Stat"]


Clock = FakeClock
"""The run's clock: the unit tests' shared fake (``monotonic``, ``time``, ``sleep``
advance it), starting at 1000 s."""


# --- ZooKeeper ------------------------------------------------------------------------


@dataclass
class Stat:
    mzxid: int
    czxid: int
    version: int
    ephemeralOwner: int = 0
    numChildren: int = 0


@dataclass
class _Node:
    data: bytes
    czxid: int
    mzxid: int
    version: int = 0
    ephemeral: bool = False


class _Result:
    """kazoo's async result, already answered (or failed)."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        try:
            self._value, self._exc = fn(), None
        except Exception as exc:
            self._value, self._exc = None, exc

    def get(self, block: bool = True, timeout: float | None = None) -> Any:
        if self._exc is not None:
            raise self._exc
        return self._value

    def ready(self) -> bool:
        return True

    def rawlink(self, callback: Callable[[Any], None]) -> None:
        callback(self)


class FakeZk:
    """An in-memory ZooKeeper answering kazoo's calls on the caller's thread.

    Args:
        root: The store root.
        clock: The run's clock.

    Attributes:
        writes: ``(op, path, data)`` of every write under ``{root}/groups`` (in order).
        delay_watches: While set, topic watches are not fired (a lagging watch);
            :meth:`fire_delayed` fires them.
    """

    def __init__(self, root: str) -> None:
        self.root = root
        self.nodes: dict[str, _Node] = {"/": _Node(b"", 0, 0)}
        self.zxid = 0
        self.writes: list[tuple[str, str, bytes]] = []
        self._watches: dict[str, list[Callable[[Any], None]]] = {}
        self._listeners: list[Callable[[Any], Any]] = []
        self.connected = True
        self.delay_watches = False
        self._delayed: list[str] = []
        self.checks = 0  # fetch checks sent: a sync sent asynchronously (C-CHECK-2)
        self.lock = threading.RLock()

    # --- the session ---

    def add_listener(self, fn: Callable[[Any], Any]) -> None:
        self._listeners.append(fn)

    def remove_listener(self, fn: Callable[[Any], Any]) -> None:
        if fn in self._listeners:
            self._listeners.remove(fn)

    def session(self, state: str) -> None:
        """Move the session: ``connected``, ``suspended`` or ``lost``."""
        kazoo = {
            "connected": KazooState.CONNECTED,
            "suspended": KazooState.SUSPENDED,
            "lost": KazooState.LOST,
        }[state]
        self.connected = state == "connected"
        if state == "lost":
            for path in [p for p, n in self.nodes.items() if n.ephemeral]:
                self._remove(path)
            self._watches.clear()
        for fn in list(self._listeners):
            if fn(kazoo) is True:
                self._listeners.remove(fn)

    def _up(self) -> None:
        if not self.connected:
            raise ConnectionLoss()

    # --- reads ---

    def _stat(self, path: str) -> Stat | None:
        node = self.nodes.get(path)
        if node is None:
            return None
        prefix = path.rstrip("/") + "/"
        children = sum(
            1 for p in self.nodes if p.startswith(prefix) and "/" not in p[len(prefix) :]
        )
        return Stat(node.mzxid, node.czxid, node.version, 1 if node.ephemeral else 0, children)

    def retry(self, func: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        return func(*args, **kwargs)

    def exists(self, path: str, watch: Callable[[Any], None] | None = None) -> Stat | None:
        with self.lock:
            self._up()
            if watch is not None:
                self._watches.setdefault(path, []).append(watch)
            return self._stat(path)

    def get(self, path: str, watch: Callable[[Any], None] | None = None) -> tuple[bytes, Stat]:
        with self.lock:
            self._up()
            node = self.nodes.get(path)
            if node is None:
                raise NoNodeError()
            if watch is not None:
                self._watches.setdefault(path, []).append(watch)
            stat = self._stat(path)
            assert stat is not None
            return node.data, stat

    def get_children(self, path: str, watch: Any = None) -> list[str]:
        with self.lock:
            self._up()
            if path not in self.nodes:
                raise NoNodeError()
            prefix = path.rstrip("/") + "/"
            return sorted(
                p[len(prefix) :]
                for p in self.nodes
                if p.startswith(prefix) and "/" not in p[len(prefix) :]
            )

    def sync(self, path: str) -> str:
        self._up()
        return path

    def get_acls(self, path: str) -> tuple[list[Any], Stat | None]:
        return [], self._stat(path)

    # --- writes ---

    def _note(self, op: str, path: str, data: bytes) -> None:
        if path.startswith(self.root.rstrip("/") + "/groups/"):
            self.writes.append((op, path, data))

    def _fire(self, path: str) -> None:
        watches = self._watches.pop(path, [])
        if self.delay_watches and path.startswith(self.root.rstrip("/") + "/topics/"):
            if watches:
                self._delayed.append(path)
                self._watches.setdefault(path, []).extend(watches)
            return
        for w in watches:
            w(None)

    def fire_delayed(self) -> None:
        delayed, self._delayed = self._delayed, []
        for path in dict.fromkeys(delayed):
            for w in self._watches.pop(path, []):
                w(None)

    def create(
        self,
        path: str,
        value: bytes = b"",
        acl: Any = None,
        ephemeral: bool = False,
        sequence: bool = False,
        makepath: bool = False,
        include_data: bool = False,
    ) -> str:
        with self.lock:
            self._up()
            if path in self.nodes:
                raise NodeExistsError()
            parent = path.rsplit("/", 1)[0] or "/"
            if parent not in self.nodes:
                if not makepath:
                    raise NoNodeError()
                self.ensure_path(parent)
            self.zxid += 1
            self.nodes[path] = _Node(value, self.zxid, self.zxid, 0, ephemeral)
            self._note("create", path, value)
        self._fire(path)
        return path

    def ensure_path(self, path: str, acl: Any = None) -> bool:
        parts = [p for p in path.split("/") if p]
        cur = ""
        for p in parts:
            cur += "/" + p
            if cur not in self.nodes:
                self.zxid += 1
                self.nodes[cur] = _Node(b"", self.zxid, self.zxid)
        return True

    def set(self, path: str, value: bytes, version: int = -1) -> Stat:
        with self.lock:
            self._up()
            node = self.nodes.get(path)
            if node is None:
                raise NoNodeError()
            self.zxid += 1
            node.data, node.mzxid, node.version = value, self.zxid, node.version + 1
            self._note("set", path, value)
            stat = self._stat(path)
        self._fire(path)
        assert stat is not None
        return stat

    def _remove(self, path: str) -> None:
        self.nodes.pop(path, None)
        self._note("delete", path, b"")
        self._fire(path)

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> bool:
        with self.lock:
            self._up()
            if path not in self.nodes:
                raise NoNodeError()
            self._remove(path)
        return True

    def put(self, path: str, value: bytes) -> None:
        """The controller's write (no session check): create or set."""
        if path in self.nodes:
            self.zxid += 1
            node = self.nodes[path]
            node.data, node.mzxid, node.version = value, self.zxid, node.version + 1
        else:
            self.ensure_path(path.rsplit("/", 1)[0])
            self.zxid += 1
            self.nodes[path] = _Node(value, self.zxid, self.zxid)

    def touched(self, path: str) -> None:
        """Fire the watches of ``path`` (after :meth:`put`)."""
        self._fire(path)

    # --- async forms ---

    def exists_async(self, path: str, watch: Any = None) -> _Result:
        return _Result(lambda: self.exists(path, watch))

    def get_async(self, path: str, watch: Any = None) -> _Result:
        return _Result(lambda: self.get(path, watch))

    def get_children_async(self, path: str, watch: Any = None) -> _Result:
        return _Result(lambda: self.get_children(path, watch))

    def sync_async(self, path: str) -> _Result:
        self.checks += 1
        return _Result(lambda: self.sync(path))

    def set_async(self, path: str, value: bytes, version: int = -1) -> _Result:
        return _Result(lambda: self.set(path, value, version))

    def create_async(self, path: str, value: bytes = b"", **kw: Any) -> _Result:
        return _Result(lambda: self.create(path, value, **kw))

    def delete_async(self, path: str, version: int = -1) -> _Result:
        return _Result(lambda: self.delete(path, version))

    # --- lifecycle (the wrapper's close) ---

    def stop(self) -> None:
        pass

    def close(self) -> None:
        pass


# --- Kafka ----------------------------------------------------------------------------
