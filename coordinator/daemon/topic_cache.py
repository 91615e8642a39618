"""The adopted topics' records, kept current by ZooKeeper watches (the daemon's scan).

The leading daemon looks at every adopted topic's record every scan, for a pending
epoch. Reading them all each scan costs a request per topic per second (two, with the
listing); with a cache it reads a record once, then again only when its watch fires:

* the topic list: a children watch on ``{root}/topics`` (it only records the names and
  wakes the scan; :meth:`TopicCache.refresh`, on the scan's thread, starts the watch of
  a new topic and stops that of a removed one);
* each topic's record: :meth:`~coordinator.kernel.store.LayoutStore.watch_topic`, whose results
  arrive on kazoo's thread, where the cache only stores them and calls ``on_change``;
* the names of each topic node's children
  (:func:`~coordinator.kernel.store.watches.watch_children_node`): which topics have an
  autoscaling policy, so the autoscaler reads the policies of those topics only.

Every ``check`` the scan reads everything directly instead (:meth:`TopicCache.check`)
and restarts the watch of any topic whose cached record disagrees, so a missed event
costs at most one check interval. The cache only decides when the daemon looks: a
resume reads the record from ZooKeeper itself, so a stale "pending" costs one read and
a stale "not pending" delays a resume (to the next event or check), never corrupts one.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import LayoutStore, Watch, paths
from coordinator.kernel.store.records import TopicRecord
from coordinator.kernel.store.watches import watch_children_node

__all__ = ["TopicCache"]


class TopicCache:
    """The records of the adopted topics, from watches (see the module docstring).

    Args:
        store: The layout store.
        on_change: Called (on kazoo's thread, or the caller's; must not block) when the
            topic list or a record changed.
    """

    def __init__(self, store: LayoutStore, on_change: Callable[[], None]) -> None:
        self._store = store
        self._on_change = on_change
        self._lock = threading.Lock()
        self._names: list[str] | None = None  # the children of {root}/topics, as last seen
        self._list_watch: Watch | None = None
        self._watches: dict[str, Watch] = {}
        self._generation: dict[str, int] = {}
        self._records: dict[str, TopicRecord | StoreError | None] = {}
        self._kids: dict[str, Watch] = {}  # topic -> the watch of its node's children
        self._children: dict[str, frozenset[str]] = {}

    def start(self) -> None:
        """Watch the topic list (``{root}/topics`` is created if missing).

        Raises:
            KazooException: ZooKeeper failed.
        """
        self._store.client.ensure_path(paths.topics_path(self._store.root))
        self._list_watch = self._store.watch_children(
            paths.topics_path(self._store.root), self._on_names
        )

    def stop(self) -> None:
        """Stop every watch."""
        if self._list_watch is not None:
            self._list_watch.stop()
        with self._lock:
            for topic, watch in self._watches.items():
                watch.stop()
                self._kids.pop(topic).stop()
                self._generation[topic] += 1  # drops the results still on their way
            self._watches.clear()
            self._records.clear()
            self._children.clear()

    def refresh(self) -> None:
        """Start watching new topics and stop watching removed ones (the scan's thread).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        with self._lock:
            names = set(self._names or ())
            gone = set(self._watches) - names
            for topic in gone:
                self._watches.pop(topic).stop()
                self._kids.pop(topic).stop()
                self._generation[topic] += 1
                self._records.pop(topic, None)
                self._children.pop(topic, None)
            new = sorted(names - set(self._watches))
        for topic in new:
            self._watch(topic)

    def topics(self) -> dict[str, TopicRecord | StoreError]:
        """topic -> its cached record (or why it is unreadable); adopted topics only."""
        with self._lock:
            return {t: r for t, r in sorted(self._records.items()) if r is not None}

    def with_child(self, name: str) -> list[str]:
        """The adopted topics whose node has a child ``name`` (say ``autoscale``), as cached."""
        with self._lock:
            return sorted(
                t
                for t, record in self._records.items()
                if record is not None and name in self._children.get(t, ())
            )

    def check(self) -> dict[str, TopicRecord | StoreError]:
        """Read every record (and node's children) from ZooKeeper; restart the watches of
        each topic the cache disagrees on.

        Returns:
            What :meth:`topics` returns, read now.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        nodes = self._store.topic_nodes()
        with self._lock:
            self._names = list(nodes)
            cached = {t: (self._records.get(t), self._children.get(t)) for t in self._watches}
        stale = sorted(
            t
            for t in set(nodes) | set(cached)
            if t not in nodes
            or t not in cached
            or _differs(nodes[t][0], cached[t][0])
            or nodes[t][1] != cached[t][1]
        )
        for topic in stale:
            with self._lock:
                watch = self._watches.pop(topic, None)
                kids = self._kids.pop(topic, None)
                self._generation[topic] = self._generation.get(topic, 0) + 1
                self._records.pop(topic, None)
                self._children.pop(topic, None)
            for stale_watch in (watch, kids):
                if stale_watch is not None:
                    stale_watch.stop()
        self.refresh()
        return {t: record for t, (record, _kids) in nodes.items() if record is not None}

    def _on_names(self, names: list[str]) -> None:
        # kazoo's thread: record and wake the scan (which starts the watches).
        with self._lock:
            self._names = list(names)
        self._on_change()

    def _watch(self, topic: str) -> None:
        with self._lock:
            generation = self._generation[topic] = self._generation.get(topic, 0) + 1

        def store(record: TopicRecord | StoreError | None) -> None:
            with self._lock:
                # A stopped watch's late result must not overwrite its successor's.
                if self._generation.get(topic) != generation:
                    return
                self._records[topic] = record
            self._on_change()

        def children(names: list[str] | None) -> None:
            with self._lock:
                if self._generation.get(topic) == generation:
                    self._children[topic] = frozenset(names or ())

        watch = self._store.watch_topic(topic, store, on_error=store)
        kids = watch_children_node(
            self._store.client, paths.topic_path(self._store.root, topic), children
        )
        with self._lock:
            if self._generation.get(topic) == generation:
                self._watches[topic] = watch
                self._kids[topic] = kids
                return
        watch.stop()
        kids.stop()


def _differs(a: TopicRecord | StoreError | None, b: TopicRecord | StoreError | None) -> bool:
    if isinstance(a, StoreError) or isinstance(b, StoreError):
        return str(a) != str(b)
    return a != b
