"""The declared waits of every consumer group, kept current by ZooKeeper watches.

The position relay needs, every round, what each group's members wait on (their
interest records, :mod:`coordinator.kernel.positions`). Reading them from ZooKeeper every
round costs a request per group, topic and member, one after another. This cache reads
them once and then only what a watch reports changed:

* ``{root}/groups``: the groups (a children watch);
* ``{root}/groups/{g}/interest``: the topics some member of ``g`` waits in;
* ``{root}/groups/{g}/interest/{topic}``: the waiting members;
* ``.../{member}``: each member's :class:`~coordinator.kernel.store.records.Interest` (a data
  watch).

Every watch is :func:`~coordinator.kernel.store.watches.watch_node` or
:func:`~coordinator.kernel.store.watches.watch_children_node`: every read is asynchronous and
its result arrives on kazoo's thread, where the cache only updates dictionaries under a
lock and calls ``on_change`` (which must not block). A watch whose node left its
parent's children is stopped with everything below it, and a late result of a stopped
watch is dropped (each watch's results carry a token checked under the lock).

A cache can lag ZooKeeper by the time a watch takes to report (a round trip), never
more while the session lives; the relay's output is advisory (see
:mod:`coordinator.relay.position_relay`), so a lagging cache delays a wake-up by a round at
most. :meth:`WaitCache.waits` serves the relay; :func:`read_waits` reads the same thing
directly (the relay's slow safety check compares the two).
"""

from __future__ import annotations

import logging
import threading
import urllib.parse
from collections.abc import Callable

from kazoo.client import KazooClient
from kazoo.exceptions import NoNodeError

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import Watch, paths
from coordinator.kernel.store.records import Interest
from coordinator.kernel.store.watches import watch_children_node, watch_node

__all__ = ["WaitCache", "Waits", "read_waits"]

_log = logging.getLogger(__name__)

Waits = dict[str, dict[str, dict[int, int]]]
"""group -> topic -> partition -> the lowest offset any member of the group waits for."""

_GROUPS, _TOPICS, _MEMBERS = 0, 1, 2  # what the children of a watched node are


class WaitCache:
    """Every group's declared waits, from watches (see the module docstring).

    Args:
        client: A started kazoo client.
        root: The store root.
        on_change: Called with the group (on kazoo's thread; must not block) after one
            of its interest records changed, appeared or went away.
    """

    def __init__(
        self, client: KazooClient, root: str, on_change: Callable[[str], None] | None = None
    ) -> None:
        self._client = client
        self._root = paths.check_root(root)
        self._on_change = on_change or (lambda _group: None)
        self._lock = threading.Lock()
        self._watches: dict[str, tuple[object, Watch]] = {}
        self._records: dict[str, tuple[str, str, Interest]] = {}  # path -> group, topic
        self._kids: dict[str, set[str]] = {}  # watched path -> its children watched
        self._stopped = False

    def start(self) -> None:
        """Start watching (the first reads arrive asynchronously)."""
        with self._lock:
            self._stopped = False
            self._watch_children(paths.groups_path(self._root), _GROUPS, "", "")

    def stop(self) -> None:
        """Stop every watch and forget what was read."""
        with self._lock:
            self._stopped = True
            for _token, watch in self._watches.values():
                watch.stop()
            self._watches.clear()
            self._records.clear()
            self._kids.clear()

    def waits(self) -> Waits:
        """group -> topic -> partition -> the lowest offset a member waits for, as cached."""
        out: Waits = {}
        with self._lock:
            records = list(self._records.values())
        for group, topic, interest in records:
            needed = out.setdefault(group, {}).setdefault(topic, {})
            for partition, offset in interest.waits.items():
                needed[partition] = min(needed.get(partition, offset), offset)
        kept = {g: {t: w for t, w in topics.items() if w} for g, topics in out.items()}
        return {g: topics for g, topics in kept.items() if topics}

    # --- watches (every method below runs with self._lock held) ------------------------

    def _watch_children(self, path: str, level: int, group: str, topic: str) -> None:
        token = object()

        def on_children(children: list[str] | None) -> None:
            with self._lock:
                if self._current(path, token):
                    self._children(path, level, group, children or [])

        # The lock is held: no result reaches on_children before the token is stored.
        self._watches[path] = (token, watch_children_node(self._client, path, on_children))

    def _watch_member(self, path: str, group: str, topic: str) -> None:
        token = object()

        def on_data(data: bytes | None) -> None:
            with self._lock:
                if not self._current(path, token):
                    return
                old = self._records.pop(path, None)
                if data:
                    try:
                        self._records[path] = (group, topic, Interest.from_json(data, path))
                    except StoreError as exc:
                        _log.warning("position relay: %s", exc)
                new = self._records.get(path)
                changed = (old is None) != (new is None) or (
                    old is not None and new is not None and old[2].waits != new[2].waits
                )
            if changed:
                self._on_change(group)

        self._watches[path] = (token, watch_node(self._client, path, on_data, read_now=False))

    def _current(self, path: str, token: object) -> bool:
        entry = self._watches.get(path)
        return not self._stopped and entry is not None and entry[0] is token

    def _children(self, path: str, level: int, group: str, names: list[str]) -> None:
        if level == _GROUPS:
            # The interest node of each group is watched, not the group's own node.
            wanted = {f"{path}/{name}/interest": urllib.parse.unquote(name) for name in names}
        else:
            wanted = {f"{path}/{name}": name for name in names}
        for gone in self._kids.get(path, set()) - set(wanted):
            self._forget(gone)
        self._kids[path] = set(wanted)
        for child, name in wanted.items():
            if child in self._watches:
                continue
            if level == _GROUPS:
                self._watch_children(child, _TOPICS, name, "")
            elif level == _TOPICS:
                self._watch_children(child, _MEMBERS, group, name)
            else:
                self._watch_member(child, group, path.rsplit("/", 1)[1])

    def _forget(self, path: str) -> None:
        """Stop the watch of ``path`` and of everything below it; drop their records."""
        prefix = path + "/"
        for p in [p for p in self._watches if p == path or p.startswith(prefix)]:
            self._watches.pop(p)[1].stop()
            self._kids.pop(p, None)
        dropped = [p for p in self._records if p == path or p.startswith(prefix)]
        for group in sorted({self._records.pop(p)[0] for p in dropped}):
            self._on_change(group)  # must not block: it runs under this lock


def read_waits(client: KazooClient, root: str) -> Waits:
    """Read every group's declared waits from ZooKeeper, one request after another.

    Raises:
        KazooException: ZooKeeper failed.
        StoreError: A record fails its check.
    """
    base = paths.groups_path(root)
    out: Waits = {}
    try:
        groups = client.get_children(base)
    except NoNodeError:
        return out
    for name in sorted(groups):
        interest = f"{base}/{name}/interest"
        try:
            topics = client.get_children(interest)
        except NoNodeError:
            continue
        for topic in sorted(topics):
            try:
                members = client.get_children(f"{interest}/{topic}")
            except NoNodeError:
                continue
            needed: dict[int, int] = {}
            for member in members:
                path = f"{interest}/{topic}/{member}"
                try:
                    data, _stat = client.get(path)
                except NoNodeError:
                    continue  # an ephemeral node that went away while listing
                for partition, offset in Interest.from_json(data, path).waits.items():
                    needed[partition] = min(needed.get(partition, offset), offset)
            if needed:
                out.setdefault(urllib.parse.unquote(name), {})[topic] = needed
    return out
