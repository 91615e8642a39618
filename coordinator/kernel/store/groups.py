"""Ordered consumer groups in the layout store: registrations and first-seen records."""

from __future__ import annotations

import contextlib
import urllib.parse
from typing import Any

from kazoo.exceptions import (
    NodeExistsError,
    NoNodeError,
)

from coordinator.kernel.store import paths
from coordinator.kernel.store.base import StoreBase
from coordinator.kernel.store.records import (
    GroupMemberRecord,
    GroupRegistration,
    GroupSeenRecord,
)

__all__ = ["GroupStore"]


class GroupStore(StoreBase):
    """Consumer group registrations (part of :class:`~coordinator.kernel.store.LayoutStore`)."""

    def register_group(self, group: str, topic: str, at: float) -> None:
        """Register ``group`` as an ordered consumer group of ``topic`` (idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.group_registration_path(self._root, group, topic)
        data = GroupRegistration(group=group, topic=topic, registered_at=at).to_json()

        def attempt() -> None:
            with contextlib.suppress(NodeExistsError):
                self._client.create(path, data, makepath=True)

        self._run(f"register group {group} on {topic}", attempt)

    def register_member(self, record: GroupMemberRecord) -> None:
        """Write a consumer's :class:`GroupMemberRecord` (ephemeral; idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.group_member_path(self._root, record.group, record.member)
        data = record.to_json()

        def attempt() -> None:
            try:
                self._client.create(path, data, ephemeral=True, makepath=True)
            except NodeExistsError:
                # Ours: member ids are unique per consumer.
                self._client.set(path, data)

        self._run(f"register member {record.member} of {record.group}", attempt)

    def group_members(self, group: str) -> list[GroupMemberRecord]:
        """The live consumers of ``group`` that wrote a :class:`GroupMemberRecord`.

        A member that leaves while listed is left out.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        base = paths.group_members_path(self._root, group)

        def attempt() -> list[GroupMemberRecord]:
            try:
                names = self._client.get_children(base)
            except NoNodeError:
                return []
            out = []
            for name in sorted(names):
                got = self._read(f"{base}/{name}")
                if got is not None:
                    out.append(GroupMemberRecord.from_json(got[0], f"{base}/{name}"))
            return out

        members: list[GroupMemberRecord] = self._run(f"list members of {group}", attempt)
        return members

    def group_registered_at(self, group: str, topic: str) -> float | None:
        """When ``group`` first registered on ``topic`` (``None``: not registered).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.group_registration_path(self._root, group, topic)
        registration: GroupRegistration | None = self._record(path, GroupRegistration)
        return None if registration is None else registration.registered_at

    def mark_rewound(self, group: str, topic: str) -> Any:
        """Write ``group``'s rewind marker of ``topic`` (:func:`paths.rewind_path`).

        A data-less znode whose every write signals that a member moved the group's
        progress back; readers compare its last-write zxid.

        Returns:
            The marker's stat after the write.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.rewind_path(self._root, group, topic)

        def attempt() -> Any:
            try:
                return self._client.set(path, b"")
            except NoNodeError:
                # Another member may make it first: its write is our signal too.
                with contextlib.suppress(NodeExistsError):
                    self._client.create(path, b"", makepath=True)
                return self._client.exists(path)

        return self._run(f"mark a rewind of {group} on {topic}", attempt)

    def registered_groups(self, topic: str) -> set[str]:
        """Return the ordered consumer groups registered on ``topic``.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        parent = paths.groups_path(self._root)

        def attempt() -> set[str]:
            try:
                names = self._client.get_children(parent)
            except NoNodeError:
                return set()
            out = set()
            for name in names:
                group = urllib.parse.unquote(name)
                if not group:
                    continue
                path = paths.group_registration_path(self._root, group, topic)
                if self._client.exists(path) is not None:
                    out.add(group)
            return out

        return self._run(f"list registered groups of {topic}", attempt)

    def group_seen(self, group: str, topic: str) -> GroupSeenRecord | None:
        """Return when the daemon first saw ``group``'s offsets on ``topic`` as they are.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.group_seen_path(self._root, group, topic)
        seen: GroupSeenRecord | None = self._record(path, GroupSeenRecord)
        return seen

    def put_group_seen(self, record: GroupSeenRecord) -> None:
        """Create or overwrite a :class:`GroupSeenRecord`.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.group_seen_path(self._root, record.group, record.topic)
        self._run(f"write {path}", self._put, path, record.to_json())
