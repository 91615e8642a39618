"""Topics in the layout store: adopt, replace, un-adopt (their epochs: :mod:`.epochs`).

Errors: a record that fails its check is a :class:`~coordinator.kernel.errors.RecordCorruptError`
naming the znode; a concurrent change of the topic record is a
:class:`~coordinator.kernel.errors.TransitionInProgressError`.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, Generic, Protocol, TypeVar

from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
)

from coordinator.kernel.errors import (
    LayoutError,
    NotAdoptedError,
    RecordCorruptError,
    StoreError,
    TopicIdMismatchError,
    TransitionInProgressError,
)
from coordinator.kernel.store import paths
from coordinator.kernel.store.barrier_records import (
    CONSUMER_BARRIER,
    FIRST_ADOPTION,
    FeatureRecord,
)
from coordinator.kernel.store.base import _commit
from coordinator.kernel.store.epochs import EpochStore
from coordinator.kernel.store.records import (
    EpochRecord,
    EpochsRecord,
    TopicRecord,
)

__all__ = ["TopicSetting", "TopicStore"]


class _SettingRecord(Protocol):
    @property
    def topic(self) -> str: ...

    def to_json(self) -> bytes: ...


R = TypeVar("R", bound=_SettingRecord)


@dataclass(frozen=True, slots=True)
class TopicSetting(Generic[R]):
    """A per-topic setting record of the store: its znode and its record type.

    Attributes:
        path: ``path(root, topic)``: the znode of the topic's record.
        kind: The record type (it names its topic and has ``from_json``/``to_json``).
    """

    path: Callable[[str, str], str]
    kind: type[R]


class TopicStore(EpochStore):
    """The topic records: adopt, replace, un-adopt (part of :class:`~.store.LayoutStore`)."""

    # --- topics --------------------------------------------------------------------

    def get_topic(self, topic: str) -> TopicRecord | None:
        """Return the topic's record, or ``None`` if it is not adopted.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        return self.get_topic_and_version(topic)[0]

    def get_topic_and_version(self, topic: str) -> tuple[TopicRecord | None, int]:
        """Return the topic's record (or ``None``) and its znode version (-1: no node).

        The version is what :meth:`publish_epoch` and :meth:`seal_epoch` expect.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        return self._run(f"read topic {topic}", self._get_topic, topic)

    def get_topic_and_watch(self, topic: str, watch: Callable[[Any], None]) -> TopicRecord | None:
        """Return the topic's record (or ``None``) and leave a one-shot watch on it.

        ``watch(event)`` runs once on kazoo's thread at the next creation, change or
        deletion of the topic node (or when the session drops it); it must not block.
        The one-shot exists-watch of :meth:`exists_and_watch`: nothing here runs on
        kazoo's thread; the caller re-reads, and so re-arms the watch, on its own thread
        with bounded retries.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.topic_path(self._root, topic)

        def attempt() -> TopicRecord | None:
            # exists() leaves the watch whether or not the node exists yet.
            if self._client.exists(path, watch=watch) is None:
                return None
            return self._get_topic(topic)[0]

        return self._run(f"read topic {topic}", attempt)

    def list_topics(self) -> list[str]:
        """Return the adopted topics, sorted.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """

        def attempt() -> list[str]:
            try:
                names = self._client.get_children(paths.topics_path(self._root))
            except NoNodeError:
                return []
            out = []
            for name in sorted(names):
                got = self._read(paths.topic_path(self._root, name))
                if got is not None and got[0]:
                    out.append(name)
            return out

        return self._run("list topics", attempt)

    def topic_nodes(self) -> dict[str, tuple[TopicRecord | StoreError | None, frozenset[str]]]:
        """Every topic node's record (``None``: not adopted) and the names of its children.

        All reads are sent at once (kazoo's async calls), for the daemon's periodic check
        of its cache. A record that fails its check comes back as its error.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """

        def attempt() -> dict[str, tuple[TopicRecord | StoreError | None, frozenset[str]]]:
            try:
                names = sorted(self._client.get_children(paths.topics_path(self._root)))
            except NoNodeError:
                return {}
            reads = [
                (
                    name,
                    self._client.get_async(paths.topic_path(self._root, name)),
                    self._client.get_children_async(paths.topic_path(self._root, name)),
                )
                for name in names
            ]
            out: dict[str, tuple[TopicRecord | StoreError | None, frozenset[str]]] = {}
            for name, data_read, children_read in reads:
                path = paths.topic_path(self._root, name)
                try:
                    data, _stat = data_read.get()
                    children = frozenset(children_read.get())
                except NoNodeError:
                    continue  # removed while listing
                record: TopicRecord | StoreError | None = None
                if data:
                    try:
                        record = TopicRecord.from_json(data, path)
                        if record.topic != name:
                            raise RecordCorruptError(
                                f"{path}: TopicRecord names topic {record.topic!r}"
                            )
                    except StoreError as exc:
                        record = exc
                out[name] = (record, children)
            return out

        return self._run("read every topic node", attempt)

    # --- per-topic setting records (autoscaling, retention) -------------------------

    def _get_setting(self, setting: TopicSetting[R], topic: str) -> R | None:
        """Read the topic's ``setting`` record (``None``: not set).

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = setting.path(self._root, topic)
        record: R | None = self._topic_record(path, setting.kind, topic)
        return record

    def _set_setting(self, setting: TopicSetting[R], record: R, *, adopted: bool = True) -> None:
        """Write ``record`` at its topic's ``setting`` znode (idempotent).

        ``adopted``: the topic must be adopted (a policy or a retention the user sets);
        off for what a service writes about a topic it already works on.

        Raises:
            NotAdoptedError: ``adopted`` and the topic is not adopted.
            StoreError: ZooKeeper is unreachable.
        """
        topic = record.topic
        path = setting.path(self._root, topic)
        if adopted and self.get_topic(topic) is None:
            raise NotAdoptedError(
                f"topic {topic} is not adopted (adopt it first: ordered adopt {topic})"
            )
        self._run(f"write {path}", self._put, path, record.to_json())

    def _clear_setting(self, setting: TopicSetting[R], topic: str) -> bool:
        """Remove the topic's ``setting`` record; return whether there was one.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = setting.path(self._root, topic)
        removed: bool = self._run(f"delete {path}", self._delete, path)
        return removed

    def first_epoch(self, topic: str) -> int:
        """The number a new adoption of ``topic`` starts at: 0, or after an un-adopted layout.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.epochs_path(self._root, topic)

        def attempt() -> int:
            got = self._read(path)
            if got is None or not got[0]:
                return 0
            return EpochsRecord.from_json(got[0], path).last_epoch + 1

        return self._run(f"read the epoch count of {topic}", attempt)

    def create_topic(self, record: TopicRecord, epoch0: EpochRecord) -> None:
        """Adopt a topic: write its record and first epoch in one transaction.

        The first epoch is 0, or :meth:`first_epoch` for a name adopted before.
        Idempotent: if the topic is already adopted with the same record (ignoring
        ``adopted_at``) this does nothing.

        Raises:
            LayoutError: The topic is already adopted with another record.
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        topic = record.topic
        if epoch0.topic != topic or epoch0.epoch != record.epoch:
            raise ValueError("epoch0 must be the first epoch the topic record names")
        tpath = paths.topic_path(self._root, topic)
        epochs = paths.epochs_path(self._root, topic)
        e0 = paths.epoch_path(self._root, topic, epoch0.epoch)

        flag = paths.feature_path(self._root, CONSUMER_BARRIER)

        def attempt() -> None:
            self._client.ensure_path(paths.topics_path(self._root))
            # A root on which nothing was ever adopted and the flag never written is a
            # new one, which no older controller serves: its first adoption turns the
            # consumer barrier on, as a new Kafka cluster starts at its newest features.
            # In the same transaction, so that a retried or raced adoption decides alike.
            first = not self._client.get_children(paths.topics_path(self._root)) and (
                self._client.exists(flag) is None
            )
            existing, version = self._get_topic(topic)
            if existing is not None:
                if _same_adoption(existing, record):
                    return
                if (
                    existing.topic_id is not None
                    and record.topic_id is not None
                    and existing.topic_id != record.topic_id
                ):
                    raise TopicIdMismatchError(topic, existing.topic_id, record.topic_id)
                raise LayoutError(
                    f"topic {topic} is already adopted (initial {existing.initial}, "
                    f"algorithm {existing.algorithm}, ordered {existing.ordered})"
                )
            txn = self._client.transaction()
            if version < 0:
                txn.create(tpath, record.to_json())
            else:
                txn.set_data(tpath, record.to_json(), version=version)
            if self._client.exists(epochs) is None:
                txn.create(epochs, b"")
            # Producers register under it: made here so that, under ACLs, they need
            # no CREATE on the topic node (where they could plant a topic record).
            producers = paths.producers_path(self._root, topic)
            if self._client.exists(producers) is None:
                txn.create(producers, b"")
            txn.create(e0, epoch0.to_json())
            txn.create(paths.acks_path(self._root, topic, epoch0.epoch), b"")
            if first:
                self._client.ensure_path(paths.features_path(self._root))
                on = FeatureRecord(
                    feature=CONSUMER_BARRIER,
                    enabled=True,
                    changed_at=time.time(),
                    changed_by=FIRST_ADOPTION,
                )
                txn.create(flag, on.to_json())
            try:
                _commit(txn)
            except (NodeExistsError, BadVersionError, NoNodeError):
                # Raced with another adopter (or our own commit before a connection
                # loss): read again and decide.
                again, _ = self._get_topic(topic)
                if again is not None and _same_adoption(again, record):
                    return
                if again is not None:
                    raise LayoutError(f"topic {topic} is already adopted") from None
                raise StoreError(
                    f"{e0}: a first-epoch node exists but {tpath} holds no topic record"
                ) from None

        self._run(f"adopt topic {topic}", attempt)

    def bind_topic_id(self, topic: str, topic_id: str, expected_version: int) -> TopicRecord:
        """Bind an adoption made before topic ids (``topic_id`` unset) to ``topic_id``.

        Only the ``topic_id`` field changes; the topic node must still be at
        ``expected_version``. Idempotent: a record already bound to ``topic_id`` is
        returned as it is.

        Returns:
            The bound record.

        Raises:
            NotAdoptedError: The topic is not adopted.
            TopicIdMismatchError: The record is bound to another id.
            TransitionInProgressError: The topic record changed since it was read.
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.topic_path(self._root, topic)

        def attempt() -> TopicRecord:
            record, version = self._get_topic(topic)
            if record is None:
                raise NotAdoptedError(f"topic {topic} is not adopted")
            if record.topic_id is not None:
                if record.topic_id != topic_id:
                    raise TopicIdMismatchError(topic, record.topic_id, topic_id)
                return record
            if version != expected_version:
                raise TransitionInProgressError(
                    f"topic {topic} changed while binding it to topic id {topic_id}; try again"
                )
            bound = replace(record, topic_id=topic_id)
            try:
                self._client.set(path, bound.to_json(), version=version)
            except BadVersionError:
                again, _ = self._get_topic(topic)
                if again == bound:
                    return bound
                raise TransitionInProgressError(
                    f"topic {topic} changed while binding it to topic id {topic_id}; try again"
                ) from None
            return bound

        return self._run(f"bind topic {topic} to topic id {topic_id}", attempt)

    def replace_topic(self, record: TopicRecord, epoch: EpochRecord, expected_version: int) -> None:
        """Re-adopt a topic: drop every epoch, write ``record`` and its first ``epoch``.

        One transaction: every epoch node (with its acks) is deleted, the topic record
        set (the node must still be at ``expected_version``) and ``epoch`` (sealed,
        numbered after the old last epoch, so an epoch number never names two layouts)
        created with its ``acks`` node. Producer registrations and the lock stay.
        Idempotent: a retry that finds exactly this state already written succeeds.

        Raises:
            TransitionInProgressError: The topic record changed since it was read.
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        topic = record.topic
        if epoch.topic != topic or epoch.epoch != record.epoch or not epoch.sealed:
            raise ValueError("replace_topic needs the sealed epoch the new record names")
        tpath = paths.topic_path(self._root, topic)
        epochs = paths.epochs_path(self._root, topic)
        epath = paths.epoch_path(self._root, topic, epoch.epoch)

        def build(txn: Any) -> bool:
            self._delete_epochs(txn, topic)
            if self._client.exists(epochs) is None:
                txn.create(epochs, b"")
            txn.set_data(tpath, record.to_json(), version=expected_version)
            txn.create(epath, epoch.to_json())
            txn.create(paths.acks_path(self._root, topic, epoch.epoch), b"")
            return True

        def attempt() -> None:
            if self._state_is(topic, record, epoch):
                return
            self._commit_relisting(
                topic,
                "re-adopting",
                build,
                (NodeExistsError, BadVersionError),
                lambda: self._state_is(topic, record, epoch),
            )

        self._run(f"re-adopt topic {topic}", attempt)

    def remove_topic(self, topic: str, expected_version: int) -> None:
        """Un-adopt a topic: delete its record and every epoch, in one transaction.

        The topic node stays, empty (producers register under it whether or not the
        topic is adopted), with its producer registrations and lock; the ``epochs``
        node stays with an :class:`EpochsRecord` of the last epoch. The node must still
        be at ``expected_version``. Idempotent: a topic not adopted is left alone.

        Raises:
            TransitionInProgressError: The topic record changed since it was read.
            StoreError: ZooKeeper is unreachable.
        """
        tpath = paths.topic_path(self._root, topic)
        epochs = paths.epochs_path(self._root, topic)

        def build(txn: Any) -> bool:
            current, _version = self._get_topic(topic)
            if current is None:
                return False  # not adopted (any more)
            counter = EpochsRecord(topic=topic, last_epoch=current.epoch)
            self._delete_epochs(txn, topic)
            if self._client.exists(epochs) is None:
                txn.create(epochs, counter.to_json())
            else:
                txn.set_data(epochs, counter.to_json())
            txn.set_data(tpath, b"", version=expected_version)
            return True

        self._run(
            f"un-adopt topic {topic}",
            lambda: self._commit_relisting(topic, "un-adopting", build, (BadVersionError,)),
        )

    def _commit_relisting(
        self,
        topic: str,
        doing: str,
        build: Callable[[Any], bool],
        conflicts: tuple[type[Exception], ...],
        settled: Callable[[], bool] = lambda: False,
    ) -> None:
        """Commit a transaction over the topic's epochs, listing them again if they moved.

        ``build(txn)`` fills a new transaction (it lists the epochs to delete) and returns
        ``False`` when there is nothing to do. An epoch or ack that comes or goes between
        the listing and the commit fails it: it is built again, up to 5 times. An error in
        ``conflicts`` means another change won, unless ``settled()`` finds the wanted
        state already written (an idempotent retry).

        Raises:
            TransitionInProgressError: Another change won, or the epochs kept changing.
        """
        for _ in range(5):
            txn = self._client.transaction()
            if not build(txn):
                return
            try:
                _commit(txn)
                return
            except (NotEmptyError, NoNodeError):
                continue  # an ack or epoch came or went while listing: list again
            except conflicts:
                if settled():
                    return
                raise TransitionInProgressError(
                    f"topic {topic} changed while {doing} it: another change is in "
                    "progress; try again"
                ) from None
        raise TransitionInProgressError(
            f"the epochs of topic {topic} kept changing while {doing} it; try again"
        )

    def _delete_epochs(self, txn: Any, topic: str) -> None:
        """Add to ``txn`` the deletion of every epoch node, acks first."""
        parent = paths.epochs_path(self._root, topic)
        try:
            names = self._client.get_children(parent)
        except NoNodeError:
            return
        for name in sorted(names):
            with contextlib.suppress(NoNodeError):
                self._delete_epoch_node(txn, f"{parent}/{name}")

    def _delete_epoch_node(self, txn: Any, epoch_path: str, version: int = -1) -> None:
        """Add to ``txn`` the deletion of one epoch node, its ``acks`` children first.

        A child gone meanwhile is left out; ``version`` guards the epoch node itself.

        Raises:
            NoNodeError: The epoch node is gone.
        """
        for child in sorted(self._client.get_children(epoch_path)):
            sub = f"{epoch_path}/{child}"
            try:
                grandchildren = self._client.get_children(sub)
            except NoNodeError:
                continue
            for name in sorted(grandchildren):
                txn.delete(f"{sub}/{name}")
            txn.delete(sub)
        txn.delete(epoch_path, version=version)


def _same_adoption(a: TopicRecord, b: TopicRecord) -> bool:
    """Whether two topic records are the same adoption (``adopted_at`` aside)."""
    return a == replace(b, adopted_at=a.adopted_at)
