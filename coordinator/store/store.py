"""``LayoutStore``: topic layouts, epochs, producer registrations and acks in ZooKeeper.

Every write is a small function that reads what it needs, writes (one ZooKeeper
transaction where several znodes must change together) and is safe to run again: it
runs under ``client.retry`` (kazoo's ``KazooRetry``, copied per call by kazoo), and a
retry after a connection loss that finds its own earlier write applied treats it as
success.

Errors: a record that fails its check is a :class:`~coordinator.errors.StoreError` naming the
znode; ZooKeeper unreachable (retries exhausted, session closed) is a ``StoreError`` too;
a concurrent change of the topic record is a
:class:`~coordinator.errors.TransitionInProgressError`.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import urllib.parse
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NoAuthError,
    NodeExistsError,
    NoNodeError,
    NotEmptyError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.lock import Lock

from coordinator.errors import (
    LayoutError,
    NotAdoptedError,
    RecordCorruptError,
    StoreAuthError,
    StoreError,
    StoreUnavailableError,
    TopicIdMismatchError,
    TransitionInProgressError,
)
from coordinator.store import ack_proof, paths
from coordinator.store.records import (
    AckRecord,
    EpochRecord,
    EpochsRecord,
    GroupRegistration,
    GroupSeenRecord,
    ProducerRecord,
    RetentionRecord,
    RetiredRecord,
    TopicRecord,
)

__all__ = ["LayoutStore", "Watch"]

_log = logging.getLogger(__name__)

T = TypeVar("T")


class Watch:
    """A handle on a kazoo watch: :meth:`stop` ends it at the next event.

    kazoo's ``DataWatch``/``ChildrenWatch`` stop when their callback returns ``False``;
    this handle makes the wrapped callback do that once stopped.
    """

    def __init__(self) -> None:
        self._stopped = threading.Event()

    def stop(self) -> None:
        """Stop delivering events (kazoo drops the watch at the next event)."""
        self._stopped.set()

    @property
    def stopped(self) -> bool:
        """Whether :meth:`stop` was called."""
        return self._stopped.is_set()


def _commit(txn: Any) -> None:
    """Commit a kazoo transaction; raise the operation error that aborted it."""
    results = txn.commit()
    for result in results:
        if isinstance(result, Exception) and not isinstance(
            result, RolledBackError | RuntimeInconsistency
        ):
            raise result
    for result in results:
        if isinstance(result, Exception):
            raise result


class LayoutStore:
    """The layout store of ``docs/protocol.md`` over a started :class:`KazooClient`.

    Args:
        client: A started kazoo client. Its ``retry`` (``command_retry``) decides how
            long a call keeps retrying while ZooKeeper is unreachable.
        root: The store root (default ``/ordered``).

    Raises:
        ValueError: ``root`` is not an absolute path.
    """

    def __init__(self, client: KazooClient, root: str = paths.DEFAULT_ROOT) -> None:
        self._client = client
        self._root = paths.check_root(root)

    @property
    def client(self) -> KazooClient:
        """The kazoo client."""
        return self._client

    @property
    def root(self) -> str:
        """The store root."""
        return self._root

    # --- plumbing ------------------------------------------------------------------

    def _run(self, what: str, func: Callable[..., T], *args: Any) -> T:
        try:
            result: T = self._client.retry(func, *args)
            return result
        except NoAuthError as exc:
            # ZooKeeper refused: retrying cannot help, and the message names the path.
            raise StoreAuthError(f"cannot {what}: {exc}") from None
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(
                f"ZooKeeper unavailable while trying to {what}: {type(exc).__name__}"
                + (f": {exc}" if str(exc) else "")
            ) from exc

    def _read(self, path: str) -> tuple[bytes, Any] | None:
        try:
            data, stat = self._client.get(path)
        except NoNodeError:
            return None
        return data, stat

    # --- topics --------------------------------------------------------------------

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
        Unlike :meth:`watch_topic` (a kazoo ``DataWatch``, which re-reads on kazoo's
        thread and retries forever while ZooKeeper is away, so that kazoo's exit hook
        can hang joining that thread), nothing here runs on kazoo's thread: the caller
        re-reads, and so re-arms the watch, on its own thread with bounded retries.

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

        def attempt() -> None:
            self._client.ensure_path(paths.topics_path(self._root))
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

        def attempt() -> None:
            if self._state_is(topic, record, epoch):
                return
            for _ in range(5):
                txn = self._client.transaction()
                self._delete_epochs(txn, topic)
                if self._client.exists(epochs) is None:
                    txn.create(epochs, b"")
                txn.set_data(tpath, record.to_json(), version=expected_version)
                txn.create(epath, epoch.to_json())
                txn.create(paths.acks_path(self._root, topic, epoch.epoch), b"")
                try:
                    _commit(txn)
                    return
                except (NotEmptyError, NoNodeError):
                    continue  # an ack or epoch came or went while listing: list again
                except (NodeExistsError, BadVersionError):
                    if self._state_is(topic, record, epoch):
                        return
                    raise TransitionInProgressError(
                        f"topic {topic} changed while re-adopting it: another change is in "
                        "progress; try again"
                    ) from None
            raise TransitionInProgressError(
                f"the epochs of topic {topic} kept changing while re-adopting it; try again"
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

        def attempt() -> None:
            for _ in range(5):
                current, _version = self._get_topic(topic)
                if current is None:
                    return  # not adopted (any more)
                counter = EpochsRecord(topic=topic, last_epoch=current.epoch)
                txn = self._client.transaction()
                self._delete_epochs(txn, topic)
                if self._client.exists(epochs) is None:
                    txn.create(epochs, counter.to_json())
                else:
                    txn.set_data(epochs, counter.to_json())
                txn.set_data(tpath, b"", version=expected_version)
                try:
                    _commit(txn)
                    return
                except (NotEmptyError, NoNodeError):
                    continue  # an ack or epoch came or went while listing: list again
                except BadVersionError:
                    raise TransitionInProgressError(
                        f"topic {topic} changed while un-adopting it: another change is in "
                        "progress; try again"
                    ) from None
            raise TransitionInProgressError(
                f"the epochs of topic {topic} kept changing while un-adopting it; try again"
            )

        self._run(f"un-adopt topic {topic}", attempt)

    def _delete_epochs(self, txn: Any, topic: str) -> None:
        """Add to ``txn`` the deletion of every epoch node, acks first."""
        parent = paths.epochs_path(self._root, topic)
        try:
            names = self._client.get_children(parent)
        except NoNodeError:
            return
        for name in sorted(names):
            epoch_path = f"{parent}/{name}"
            try:
                children = self._client.get_children(epoch_path)
            except NoNodeError:
                continue
            for child in children:
                sub = f"{epoch_path}/{child}"
                with contextlib.suppress(NoNodeError):
                    for grandchild in self._client.get_children(sub):
                        txn.delete(f"{sub}/{grandchild}")
                txn.delete(sub)
            txn.delete(epoch_path)

    # --- epochs --------------------------------------------------------------------

    def _get_epoch(self, topic: str, epoch: int) -> tuple[EpochRecord, int] | None:
        path = paths.epoch_path(self._root, topic, epoch)
        got = self._read(path)
        if got is None:
            return None
        data, stat = got
        record = EpochRecord.from_json(data, path)
        if record.topic != topic or record.epoch != epoch:
            raise RecordCorruptError(
                f"{path}: EpochRecord names topic {record.topic!r} epoch {record.epoch}"
            )
        return record, int(stat.version)

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
        parent = paths.epochs_path(self._root, topic)

        def attempt() -> list[EpochRecord]:
            try:
                names = self._client.get_children(parent)
            except NoNodeError:
                return []
            out = []
            for name in sorted(names):
                if len(name) != 10 or not name.isdigit():
                    raise RecordCorruptError(f"{parent}/{name}: not an epoch node name")
                got = self._get_epoch(topic, int(name))
                if got is not None:
                    out.append(got[0])
            return out

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

    # --- producers and acks --------------------------------------------------------

    def register_producer(self, topic: str, record: ProducerRecord) -> None:
        """Register a live producer of ``topic`` (an ephemeral node of this session).

        Works whether or not the topic is adopted. Idempotent within one session.

        Raises:
            StoreError: The id is registered by another session, or ZooKeeper is
                unreachable.
        """
        path = paths.producer_path(self._root, topic, record.id)

        def attempt() -> None:
            self._client.ensure_path(paths.producers_path(self._root, topic))
            try:
                self._client.create(path, record.to_json(), ephemeral=True)
            except NodeExistsError:
                got = self._read(path)
                if got is None:
                    raise  # gone again: let the retry create it
                session_id = self._client.client_id[0] if self._client.client_id else None
                if got[1].ephemeralOwner != session_id:
                    raise StoreError(
                        f"{path}: producer id {record.id} is registered by another session"
                    ) from None

        self._run(f"register producer {record.id} of {topic}", attempt)

    def unregister_producer(self, topic: str, producer_id: str) -> None:
        """Remove a producer's registration (nothing if it is gone).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.producer_path(self._root, topic, producer_id)

        def attempt() -> None:
            with contextlib.suppress(NoNodeError):
                self._client.delete(path)

        self._run(f"unregister producer {producer_id} of {topic}", attempt)

    def producers(self, topic: str) -> dict[str, ProducerRecord]:
        """Return the registered producers of ``topic`` by id.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        parent = paths.producers_path(self._root, topic)
        return self._run(f"list producers of {topic}", self._children, parent, ProducerRecord, None)

    def producers_registered_before(self, topic: str, epoch: int) -> dict[str, ProducerRecord]:
        """Return the producers whose registration znode predates the epoch's znode.

        Compared by ZooKeeper's creation zxid (a total order of writes, no clocks): a
        producer registered after the publish read the new layout first, so the
        barrier of ``epoch`` need not wait for it.

        Raises:
            StoreError: The epoch does not exist, a record fails its check, or ZooKeeper
                is unreachable.
        """
        parent = paths.producers_path(self._root, topic)
        epath = paths.epoch_path(self._root, topic, epoch)

        def attempt() -> dict[str, ProducerRecord]:
            stat = self._client.exists(epath)
            if stat is None:
                raise StoreError(f"{epath}: no such epoch")
            before = {
                name for name, czxid in self._child_czxids(parent).items() if czxid < stat.czxid
            }
            records: dict[str, ProducerRecord] = self._children(parent, ProducerRecord, None)
            return {name: r for name, r in records.items() if name in before}

        return self._run(f"list producers of {topic}", attempt)

    def _child_czxids(self, parent: str) -> dict[str, int]:
        try:
            names = self._client.get_children(parent)
        except NoNodeError:
            return {}
        out = {}
        for name in names:
            stat = self._client.exists(f"{parent}/{name}")
            if stat is not None:
                out[name] = int(stat.czxid)
        return out

    def ack(self, topic: str, epoch: int, record: AckRecord) -> None:
        """Write a producer's ack of ``epoch``. Idempotent: an existing ack is kept.

        Raises:
            StoreError: The epoch does not exist, or ZooKeeper is unreachable.
        """
        if record.epoch != epoch:
            raise ValueError(f"ack of epoch {record.epoch} written under epoch {epoch}")
        # One transaction with a write of the producer's registration proves the ack
        # (coordinator.store.ack_proof): another identity cannot forge it.
        self._run(
            f"ack epoch {epoch} of {topic}",
            ack_proof.write_ack,
            self._client,
            self._root,
            topic,
            record,
        )

    def verified_acks(self, topic: str, epoch: int) -> ack_proof.AckCheck:
        """Return the acks of ``epoch``, proven ones and forged ones apart.

        Raises:
            StoreError: ZooKeeper is unreachable or refused, or a record fails its check.
        """
        return self._run(
            f"list acks of epoch {epoch} of {topic}",
            ack_proof.check_acks,
            self._client,
            self._root,
            topic,
            epoch,
        )

    def acks(self, topic: str, epoch: int) -> dict[str, AckRecord]:
        """Return the acks of ``epoch`` by producer id.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        parent = paths.acks_path(self._root, topic, epoch)
        return self._run(
            f"list acks of epoch {epoch} of {topic}", self._children, parent, AckRecord, epoch
        )

    def _children(self, parent: str, kind: Any, epoch: int | None) -> dict[str, Any]:
        try:
            names = self._client.get_children(parent)
        except NoNodeError:
            return {}
        out: dict[str, Any] = {}
        for name in sorted(names):
            path = f"{parent}/{name}"
            got = self._read(path)
            if got is None:
                continue  # an ephemeral node that went away while listing
            record = kind.from_json(got[0], path)
            if record.id != name:
                raise RecordCorruptError(f"{path}: record names id {record.id!r}")
            if epoch is not None and record.epoch != epoch:
                raise RecordCorruptError(f"{path}: ack names epoch {record.epoch}")
            out[name] = record
        return out

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
        path = paths.retention_path(self._root, topic)

        def attempt() -> RetentionRecord | None:
            got = self._read(path)
            if got is None:
                return None
            record = RetentionRecord.from_json(got[0], path)
            if record.topic != topic:
                raise RecordCorruptError(f"{path}: RetentionRecord names topic {record.topic!r}")
            return record

        return self._run(f"read {path}", attempt)

    def set_retention(self, record: RetentionRecord) -> None:
        """Set the topic's consumed retention (idempotent; the topic must be adopted).

        Raises:
            NotAdoptedError: The topic is not adopted.
            StoreError: ZooKeeper is unreachable.
        """
        if self.get_topic(record.topic) is None:
            raise NotAdoptedError(
                f"topic {record.topic} is not adopted (adopt it first: ordered adopt "
                f"{record.topic})"
            )
        path = paths.retention_path(self._root, record.topic)
        self._run(f"write {path}", self._put, path, record.to_json())

    def clear_retention(self, topic: str) -> bool:
        """Turn the topic's consumed retention off; return whether it was on.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.retention_path(self._root, topic)
        return self._run(f"delete {path}", self._delete, path)

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

        def attempt() -> GroupSeenRecord | None:
            got = self._read(path)
            return None if got is None else GroupSeenRecord.from_json(got[0], path)

        return self._run(f"read {path}", attempt)

    def put_group_seen(self, record: GroupSeenRecord) -> None:
        """Create or overwrite a :class:`GroupSeenRecord`.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.group_seen_path(self._root, record.group, record.topic)
        self._run(f"write {path}", self._put, path, record.to_json())

    def _put(self, path: str, data: bytes) -> None:
        try:
            self._client.set(path, data)
        except NoNodeError:
            try:
                self._client.create(path, data, makepath=True)
            except NodeExistsError:
                self._client.set(path, data)

    def _delete(self, path: str) -> bool:
        try:
            self._client.delete(path)
        except NoNodeError:
            return False
        return True

    # --- watches and the lock ------------------------------------------------------

    def watch_topic(
        self,
        topic: str,
        callback: Callable[[TopicRecord | None], None],
        on_error: Callable[[StoreError], None] | None = None,
    ) -> Watch:
        """Call ``callback`` with the topic record now and on every change.

        A kazoo ``DataWatch``: the callback runs on kazoo's thread and must not block.
        ``None`` means not adopted (or deleted). A record that fails its check goes to
        ``on_error`` (default: logged) and the callback is not called for it.

        Returns:
            A :class:`Watch`; ``stop()`` ends it.
        """
        path = paths.topic_path(self._root, topic)
        handle = Watch()

        def on_data(data: bytes | None, _stat: Any, _event: Any = None) -> bool | None:
            if handle.stopped:
                return False
            if not data:
                callback(None)
                return None
            try:
                record = TopicRecord.from_json(data, path)
            except StoreError as exc:
                if on_error is not None:
                    on_error(exc)
                else:
                    _log.error("%s", exc)
                return None
            callback(record)
            return None

        self._run(f"watch {path}", self._client.DataWatch, path, on_data)
        return handle

    def watch_children(self, path: str, callback: Callable[[list[str]], None]) -> Watch:
        """Call ``callback`` with the children of ``path`` now and on every change.

        A kazoo ``ChildrenWatch``; ``path`` must exist. The callback runs on kazoo's
        thread and must not block.

        Returns:
            A :class:`Watch`; ``stop()`` ends it.
        """
        handle = Watch()

        def on_children(children: list[str]) -> bool | None:
            if handle.stopped:
                return False
            callback(list(children))
            return None

        self._run(f"watch {path}", self._client.ChildrenWatch, path, on_children)
        return handle

    def watch_producers(self, topic: str, callback: Callable[[list[str]], None]) -> Watch:
        """:meth:`watch_children` on the topic's producer registrations.

        Creates the (empty) ``producers`` node if missing, as registering does.
        """
        parent = paths.producers_path(self._root, topic)
        self._run(f"watch producers of {topic}", self._client.ensure_path, parent)
        return self.watch_children(paths.producers_path(self._root, topic), callback)

    def watch_acks(self, topic: str, epoch: int, callback: Callable[[list[str]], None]) -> Watch:
        """:meth:`watch_children` on the acks of ``epoch`` (which must be published)."""
        return self.watch_children(paths.acks_path(self._root, topic, epoch), callback)

    def lock(self, topic: str, identifier: str = "") -> Lock:
        """Return the topic's transition lock (a kazoo ``Lock``; not yet acquired)."""
        return self._client.Lock(paths.lock_path(self._root, topic), identifier)


def _same_adoption(a: TopicRecord, b: TopicRecord) -> bool:
    """Whether two topic records are the same adoption (``adopted_at`` aside)."""
    return a == replace(b, adopted_at=a.adopted_at)
