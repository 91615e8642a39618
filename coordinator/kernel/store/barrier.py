"""The consumer barrier and feature flags in the layout store (``docs/consumer-barrier.md``).

Controllers announce an epoch here before they publish it and wait for the registered
consumers' acks; consumers register, keep a member node and ack. Every node is under
``{root}/features`` or ``{root}/barrier``, which older code never reads.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.exceptions import NodeExistsError, NoNodeError

from coordinator.kernel.store import paths
from coordinator.kernel.store.barrier_records import (
    AnnouncementRecord,
    BarrierAck,
    BarrierRegistration,
    FeatureRecord,
    RewindAck,
)
from coordinator.kernel.store.base import StoreBase

T = TypeVar("T")

__all__ = ["BarrierStore"]


class BarrierStore(StoreBase):
    """Feature flags, announcements, consumer registrations and acks (part of ``LayoutStore``)."""

    # --- feature flags -------------------------------------------------------------

    def get_feature(self, feature: str) -> FeatureRecord | None:
        """The flag ``feature`` (``None``: never set, i.e. off).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        record: FeatureRecord | None = self._record(
            paths.feature_path(self._root, feature), FeatureRecord
        )
        return record

    def feature_enabled(self, feature: str) -> bool:
        """Whether ``feature`` is on (no node: off).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        record = self.get_feature(feature)
        return record is not None and record.enabled

    def set_feature(self, record: FeatureRecord) -> None:
        """Write a feature flag (idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.feature_path(self._root, record.feature)
        self._run(f"write {path}", self._put, path, record.to_json())

    # --- announcements (controllers) -------------------------------------------------

    def get_announcement(self, topic: str) -> tuple[AnnouncementRecord | None, int]:
        """The topic's announcement and its znode's creation zxid (``None``, -1: none).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.barrier_announcement_path(self._root, topic)

        def attempt() -> tuple[AnnouncementRecord | None, int]:
            got = self._read(path)
            if got is None:
                return None, -1
            record = AnnouncementRecord.from_json(got[0], path)
            return record, int(got[1].mzxid)

        result: tuple[AnnouncementRecord | None, int] = self._run(f"read {path}", attempt)
        return result

    def announce(self, record: AnnouncementRecord) -> int:
        """Write the announcement (a new one, or an update of the same ``id``).

        Returns:
            The announcement znode's last-write zxid: a consumer registered after it
            (a higher creation zxid) read it, or a later write, when it registered.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.barrier_announcement_path(self._root, record.topic)
        data = record.to_json()

        def attempt() -> int:
            self._put(path, data)
            return int(self._client.exists(path).mzxid)

        result: int = self._run(f"announce epoch {record.epoch} of {record.topic}", attempt)
        return result

    def withdraw_announcement(self, topic: str) -> bool:
        """Delete the announcement (idempotent). Returns whether there was one.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.barrier_announcement_path(self._root, topic)
        result: bool = self._run(f"delete {path}", self._delete, path)
        return result

    def barrier_consumers(self, topic: str) -> dict[str, tuple[BarrierRegistration, int]]:
        """The consumers registered on ``topic``: id -> (registration, creation zxid).

        A registration that vanishes while listed is left out.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        base = paths.barrier_consumers_path(self._root, topic)
        return self._children_records(
            base,
            lambda data, path, stat: (
                BarrierRegistration.from_json(data, path),
                int(stat.czxid),
            ),
        )

    def barrier_consumer_ids(self, topic: str) -> set[str]:
        """The ids registered on ``topic`` (a listing, no data read).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        return self._names(paths.barrier_consumers_path(self._root, topic))

    def barrier_registration(
        self, topic: str, consumer_id: str
    ) -> tuple[BarrierRegistration, int] | None:
        """One registration and its creation zxid (``None``: gone).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.barrier_consumer_path(self._root, topic, consumer_id)

        def attempt() -> tuple[BarrierRegistration, int] | None:
            got = self._read(path)
            if got is None:
                return None
            return BarrierRegistration.from_json(got[0], path), int(got[1].czxid)

        result: tuple[BarrierRegistration, int] | None = self._run(f"read {path}", attempt)
        return result

    def barrier_ack_ids(self, topic: str) -> set[str]:
        """The ids with an ack node on ``topic`` (of any announcement; no data read).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        return self._names(paths.barrier_acks_path(self._root, topic))

    def barrier_ack(self, topic: str, consumer_id: str) -> BarrierAck | None:
        """One consumer's ack on ``topic`` (``None``: none).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        ack: BarrierAck | None = self._record(
            paths.barrier_ack_path(self._root, topic, consumer_id), BarrierAck
        )
        return ack

    def _names(self, base: str) -> set[str]:
        def attempt() -> set[str]:
            try:
                return set(self._client.get_children(base))
            except NoNodeError:
                return set()

        result: set[str] = self._run(f"list {base}", attempt)
        return result

    def barrier_acks(self, topic: str) -> dict[str, BarrierAck]:
        """The consumers' acks on ``topic`` (of any announcement): id -> ack.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        base = paths.barrier_acks_path(self._root, topic)
        return self._children_records(
            base, lambda data, path, _stat: BarrierAck.from_json(data, path)
        )

    def rewind_acks(self, topic: str) -> dict[str, RewindAck]:
        """The consumers' acks of rewind markers on ``topic``: id -> ack.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        base = paths.barrier_rewind_acks_path(self._root, topic)
        return self._children_records(
            base, lambda data, path, _stat: RewindAck.from_json(data, path)
        )

    def _children_records(self, base: str, parse: Callable[[bytes, str, Any], T]) -> dict[str, T]:
        """Each child of ``base`` -> ``parse(data, path, stat)``; a child that vanishes
        while listed is left out, and no ``base`` is no children."""

        def attempt() -> dict[str, T]:
            try:
                names = self._client.get_children(base)
            except NoNodeError:
                return {}
            out = {}
            for name in sorted(names):
                got = self._read(f"{base}/{name}")
                if got is not None:
                    out[name] = parse(got[0], f"{base}/{name}", got[1])
            return out

        result: dict[str, T] = self._run(f"list {base}", attempt)
        return result

    def evict_consumer(self, topic: str, consumer_id: str) -> None:
        """Delete a consumer's member node and its registration on ``topic`` (idempotent).

        The consumer's next lease renewal finds its member node gone and stops relying
        on the barrier; its registration goes so that no later announcement waits for it.

        Raises:
            StoreError: ZooKeeper is unreachable (or an ACL forbids it).
        """

        def attempt() -> None:
            self._delete(paths.barrier_member_path(self._root, consumer_id))
            self._delete(paths.barrier_consumer_path(self._root, topic, consumer_id))

        self._run(f"evict consumer {consumer_id} of {topic}", attempt)

    # --- consumers ---------------------------------------------------------------------

    def _ephemeral(self, path: str, data: bytes) -> None:
        try:
            self._client.create(path, data, ephemeral=True, makepath=True)
        except NodeExistsError:
            # Ours (ids are unique per consumer, and a node of an ended session is
            # gone before a new session of ours exists): written again.
            self._client.set(path, data)

    def create_member(self, consumer_id: str) -> Any:
        """Create the consumer's member node (ephemeral; idempotent). Returns its stat.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.barrier_member_path(self._root, consumer_id)

        def attempt() -> Any:
            self._ephemeral(path, b"")
            return self._client.exists(path)

        return self._run(f"create {path}", attempt)

    def register_barrier_consumer(self, topic: str, record: BarrierRegistration) -> None:
        """Register a consumer of ``topic`` (ephemeral; idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.barrier_consumer_path(self._root, topic, record.id)
        self._run(f"register at {path}", self._ephemeral, path, record.to_json())

    def unregister_barrier_topic(self, consumer_id: str, topic: str) -> None:
        """Delete the consumer's registration and acks on ``topic`` alone (idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """

        def attempt() -> None:
            self._delete(paths.barrier_consumer_path(self._root, topic, consumer_id))
            self._delete(paths.barrier_ack_path(self._root, topic, consumer_id))
            self._delete(paths.barrier_rewind_ack_path(self._root, topic, consumer_id))

        self._run(f"unregister consumer {consumer_id} from {topic}", attempt)

    def unregister_barrier_consumer(self, consumer_id: str, topics: list[str]) -> None:
        """Delete the consumer's registrations, acks and member node (idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """

        def attempt() -> None:
            for topic in topics:
                self._delete(paths.barrier_consumer_path(self._root, topic, consumer_id))
                self._delete(paths.barrier_ack_path(self._root, topic, consumer_id))
                self._delete(paths.barrier_rewind_ack_path(self._root, topic, consumer_id))
            self._delete(paths.barrier_member_path(self._root, consumer_id))

        self._run(f"unregister consumer {consumer_id}", attempt)

    def ack_announcement(self, topic: str, ack: BarrierAck) -> None:
        """Write a consumer's ack of an announcement (ephemeral; idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.barrier_ack_path(self._root, topic, ack.id)
        self._run(f"ack at {path}", self._ephemeral, path, ack.to_json())

    def ack_announcement_async(self, topic: str, ack: BarrierAck) -> None:
        """:meth:`ack_announcement` without waiting (safe on kazoo's thread)."""
        _ephemeral_async(self._client, paths.barrier_ack_path(self._root, topic, ack.id), ack)

    def ack_rewind_async(self, topic: str, ack: RewindAck) -> None:
        """Write a consumer's ack of its group's rewind marker, without waiting."""
        path = paths.barrier_rewind_ack_path(self._root, topic, ack.id)
        _ephemeral_async(self._client, path, ack)


def _ephemeral_async(client: Any, path: str, record: Any) -> None:
    """Create (else set) an ephemeral node asynchronously: nothing waits on kazoo's thread."""
    data = record.to_json()

    def created(result: Any) -> None:
        try:
            result.get()
        except NodeExistsError:
            with contextlib.suppress(Exception):
                client.set_async(path, data)
        except Exception:  # connection loss: acked again after the reconnect's re-read
            return

    with contextlib.suppress(Exception):  # the client is closing
        client.create_async(path, data, ephemeral=True, makepath=True).rawlink(created)
