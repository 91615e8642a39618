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
from collections.abc import Callable
from dataclasses import replace
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    KazooException,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.recipe.lock import Lock

from coordinator.errors import (
    LayoutError,
    RecordCorruptError,
    StoreError,
    StoreUnavailableError,
    TransitionInProgressError,
)
from coordinator.store import paths
from coordinator.store.records import AckRecord, EpochRecord, ProducerRecord, TopicRecord

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

    def create_topic(self, record: TopicRecord, epoch0: EpochRecord) -> None:
        """Adopt a topic: write its record and epoch 0 in one transaction.

        Idempotent: if the topic is already adopted with the same record (ignoring
        ``adopted_at``) this does nothing.

        Raises:
            LayoutError: The topic is already adopted with another record.
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        topic = record.topic
        if epoch0.topic != topic or epoch0.epoch != 0:
            raise ValueError("epoch0 must be epoch 0 of the same topic")
        tpath = paths.topic_path(self._root, topic)
        epochs = paths.epochs_path(self._root, topic)
        e0 = paths.epoch_path(self._root, topic, 0)

        def attempt() -> None:
            self._client.ensure_path(paths.topics_path(self._root))
            existing, version = self._get_topic(topic)
            if existing is not None:
                if _same_adoption(existing, record):
                    return
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
            txn.create(e0, epoch0.to_json())
            txn.create(paths.acks_path(self._root, topic, 0), b"")
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
                    f"{e0}: an epoch-0 node exists but {tpath} holds no topic record"
                ) from None

        self._run(f"adopt topic {topic}", attempt)

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
        path = paths.ack_path(self._root, topic, epoch, record.id)

        def attempt() -> None:
            try:
                self._client.create(path, record.to_json())
            except NodeExistsError:
                pass
            except NoNodeError:
                raise StoreError(
                    f"{paths.acks_path(self._root, topic, epoch)}: epoch {epoch} of {topic} "
                    "was never published"
                ) from None

        self._run(f"ack epoch {epoch} of {topic}", attempt)

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
