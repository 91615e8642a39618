"""Dropping a topic's oldest sealed epochs from the layout store (history compaction).

Which epochs may go is decided elsewhere (:func:`linear_hash.compact.compactable`);
this module only removes them, validated before any write, oldest first and one epoch
per transaction, so a crash part-way leaves a history that starts later but has no
hole. Readers already take a history that does not start at the adoption
(:meth:`~coordinator.kernel.store.topics.TopicStore.epochs_except` lists what is there).
"""

from __future__ import annotations

from collections.abc import Sequence

from kazoo.exceptions import BadVersionError, NoNodeError, NotEmptyError

from coordinator.kernel.errors import LayoutError, RecordCorruptError, StoreError
from coordinator.kernel.store import paths
from coordinator.kernel.store.base import _commit
from coordinator.kernel.store.records import EpochRecord
from coordinator.kernel.store.topics import TopicStore

__all__ = ["EpochDropStore"]


class EpochDropStore(TopicStore):
    """Removes old epochs (part of :class:`~coordinator.kernel.store.LayoutStore`)."""

    def drop_epochs(self, topic: str, epochs: Sequence[EpochRecord]) -> list[int]:
        """Delete ``epochs`` (with their ``acks`` nodes), oldest first.

        Validated before any write: the epochs are ascending, sealed and of ``topic``;
        none is the topic record's epoch or its pending one; each is, as stored now,
        exactly the record given (the plan was made from it); and together they are the
        oldest epochs present (the history keeps no hole). Idempotent: an epoch already
        gone is skipped, and a retry after a crash finishes the rest.

        Returns:
            The epochs this call deleted.

        Raises:
            LayoutError: The request fails its validation (nothing was deleted).
            StoreError: ZooKeeper is unreachable, or an epoch changed while deleting it.
        """
        remaining = self.check_drop(topic, epochs)
        dropped = []
        for number in remaining:
            if self._run(f"drop epoch {number} of {topic}", self._drop_one, topic, number):
                dropped.append(number)
        return dropped

    def epoch_numbers(self, topic: str) -> list[int]:
        """The numbers of the topic's epochs in the store, ascending (no record read).

        Raises:
            StoreError: ZooKeeper is unreachable or a node name is not an epoch's.
        """
        parent = paths.epochs_path(self._root, topic)

        def attempt() -> list[int]:
            try:
                names = self._client.get_children(parent)
            except NoNodeError:
                return []
            for name in names:
                if len(name) != 10 or not name.isdigit():
                    raise RecordCorruptError(f"{parent}/{name}: not an epoch node name")
            return sorted(int(name) for name in names)

        return self._run(f"list epochs of {topic}", attempt)

    def check_drop(self, topic: str, epochs: Sequence[EpochRecord]) -> list[int]:
        """Validate a :meth:`drop_epochs` request; write nothing.

        Returns:
            The epochs of the request still present, ascending.

        Raises:
            LayoutError: The request fails its validation.
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        numbers = [e.epoch for e in epochs]
        if numbers != sorted(set(numbers)):
            raise LayoutError(f"epochs to drop from {topic} must be ascending and distinct")
        for e in epochs:
            if e.topic != topic or e.state != "sealed":
                raise LayoutError(f"epoch {e.epoch} of {e.topic} is not a sealed epoch of {topic}")
        if not epochs:
            return []
        record = self.get_topic(topic)
        if record is None:
            raise LayoutError(f"topic {topic} is not adopted: no epochs to drop")
        if numbers[-1] >= record.epoch or (
            record.pending is not None and numbers[-1] >= record.pending
        ):
            raise LayoutError(
                f"epoch {numbers[-1]} of {topic} is not older than its current epoch "
                f"{record.epoch}: it stays"
            )
        present, stored = self.epochs_except(topic, ())
        by_number = {r.epoch: r for r in stored}
        remaining = [n for n in numbers if n in by_number]
        if present[: len(remaining)] != remaining:
            raise LayoutError(
                f"epochs {remaining} of {topic} are not its oldest ({present[:3]}...): "
                "dropping them would leave a hole"
            )
        for e in epochs:
            if e.epoch in by_number and by_number[e.epoch] != e:
                raise LayoutError(f"epoch {e.epoch} of {topic} changed since it was read")
        return remaining

    def _drop_one(self, topic: str, number: int) -> bool:
        """Delete one epoch node and its children in one transaction; ``False``: gone."""
        path = paths.epoch_path(self._root, topic, number)
        for _ in range(5):
            txn = self._client.transaction()
            try:
                _data, stat = self._client.get(path)
                # The version check: a sealed epoch never changes, so a write since the
                # validation means something is wrong; keep it.
                self._delete_epoch_node(txn, path, version=stat.version)
            except NoNodeError:
                return False
            try:
                _commit(txn)
                return True
            except (NoNodeError, NotEmptyError):
                continue  # a child came or went (or another compactor won): look again
            except BadVersionError:
                raise StoreError(f"{path}: changed while dropping it; kept") from None
        raise StoreError(f"{path}: its children kept changing while dropping it")
