"""The position service (KIP-253's ConsumerGroupPosition exchange) over ZooKeeper.

Consumers of a group declare what their closed gates wait on (*interest*) and publish
the boundary positions they commit (*progress*); a waiter watches the progress of the
partitions it waits on and re-checks its gate as soon as one changes, instead of at the
next ``ordered.gate.poll.interval.ms``.

The service is never in the data path: a gate opens only on the group's committed
offsets read from Kafka. A progress record only says "look again now", so a stale,
missing or wrong record can delay a gate (back to the fallback interval), never open
one early.

Znodes (paths from :mod:`coordinator.kernel.store.paths`, with ``{g}`` the group id
percent-encoded), their records :class:`Interest` and :class:`Progress` from
:mod:`coordinator.kernel.store.records` like every znode's (JSON, sorted keys,
``"version": 1``, checked on read; re-exported here):

* interest, ``{root}/groups/{g}/interest/{topic}/{member}`` (ephemeral): ``member``,
  ``waits`` (``{"partition": offset}``), ``at``;
* progress, ``{root}/groups/{g}/progress/{topic}/{partition}``: ``partition``,
  ``offset`` (committed), ``at``.

Writes from a consumer's poll thread are asynchronous (kazoo ``*_async``): a consumer
never waits on ZooKeeper to deliver records. Watch callbacks run on kazoo's thread and
only call the given callback, which must not block.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import paths
from coordinator.kernel.store.records import RECORD_VERSION, Interest, Progress
from coordinator.kernel.store.watches import watch_node

__all__ = [
    "POSITIONS_VERSION",
    "Interest",
    "PositionService",
    "Progress",
]

POSITIONS_VERSION: Final = RECORD_VERSION
"""The ``version`` of interest and progress records (:data:`Interest.VERSION`)."""

_log = logging.getLogger(__name__)


class PositionService:
    """Interest and progress of one consumer group, over a started kazoo client.

    Args:
        client: A started kazoo client (a consumer shares its own).
        root: The store root (``ordered.zookeeper.root``).
        group: The consumer group id.

    Raises:
        ValueError: ``root`` is not an absolute path.
    """

    def __init__(self, client: KazooClient, root: str, group: str) -> None:
        self._client = client
        self._root = paths.check_root(root)
        self._group = group
        paths.group_path(self._root, group)  # checks the group id early
        self._watched: set[tuple[str, int]] = set()
        self._last_published: dict[tuple[str, int], int] = {}

    def progress_path(self, topic: str, partition: int) -> str:
        """The progress znode of ``topic``/``partition``."""
        return paths.progress_partition_path(self._root, self._group, topic, partition)

    def interest_path(self, topic: str, member: str) -> str:
        """The interest znode of ``member`` in ``topic``."""
        return paths.interest_member_path(self._root, self._group, topic, member)

    # --- writes (asynchronous: never block a poll thread) ----------------------------------

    def publish(self, topic: str, partition: int, offset: int) -> None:
        """Publish a committed offset of ``partition`` (asynchronously, only if it grew)."""
        key = (topic, partition)
        if offset <= self._last_published.get(key, -1):
            return
        self._last_published[key] = offset
        path = self.progress_path(topic, partition)
        data = Progress(partition, offset, time.time()).to_json()

        def written(result: Any) -> None:
            try:
                result.get()
            except NoNodeError:
                self._write(path, data, ephemeral=False)  # the first record of it
            except Exception as exc:
                _log.warning("position service: cannot write %s: %s", path, exc)

        # A partition's progress node is written many times and created once: set first
        # (one round trip for the waiter's watch, not a failed create and then a set).
        self._client.set_async(path, data).rawlink(written)

    def publish_if_wanted(self, topic: str, partition: int, offset: int) -> None:
        """Publish like :meth:`publish`, but only if a member waits on ``partition``.

        Asynchronous: the interest is read with kazoo's async calls and the record
        written from their callbacks, so the caller never waits on ZooKeeper. A wait
        declared after the read is served by the waiter's own re-check (and the
        coordinator's relay), never missed.
        """
        if offset <= self._last_published.get((topic, partition), -1):
            return
        parent = paths.interest_path(self._root, self._group, topic)

        def on_member(result: Any) -> None:
            try:
                data, _stat = result.get()
                wanted = partition in Interest.from_json(data, parent).waits
            except NoNodeError:
                return  # the member stopped waiting meanwhile
            except Exception as exc:
                _log.debug("position service: interest unreadable (%s): publishing", exc)
                wanted = True  # unknown: publishing can only wake a waiter early
            if wanted:
                self.publish(topic, partition, offset)

        def on_members(result: Any) -> None:
            try:
                names = result.get()
            except NoNodeError:
                return  # nobody waits in this topic
            except Exception as exc:
                _log.debug("position service: interest unlisted (%s): publishing", exc)
                self.publish(topic, partition, offset)
                return
            for name in names:
                self._client.get_async(f"{parent}/{name}").rawlink(on_member)

        self._client.get_children_async(parent).rawlink(on_members)

    def declare(self, topic: str, member: str, waits: Mapping[int, int]) -> None:
        """Declare (or replace) what ``member`` waits on in ``topic``; empty clears it."""
        path = self.interest_path(topic, member)
        if not waits:
            self._client.delete_async(path).rawlink(_log_failure(path, ignore=NoNodeError))
            return
        self._write(path, Interest(member, dict(waits), time.time()).to_json(), ephemeral=True)

    def _write(self, path: str, data: bytes, ephemeral: bool) -> None:
        def created(result: Any) -> None:
            try:
                result.get()
            except NodeExistsError:
                # Gone again before the set: a later delete won, which is fine.
                self._client.set_async(path, data).rawlink(_log_failure(path, ignore=NoNodeError))
            except NoNodeError:
                # The parent does not exist yet: kazoo's create makes it.
                self._client.create_async(path, data, ephemeral=ephemeral, makepath=True).rawlink(
                    _log_failure(path, ignore=NodeExistsError)
                )
            except Exception as exc:
                _log.warning("position service: cannot write %s: %s", path, exc)

        self._client.create_async(path, data, ephemeral=ephemeral).rawlink(created)

    # --- reads and watches -----------------------------------------------------------

    def watch(self, topic: str, partition: int, callback: Callable[[Progress], None]) -> bool:
        """Call ``callback`` (on kazoo's thread) whenever ``partition``'s progress changes.

        One watch per partition and service; a second call for the same partition does
        nothing and returns ``False``. The callback must not block.
        """
        key = (topic, partition)
        if key in self._watched:
            return False
        self._watched.add(key)
        path = self.progress_path(topic, partition)

        def on_data(data: bytes | None) -> None:
            if not data:
                return
            try:
                callback(Progress.from_json(data, path))
            except StoreError as exc:
                _log.warning("position service: %s", exc)

        self._client.retry(watch_node, self._client, path, on_data)
        return True

    def progress(self, topic: str) -> dict[int, Progress]:
        """Read every published progress record of ``topic``.

        Raises:
            StoreError: A record fails its check.
        """
        parent = paths.progress_path(self._root, self._group, topic)
        return {record.partition: record for record in self._children(parent, Progress.from_json)}

    def interest(self, topic: str) -> dict[str, Interest]:
        """Read every member's interest in ``topic``.

        Raises:
            StoreError: A record fails its check.
        """
        parent = paths.interest_path(self._root, self._group, topic)
        return {record.member: record for record in self._children(parent, Interest.from_json)}

    def _children(self, parent: str, parse: Callable[[bytes, str], Any]) -> list[Any]:
        try:
            names = self._client.get_children(parent)
        except NoNodeError:
            return []
        out = []
        for name in sorted(names):
            path = f"{parent}/{name}"
            try:
                data, _stat = self._client.get(path)
            except NoNodeError:
                continue  # an ephemeral node that went away while listing
            out.append(parse(data, path))
        return out


def _log_failure(path: str, ignore: type[BaseException] | None = None) -> Callable[[Any], None]:
    def check(result: Any) -> None:
        try:
            result.get()
        except Exception as exc:
            if ignore is None or not isinstance(exc, ignore):
                _log.warning("position service: cannot write %s: %s", path, exc)

    return check
