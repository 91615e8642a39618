"""Producers, their registrations and their acks of epochs (the barrier's inputs)."""

from __future__ import annotations

import contextlib
from typing import Any, Final

from kazoo.exceptions import (
    NoAuthError,
    NodeExistsError,
    NoNodeError,
)

from coordinator.kernel.errors import (
    RecordCorruptError,
    StoreError,
)
from coordinator.kernel.store import ack_proof, paths
from coordinator.kernel.store.base import StoreBase
from coordinator.kernel.store.records import (
    AckRecord,
    ProducerRecord,
)

__all__ = ["DEFAULT_DELIVERY_TIMEOUT_MS", "ProducerStore"]

DEFAULT_DELIVERY_TIMEOUT_MS: Final = 60_000
"""The ordered producer's default ``delivery.timeout.ms``: 60 s instead of librdkafka's 5 min.

It bounds how long a record may still reach the broker, and so how long the barrier of
an expansion or shrink must wait for a producer that *crashed* (its registration is gone
but its last records might still arrive): at most the ZooKeeper session timeout (10 s)
plus this plus :data:`coordinator.control.transition.EXPIRY_GRACE_S`. A producer that exits
cleanly (``close()``, ``with``, or a normal interpreter exit) acks and unregisters and
costs nothing. 60 s leaves room for a request timeout (30 s) and a retry, so a short
broker outage still loses nothing; set ``delivery.timeout.ms`` to trade one for the
other. Defined here, once, beside the registrations that declare it;
``ordered.producer_config`` applies it (``coordinator.control.transition`` and
``coordinator.control.controller`` re-export it).
"""


class ProducerStore(StoreBase):
    """Producer registrations and acks (part of :class:`~coordinator.kernel.store.LayoutStore`)."""

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
            # NoAuth: under ACLs a producer may not delete registrations (it could
            # delete another's); its own ephemeral node ends with its session.
            with contextlib.suppress(NoNodeError, NoAuthError):
                self._client.delete(path)

        self._run(f"unregister producer {producer_id} of {topic}", attempt)

    def producers(self, topic: str) -> dict[str, ProducerRecord]:
        """Return the registered producers of ``topic`` by id.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        parent = paths.producers_path(self._root, topic)
        return self._run(f"list producers of {topic}", self._children, parent, ProducerRecord, None)

    def producer_ids(self, topic: str) -> set[str]:
        """Return the ids of the registered producers of ``topic`` (names only: one read).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        parent = paths.producers_path(self._root, topic)
        return self._run(f"list producers of {topic}", self._child_names, parent)

    def ack_ids(self, topic: str, epoch: int) -> set[str]:
        """Return the ids of the producers that acked ``epoch`` (names only: one read).

        The barrier polls this on every change: reading each ack's record there made
        a barrier of N producers cost N^2 reads.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        parent = paths.acks_path(self._root, topic, epoch)
        return self._run(f"list acks of epoch {epoch} of {topic}", self._child_names, parent)

    def _child_names(self, parent: str) -> set[str]:
        try:
            return set(self._client.get_children(parent))
        except NoNodeError:
            return set()

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
        # Every request at once (kazoo's async calls): one round trip, not one per producer.
        reads = [(name, self._client.exists_async(f"{parent}/{name}")) for name in names]
        out = {}
        for name, read in reads:
            stat = read.get()
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
        # (coordinator.kernel.store.ack_proof): another identity cannot forge it.
        self._run(
            f"ack epoch {epoch} of {topic}",
            ack_proof.write_ack,
            self._client,
            self._root,
            topic,
            record,
        )

    def verified_acks(
        self, topic: str, epoch: int, only: set[str] | None = None
    ) -> ack_proof.AckCheck:
        """Return the acks of ``epoch`` (or just those named in ``only``), proven ones and
        forged ones apart.

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
            only,
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
        # Every read at once (kazoo's async calls): a barrier of 50 producers read their
        # registrations one round trip after another, before and after the publish.
        reads = [(name, self._client.get_async(f"{parent}/{name}")) for name in sorted(names)]
        out: dict[str, Any] = {}
        for name, read in reads:
            path = f"{parent}/{name}"
            try:
                data, _stat = read.get()
            except NoNodeError:
                continue  # an ephemeral node that went away while listing
            record = kind.from_json(data, path)
            if record.id != name:
                raise RecordCorruptError(f"{path}: record names id {record.id!r}")
            if epoch is not None and record.epoch != epoch:
                raise RecordCorruptError(f"{path}: ack names epoch {record.epoch}")
            out[name] = record
        return out
