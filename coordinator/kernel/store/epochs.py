"""Epochs in the layout store: read, publish, update and seal a topic's epochs.

Every write checks the topic record it was decided against (a concurrent change is a
:class:`~coordinator.kernel.errors.TransitionInProgressError`); a record that fails its
check is a :class:`~coordinator.kernel.errors.RecordCorruptError` naming the znode.
"""

from __future__ import annotations

from collections.abc import Collection

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
)

from coordinator.kernel.errors import (
    RecordCorruptError,
    StoreError,
    TransitionInProgressError,
)
from coordinator.kernel.store import paths
from coordinator.kernel.store.base import StoreBase, _commit
from coordinator.kernel.store.records import (
    EpochRecord,
    TopicRecord,
)

__all__ = ["EpochStore"]


class EpochStore(StoreBase):
    """A topic's epochs (part of :class:`~.store.LayoutStore`, under the topic records)."""

    # The topic record as stored, with its version: every epoch write is checked
    # against it, and the topic records' own operations (topics.py) read it too.
    def _get_topic(self, topic: str) -> tuple[TopicRecord | None, int]:
        path = paths.topic_path(self._root, topic)
        got = self._read(path)
        if got is None:
            return None, -1
        data, stat = got
        if not data:
            # Producers register under a topic before it is adopted: an empty topic
            # node is "not adopted", not corruption.
            return None, int(stat.version)
        record = TopicRecord.from_json(data, path)
        if record.topic != topic:
            raise RecordCorruptError(f"{path}: TopicRecord names topic {record.topic!r}")
        return record, int(stat.version)

    # --- epochs --------------------------------------------------------------------

    def _get_epoch(self, topic: str, epoch: int) -> tuple[EpochRecord, int] | None:
        path = paths.epoch_path(self._root, topic, epoch)
        got = self._read(path)
        if got is None:
            return None
        data, stat = got
        return self._epoch_from(data, path, topic, epoch), int(stat.version)

    @staticmethod
    def _epoch_from(data: bytes, path: str, topic: str, epoch: int) -> EpochRecord:
        record = EpochRecord.from_json(data, path)
        if record.topic != topic or record.epoch != epoch:
            raise RecordCorruptError(
                f"{path}: EpochRecord names topic {record.topic!r} epoch {record.epoch}"
            )
        return record

    def find_epoch(self, topic: str, epoch: int) -> EpochRecord | None:
        """Return the epoch's record, or ``None`` if it was never published.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        got = self._run(f"read epoch {epoch} of {topic}", self._get_epoch, topic, epoch)
        return None if got is None else got[0]

    def get_epoch(self, topic: str, epoch: int) -> EpochRecord:
        """Return the epoch's record.

        Raises:
            StoreError: The epoch does not exist, its record fails its check, or
                ZooKeeper is unreachable.
        """
        record = self.find_epoch(topic, epoch)
        if record is None:
            raise StoreError(f"{paths.epoch_path(self._root, topic, epoch)}: no such epoch")
        return record

    def epochs(self, topic: str) -> list[EpochRecord]:
        """Return every epoch of the topic, ascending (empty if not adopted).

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        return self.epochs_except(topic, ())[1]

    def epochs_except(
        self, topic: str, known: Collection[int]
    ) -> tuple[list[int], list[EpochRecord]]:
        """The topic's epoch numbers, and the records of those not in ``known``.

        A reader that holds sealed epochs asks only for the others: a sealed epoch never
        changes, and an epoch number never names two layouts (a re-adoption numbers its
        epochs after the old ones).

        Returns:
            Every epoch number present, ascending; the records of the ones not known.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        parent = paths.epochs_path(self._root, topic)

        def attempt() -> tuple[list[int], list[EpochRecord]]:
            try:
                names = self._client.get_children(parent)
            except NoNodeError:
                return [], []
            for name in names:
                if len(name) != 10 or not name.isdigit():
                    raise RecordCorruptError(f"{parent}/{name}: not an epoch node name")
            numbers = sorted(int(name) for name in names)
            # Every read at once (kazoo's async calls): every client reads the history at
            # start and at each layout change; one round trip per epoch made 100 epochs
            # cost 32-43 ms.
            reads = [
                (n, self._client.get_async(paths.epoch_path(self._root, topic, n)))
                for n in numbers
                if n not in known
            ]
            out = []
            present = set(numbers)
            for number, read in reads:
                path = paths.epoch_path(self._root, topic, number)
                try:
                    data, _stat = read.get()
                except NoNodeError:
                    present.discard(number)  # removed while listing (a re-adoption)
                    continue
                out.append(self._epoch_from(data, path, topic, number))
            return [n for n in numbers if n in present], out

        return self._run(f"list epochs of {topic}", attempt)

    def publish_epoch(
        self, topic_record: TopicRecord, epoch: EpochRecord, expected_version: int
    ) -> None:
        """Publish a new epoch: create it and its ``acks`` node, set the topic record.

        One transaction; the topic node must still be at ``expected_version``.
        Idempotent: a retry that finds exactly this state already written succeeds.

        Raises:
            TransitionInProgressError: The topic record changed since it was read.
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        topic = topic_record.topic
        tpath = paths.topic_path(self._root, topic)
        epath = paths.epoch_path(self._root, topic, epoch.epoch)

        def attempt() -> None:
            txn = self._client.transaction()
            txn.create(epath, epoch.to_json())
            txn.create(paths.acks_path(self._root, topic, epoch.epoch), b"")
            txn.set_data(tpath, topic_record.to_json(), version=expected_version)
            try:
                _commit(txn)
            except (NodeExistsError, BadVersionError, NoNodeError):
                if self._state_is(topic, topic_record, epoch):
                    return
                raise TransitionInProgressError(
                    f"topic {topic} changed while publishing epoch {epoch.epoch}: "
                    "another transition is in progress"
                ) from None

        self._run(f"publish epoch {epoch.epoch} of {topic}", attempt)

    def update_epoch(self, epoch: EpochRecord, expected_version: int = -1) -> None:
        """Overwrite an existing epoch record (e.g. its producer list or ``expired``).

        Raises:
            StoreError: The epoch does not exist, ZooKeeper is unreachable, or
                ``expected_version`` (if not -1) does not match.
        """
        path = paths.epoch_path(self._root, epoch.topic, epoch.epoch)

        def attempt() -> None:
            try:
                self._client.set(path, epoch.to_json(), version=expected_version)
            except NoNodeError:
                raise StoreError(f"{path}: no such epoch") from None
            except BadVersionError:
                got = self._get_epoch(epoch.topic, epoch.epoch)
                if got is None or got[0] != epoch:
                    raise StoreError(f"{path}: changed concurrently") from None

        self._run(f"update epoch {epoch.epoch} of {epoch.topic}", attempt)

    def seal_epoch(
        self, topic_record: TopicRecord, epoch: EpochRecord, expected_version: int
    ) -> None:
        """Seal an epoch: set its record (sealed) and the topic record in one transaction.

        ``topic_record`` is the record to write (``pending: None``); the topic node
        must still be at ``expected_version``. Idempotent like :meth:`publish_epoch`.

        Raises:
            TransitionInProgressError: The topic record changed since it was read.
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        topic = topic_record.topic
        if not epoch.sealed or topic_record.pending is not None:
            raise ValueError("seal_epoch needs a sealed epoch and a topic record without pending")

        def attempt() -> None:
            txn = self._client.transaction()
            txn.set_data(paths.epoch_path(self._root, topic, epoch.epoch), epoch.to_json())
            txn.set_data(
                paths.topic_path(self._root, topic),
                topic_record.to_json(),
                version=expected_version,
            )
            try:
                _commit(txn)
            except (BadVersionError, NoNodeError):
                if self._state_is(topic, topic_record, epoch):
                    return
                raise TransitionInProgressError(
                    f"topic {topic} changed while sealing epoch {epoch.epoch}: another "
                    "transition is in progress"
                ) from None

        self._run(f"seal epoch {epoch.epoch} of {topic}", attempt)

    def _state_is(self, topic: str, topic_record: TopicRecord, epoch: EpochRecord) -> bool:
        current, _ = self._get_topic(topic)
        got = self._get_epoch(topic, epoch.epoch)
        return current == topic_record and got is not None and got[0] == epoch
