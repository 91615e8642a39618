"""The base of the layout store: the kazoo client, the root and every ZooKeeper call.

Every write is a small function that reads what it needs, writes (one ZooKeeper
transaction where several znodes must change together) and is safe to run again: it
runs under ``client.retry`` (kazoo's ``KazooRetry``, copied per call by kazoo), and a
retry after a connection loss that finds its own earlier write applied treats it as
success. :meth:`StoreBase._run` is that one place; the concern modules
(:mod:`~coordinator.kernel.store.topics`, :mod:`~coordinator.kernel.store.producers`,
:mod:`~coordinator.kernel.store.retired`, :mod:`~coordinator.kernel.store.groups`,
:mod:`~coordinator.kernel.store.watches`) build on it.

Errors: ZooKeeper unreachable (retries exhausted, session closed) is a
:class:`~coordinator.kernel.errors.StoreUnavailableError` naming what was tried.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError

from coordinator.kernel.errors import (
    RecordCorruptError,
    StoreAuthError,
    StoreUnavailableError,
)
from coordinator.kernel.store import paths

__all__ = ["StoreBase", "Watch"]

T = TypeVar("T")


class Watch:
    """A handle on a kazoo watch: :meth:`stop` ends it at the next event.

    A watch ends at its next event after :meth:`stop` (kazoo's ``ChildrenWatch`` when
    its callback returns ``False``; :func:`~coordinator.kernel.store.watches.watch_node` by
    not re-arming).

    Args:
        on_stop: Called once, by the first :meth:`stop` (say, to remove a listener).
    """

    def __init__(self, on_stop: Callable[[], None] | None = None) -> None:
        self._stopped = threading.Event()
        self._on_stop = on_stop
        self._stop_lock = threading.Lock()

    def stop(self) -> None:
        """Stop delivering events (kazoo drops the watch at the next event)."""
        with self._stop_lock:
            if self._stopped.is_set():
                return
            self._stopped.set()
        if self._on_stop is not None:
            self._on_stop()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped.is_set()


def _commit(txn: Any) -> None:
    """Commit a kazoo transaction; raise the operation error that aborted it."""
    results = txn.commit()
    for result in results:
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            raise result
    for result in results:
        if isinstance(result, Exception):
            raise result


class StoreBase:
    """The kazoo client and root of a layout store, and its checked ZooKeeper calls.

    Args:
        client: A started kazoo client. Its ``retry`` (``command_retry``) decides how
            long a call keeps retrying while ZooKeeper is unreachable.
        root: The store root (default ``/ordered``).

    Raises:
        ValueError: ``root`` is not an absolute path.
    """

    def __init__(self, client: KazooClient, root: str = paths.DEFAULT_ROOT) -> None:
        self._client = client
        self._root = paths.check_root(root)

    @property
    def client(self) -> KazooClient:
        """The kazoo client."""
        return self._client

    @property
    def root(self) -> str:
        """The store root."""
        return self._root

    # --- plumbing ------------------------------------------------------------------

    def _run(self, what: str, func: Callable[..., T], *args: Any) -> T:
        try:
            result: T = self._client.retry(func, *args)
            return result
        except NoAuthError as exc:
            # ZooKeeper refused: retrying cannot help, and the message names the path.
            raise StoreAuthError(f"cannot {what}: {exc}") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(
                f"ZooKeeper unavailable while trying to {what}: {type(exc).__name__}"
                + (f": {exc}" if str(exc) else "")
            ) from exc

    def _read(self, path: str) -> tuple[bytes, Any] | None:
        try:
            data, stat = self._client.get(path)
        except NoNodeError:
            return None
        return data, stat

    def _record(self, path: str, kind: Any) -> Any:
        """Read the record of type ``kind`` at ``path`` (``None``: no node).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """

        def attempt() -> Any:
            got = self._read(path)
            return None if got is None else kind.from_json(got[0], path)

        return self._run(f"read {path}", attempt)

    def _topic_record(self, path: str, kind: Any, topic: str) -> Any:
        """Read the record of type ``kind`` at ``path`` that must name ``topic`` (or None).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """

        def attempt() -> Any:
            got = self._read(path)
            if got is None:
                return None
            record = kind.from_json(got[0], path)
            if record.topic != topic:
                raise RecordCorruptError(f"{path}: {kind.__name__} names topic {record.topic!r}")
            return record

        return self._run(f"read {path}", attempt)

    def sync(self, path: str) -> None:
        """Make this client's view of ``path`` at least as new as the leader's (ZooKeeper ``sync``).

        A read after ``sync`` sees every write committed before it, whichever server
        this session talks to.

        Raises:
            StoreUnavailableError: ZooKeeper is unreachable.
        """
        self._run(f"sync {path}", self._client.sync, path)

    def exists_and_watch(self, path: str, watch: Callable[[Any], None]) -> Any:
        """Return ``path``'s stat (``None``: no node) and leave a one-shot watch on it.

        ``watch(event)`` runs once on kazoo's thread at the next creation, change or
        deletion of the node (or when the session drops it); it must not block. The
        watch is left whether or not the node exists: the one watch mechanism of the
        store (the caller re-reads, and so re-arms, on its own thread).

        Raises:
            StoreUnavailableError: ZooKeeper is unreachable.
        """
        return self._run(f"watch {path}", self._client.exists, path, watch)

    def exists(self, path: str) -> Any:
        """Return ``path``'s stat, or ``None`` when there is no such node.

        Raises:
            StoreUnavailableError: ZooKeeper is unreachable.
        """
        return self._run(f"check {path}", self._client.exists, path)

    def _put(self, path: str, data: bytes) -> None:
        try:
            self._client.set(path, data)
        except NoNodeError:
            try:
                self._client.create(path, data, makepath=True)
            except NodeExistsError:
                self._client.set(path, data)

    def _delete(self, path: str) -> bool:
        try:
            self._client.delete(path)
        except NoNodeError:
            return False
        return True
