"""The one watch mechanism: a re-armed one-shot exists-watch (store.watches.watch_node)."""

from __future__ import annotations

import threading

from helpers import unique, wait_until
from kazoo.client import KazooClient

from coordinator.kernel.store import LayoutStore
from coordinator.kernel.store.watches import watch_children_node, watch_node


def test_watch_node_reports_creation_changes_and_deletion(store: LayoutStore) -> None:
    client: KazooClient = store.client
    path = f"{store.root}/watch-test/{unique('node')}"
    seen: list[bytes | None] = []
    threads: set[str] = set()

    def on_data(data: bytes | None) -> None:
        threads.add(threading.current_thread().name)
        seen.append(data)

    watch = watch_node(client, path, on_data)
    assert seen == [None]  # the first read runs on the caller's thread, at once
    client.create(path, b"a", makepath=True)
    wait_until(lambda: seen[-1] == b"a", timeout=10, what="the creation")
    client.set(path, b"b")
    wait_until(lambda: seen[-1] == b"b", timeout=10, what="the change")
    client.delete(path)
    wait_until(lambda: seen[-1] is None and len(seen) >= 4, timeout=10, what="the deletion")
    watch.stop()
    count = len(seen)
    client.create(path, b"c", makepath=True)
    # A stopped watch reports nothing more: the store's own sync is a barrier for it.
    store.sync(path)
    assert store.exists(path) is not None
    assert len(seen) <= count + 1  # at most the event already in flight
    assert seen[:1] == [None]
    client.delete(path)


def test_exists_and_watch_is_one_shot(store: LayoutStore) -> None:
    path = f"{store.root}/watch-test/{unique('once')}"
    fired = threading.Event()
    events: list[object] = []

    def watch(event: object) -> None:
        events.append(event)
        fired.set()

    assert store.exists_and_watch(path, watch) is None
    store.client.create(path, b"x", makepath=True)
    assert fired.wait(10)
    store.client.set(path, b"y")
    store.sync(path)
    assert len(events) == 1
    store.client.delete(path)


def test_watch_children_node_starts_before_the_node_and_survives_its_deletion(
    store: LayoutStore,
) -> None:
    client: KazooClient = store.client
    path = f"{store.root}/watch-test/{unique('kids')}"
    seen: list[list[str] | None] = []

    def on_children(children: list[str] | None) -> None:
        seen.append(None if children is None else sorted(children))

    watch = watch_children_node(client, path, on_children)
    wait_until(lambda: seen == [None], timeout=10, what="the missing node")
    client.create(path, b"", makepath=True)
    wait_until(lambda: seen[-1] == [], timeout=10, what="the creation")
    client.create(f"{path}/a", b"")
    client.create(f"{path}/b", b"")
    wait_until(lambda: seen[-1] == ["a", "b"], timeout=10, what="the children")
    client.delete(path, recursive=True)
    wait_until(lambda: seen[-1] is None, timeout=10, what="the deletion")
    client.create(f"{path}/c", b"", makepath=True)
    wait_until(lambda: seen[-1] == ["c"], timeout=10, what="the node made again")
    watch.stop()
    count = len(seen)
    client.create(f"{path}/d", b"")
    store.sync(path)
    assert len(seen) <= count + 1  # at most the event already in flight
    client.delete(path, recursive=True)
