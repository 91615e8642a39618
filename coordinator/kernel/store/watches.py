"""Watches and the transition lock of the layout store, :func:`watch_node` and
:func:`watch_children_node`."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import NoNodeError
from kazoo.recipe.lock import Lock

from coordinator.kernel.errors import (
    StoreError,
)
from coordinator.kernel.store import paths
from coordinator.kernel.store.base import StoreBase, Watch
from coordinator.kernel.store.records import (
    TopicRecord,
)

__all__ = ["WatchStore", "watch_children_node", "watch_node"]

_log = logging.getLogger(__name__)


def watch_node(
    client: KazooClient,
    path: str,
    on_data: Callable[[bytes | None], None],
    *,
    read_now: bool = True,
) -> Watch:
    """Call ``on_data`` with the data of ``path`` now and after every change, until stopped.

    The one watch mechanism of the project: a one-shot exists-watch, re-armed after
    every event. ``None`` means the node does not exist. The first read runs on the
    caller's thread (and raises kazoo's errors); every later one is an asynchronous
    kazoo call whose result arrives on kazoo's thread, so nothing ever blocks kazoo's
    worker (kazoo's ``DataWatch`` re-reads synchronously there and retries while
    ZooKeeper is away, which can hang interpreter exit). A read lost to a dropped
    connection is re-armed when the client connects again, so a change made meanwhile
    is still reported. ``on_data`` runs on kazoo's thread and must not block; it may
    see the same data twice, but never older data after newer: a first read that an
    event's re-read overtook is not delivered.

    Args:
        client: A started kazoo client.
        path: The znode.
        on_data: Gets the data (``None``: no node).
        read_now: ``False`` makes the first read asynchronous too (its result also
            arrives on kazoo's thread): safe to call from a watch callback.

    Returns:
        A :class:`Watch`; ``stop()`` ends it (at the next event).
    """
    lock = threading.Lock()
    overtaken = False  # an event's re-read was delivered before the first read

    def deliver(data: bytes | None) -> None:
        nonlocal overtaken
        with lock:
            overtaken = True
            if not handle.stopped:
                on_data(data)

    handle, arm = _rearmed(
        client,
        path,
        lambda watch: client.get_async(path),
        lambda value: deliver(None if value is None else value[0]),
    )
    if not read_now:
        arm()
        return handle
    try:
        stat = client.exists(path, watch=arm)
        data: bytes | None = None
        if stat is not None:
            try:
                data, _ = client.get(path)
            except NoNodeError:
                data = None
        with lock:
            # An event's asynchronous re-read may have overtaken this one (this thread
            # was slow between its read and here): that one is newer.
            if not overtaken:
                on_data(data)
    except BaseException:
        handle.stop()
        raise
    return handle


def watch_children_node(
    client: KazooClient, path: str, on_children: Callable[[list[str] | None], None]
) -> Watch:
    """Call ``on_children`` with the children of ``path`` after every change, until stopped.

    Like :func:`watch_node` with ``read_now=False``, for the list of children: an
    exists-watch (so a node created later is seen) and a children-watch, re-armed after
    every event, every read asynchronous (results on kazoo's thread, which
    ``on_children`` must not block). ``None`` means the node does not exist. Unlike
    kazoo's ``ChildrenWatch`` it may start before ``path`` exists and survives its
    deletion; safe to start from a watch callback.

    Returns:
        A :class:`Watch`; ``stop()`` ends it (at the next event).
    """
    handle, arm = _rearmed(
        client,
        path,
        lambda watch: client.get_children_async(path, watch=watch),
        lambda value: on_children(None if value is None else list(value)),
    )
    arm()
    return handle


def _rearmed(
    client: KazooClient,
    path: str,
    read: Callable[[Callable[..., None]], Any],
    deliver: Callable[[Any], None],
) -> tuple[Watch, Callable[..., None]]:
    """The chain both watches share: an exists-watch re-armed after every event and at
    every reconnection, then ``read(arm)`` (an asynchronous kazoo read) whose value goes
    to ``deliver`` (``None``: no node), on kazoo's thread.

    Returns:
        The :class:`Watch` and ``arm`` (call it to start the chain asynchronously).
    """

    def arm(_event: Any = None) -> None:
        if handle.stopped:
            return
        try:
            client.exists_async(path, watch=arm).rawlink(got_stat)
        except Exception as exc:  # the client is closing
            _log.debug("watch of %s not re-armed: %r", path, exc)

    def got_stat(result: Any) -> None:
        if handle.stopped:
            return
        try:
            stat = result.get()
        except Exception as exc:  # connection lost: on_state re-arms
            _log.debug("watch of %s: %r", path, exc)
            return
        if stat is None:
            deliver(None)
            return
        read(arm).rawlink(got_value)

    def got_value(result: Any) -> None:
        if handle.stopped:
            return
        try:
            value = result.get()
        except NoNodeError:
            value = None  # deleted meanwhile: the exists-watch reports it too
        except Exception as exc:
            _log.debug("watch of %s: %r", path, exc)
            return
        deliver(value)

    handle = _listening(client, arm)
    return handle, arm


def _listening(client: KazooClient, arm: Callable[[], None]) -> Watch:
    """A :class:`Watch` whose ``arm`` runs again at every reconnection, until stopped."""

    def on_state(state: KazooState) -> bool:
        # A listener must not block: arm() only queues a request.
        if handle.stopped:
            return True  # kazoo removes a listener that returns True
        if state == KazooState.CONNECTED:
            client.handler.spawn(arm)
        return False

    # Removed at stop(), not only at the next state change: a daemon that watches
    # short-lived nodes must not pile up listeners of stopped watches.
    handle = Watch(on_stop=lambda: client.remove_listener(on_state))
    client.add_listener(on_state)
    return handle


class WatchStore(StoreBase):
    """Watches and the lock (part of :class:`~coordinator.kernel.store.LayoutStore`)."""

    # --- watches and the lock ------------------------------------------------------

    def watch_topic(
        self,
        topic: str,
        callback: Callable[[TopicRecord | None], None],
        on_error: Callable[[StoreError], None] | None = None,
    ) -> Watch:
        """Call ``callback`` with the topic record now and on every change.

        A :func:`watch_node` on the topic node: the first call runs on the caller's
        thread, later ones on kazoo's thread (they must not block). ``None`` means not
        adopted (or deleted). A record that fails its check goes to ``on_error``
        (default: logged) and the callback is not called for it.

        Returns:
            A :class:`Watch`; ``stop()`` ends it.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.topic_path(self._root, topic)

        def on_data(data: bytes | None) -> None:
            if not data:
                callback(None)
                return
            try:
                record = TopicRecord.from_json(data, path)
            except StoreError as exc:
                if on_error is not None:
                    on_error(exc)
                else:
                    _log.error("%s", exc)
                return
            callback(record)

        return self._run(f"watch {path}", watch_node, self._client, path, on_data)

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        """Call ``callback`` with the children of ``path`` now and on every change.

        A kazoo ``ChildrenWatch``; ``path`` must exist. The callback runs on kazoo's
        thread and must not block.

        Returns:
            A :class:`Watch`; ``stop()`` ends it.
        """
        handle = Watch()

        def on_children(children: list[str]) -> bool | None:
            if handle.stopped:
                return False
            callback(list(children))
            return None

        self._run(f"watch {path}", self._client.ChildrenWatch, path, on_children)
        return handle

    def watch_producers(self, topic: str, callback: Callable[[list[str]], None]) -> Watch:
        """:meth:`watch_children` on the topic's producer registrations.

        Creates the (empty) ``producers`` node if missing, as registering does.
        """
        parent = paths.producers_path(self._root, topic)
        self._run(f"watch producers of {topic}", self._client.ensure_path, parent)
        return self.watch_children(paths.producers_path(self._root, topic), callback)

    def watch_acks(self, topic: str, epoch: int, callback: Callable[[list[str]], None]) -> Watch:
        """:meth:`watch_children` on the acks of ``epoch`` (which must be published)."""
        return self.watch_children(paths.acks_path(self._root, topic, epoch), callback)

    def lock(self, topic: str, identifier: str = "") -> Lock:
        """Return the topic's transition lock (a kazoo ``Lock``; not yet acquired)."""
        return self._client.Lock(paths.lock_path(self._root, topic), identifier)
