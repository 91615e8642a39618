"""Retired partitions and consumed retention of a topic in the layout store."""

from __future__ import annotations

from typing import Final

from kazoo.exceptions import (
    NoNodeError,
)

from coordinator.kernel.errors import (
    RecordCorruptError,
)
from coordinator.kernel.store import paths
from coordinator.kernel.store.records import (
    RetentionRecord,
    RetiredRecord,
)
from coordinator.kernel.store.topics import TopicSetting, TopicStore

__all__ = ["RetiredStore"]

_RETENTION: Final = TopicSetting(paths.retention_path, RetentionRecord)


class RetiredStore(TopicStore):
    """Retired partitions and retention (part of :class:`~coordinator.kernel.store.LayoutStore`)."""

    # --- retired partitions, retention, group registrations ------------------------

    def retired(self, topic: str) -> dict[int, RetiredRecord]:
        """Return the topic's retired-partition records by partition.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        parent = paths.retired_path(self._root, topic)

        def attempt() -> dict[int, RetiredRecord]:
            try:
                names = self._client.get_children(parent)
            except NoNodeError:
                return {}
            out: dict[int, RetiredRecord] = {}
            for name in sorted(names):
                path = f"{parent}/{name}"
                if not name.isascii() or not name.isdigit():
                    raise RecordCorruptError(f"{path}: not a partition node name")
                got = self._read(path)
                if got is None:
                    continue
                record = RetiredRecord.from_json(got[0], path)
                if record.topic != topic or record.partition != int(name):
                    raise RecordCorruptError(
                        f"{path}: RetiredRecord names {record.topic}[{record.partition}]"
                    )
                out[record.partition] = record
            return out

        return self._run(f"list retired partitions of {topic}", attempt)

    def put_retired(self, record: RetiredRecord) -> None:
        """Create or overwrite a retired partition's record (idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.retired_partition_path(self._root, record.topic, record.partition)
        self._run(f"write {path}", self._put, path, record.to_json())

    def delete_retired(self, topic: str, partition: int) -> None:
        """Remove a retired partition's record (nothing if it is gone): it is active again.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.retired_partition_path(self._root, topic, partition)
        self._run(f"delete {path}", self._delete, path)

    def get_retention(self, topic: str) -> RetentionRecord | None:
        """Return the topic's consumed-retention setting, ``None`` when off.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        return self._get_setting(_RETENTION, topic)

    def set_retention(self, record: RetentionRecord) -> None:
        """Set the topic's consumed retention (idempotent; the topic must be adopted).

        Raises:
            NotAdoptedError: The topic is not adopted.
            StoreError: ZooKeeper is unreachable.
        """
        self._set_setting(_RETENTION, record)

    def clear_retention(self, topic: str) -> bool:
        """Turn the topic's consumed retention off; return whether it was on.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        return self._clear_setting(_RETENTION, topic)
