"""Acks that another identity cannot forge: each ack is proven by its producer's registration.

ZooKeeper keeps no creator on a znode, and an ACL can be set to anything by whoever
creates the node, so neither tells who wrote an ack. What only the producer can do
(under ``ordered acl apply``) is write its own registration node
``topics/{t}/producers/{id}``: it is created with the creator's ACL. So a producer acks
in one transaction that creates ``.../acks/{id}`` *and* writes its registration back
unchanged; the transaction gives both the same zxid. An ack counts when it is at least
as old as the registration's last write (``ack.czxid <= registration.mzxid``): the
registration was written, by its owner, when or after the ack appeared.

A node at ``acks/{id}`` that another identity created first is *forged*: the barrier
ignores it and it is reported (log, ``describe``) with the identities its ACL names.
The real producer's ack then finds the node taken and writes its registration alone,
which proves the existing node from then on: the barrier waits for the real producer.

An ack of a producer that is no longer registered can no longer be proven. Under an ACL
policy it counts only for a controller that saw it proven while the registration
lived; otherwise the barrier waits out that producer's expiry (its delivery timeout),
which is safe. In an open tree (no policy) it counts, as before.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import (
    BadVersionError,
    NodeExistsError,
    NoNodeError,
    RolledBackError,
    RuntimeInconsistency,
)
from kazoo.security import Permissions

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import paths
from coordinator.kernel.store.records import AckRecord

__all__ = ["AckCheck", "check_acks", "write_ack"]


@dataclass(frozen=True)
class AckCheck:
    """The acks of one epoch, sorted into proven and forged.

    Attributes:
        genuine: Producer id -> its ack (proven by its registration, or of a producer
            that is no longer registered).
        forged: Producer id -> the identities the forged ack node's ACL names as writers
            (``scheme:user``, never a password).
        unproven: Under an ACL policy, acks of producers no longer registered: no
            longer provable. A controller that saw one proven earlier counts it; any
            other waits out that producer's expiry, which is safe.
    """

    genuine: dict[str, AckRecord] = field(default_factory=dict)
    forged: dict[str, tuple[str, ...]] = field(default_factory=dict)
    unproven: dict[str, AckRecord] = field(default_factory=dict)


def write_ack(client: KazooClient, root: str, topic: str, record: AckRecord) -> None:
    """Create ``record``'s ack node and write its registration back in one transaction.

    Idempotent: an existing ack node (an earlier try, or a forged one) is proven by
    writing the registration alone. Runs inside the caller's retry.

    Raises:
        StoreError: The epoch was never published.
        NoAuthError: ZooKeeper refused (the caller maps it).
    """
    path = paths.ack_path(root, topic, record.epoch, record.id)
    reg = paths.producer_path(root, topic, record.id)
    for _ in range(5):
        try:
            data, stat = client.get(reg)
        except NoNodeError:
            data, stat = None, None
        try:
            if data is None or stat is None:
                client.create(path, record.to_json())
                return
            txn = client.transaction()
            txn.create(path, record.to_json())
            txn.set_data(reg, data, version=stat.version)
            results = txn.commit()
            # The operation that aborted the transaction; the others only rolled back.
            failure = next(
                (
                    r
                    for r in results
                    if isinstance(r, Exception)
                    and not isinstance(r, RolledBackError | RuntimeInconsistency)
                ),
                None,
            )
            if failure is not None:
                raise failure
            return
        except NodeExistsError:
            if data is None or stat is None:
                return
            try:
                client.set(reg, data, version=stat.version)
                return
            except (BadVersionError, NoNodeError):
                continue
        except BadVersionError:
            continue  # the registration changed meanwhile: read it again
        except NoNodeError:
            if client.exists(paths.acks_path(root, topic, record.epoch)) is None:
                raise StoreError(
                    f"{paths.acks_path(root, topic, record.epoch)}: epoch {record.epoch} of "
                    f"{topic} was never published"
                ) from None
            continue  # the registration went away meanwhile
    raise StoreError(f"{path}: the registration {reg} kept changing while acking")


def _writers(client: KazooClient, path: str) -> tuple[str, ...]:
    try:
        acls, _ = client.get_acls(path)
    except NoNodeError:
        return ()

    def names(selected: list[Any]) -> tuple[str, ...]:
        return tuple(sorted({f"{a.id.scheme}:{a.id.id.split(':', 1)[0]}" for a in selected}))

    writers = [a for a in acls if a.perms & Permissions.WRITE]
    # The creator's entry is the one without ADMIN (coordinators hold every permission).
    owners = [a for a in writers if not a.perms & Permissions.ADMIN]
    return names(owners or writers)


def check_acks(
    client: KazooClient, root: str, topic: str, epoch: int, only: set[str] | None = None
) -> AckCheck:
    """Read the acks of ``epoch`` and sort them into genuine and forged (see the module).

    Args:
        only: Judge only these acks (the barrier judges each new ack once: an ack
            node is written once and never changes).

    Raises:
        RecordCorruptError: An ack fails its schema check.
        KazooException: ZooKeeper failed (the caller's retry and mapping apply).
    """
    parent = paths.acks_path(root, topic, epoch)
    if only is not None:
        names = list(only)
    else:
        try:
            names = client.get_children(parent)
        except NoNodeError:
            return AckCheck()
    genuine: dict[str, AckRecord] = {}
    forged: dict[str, tuple[str, ...]] = {}
    unproven: dict[str, AckRecord] = {}
    # Every read is sent at once (kazoo's async calls), not one round trip after
    # another: 50 producers acking together made the seal wait ~0.3 s for 100 reads.
    # ZooKeeper answers one session's requests in order, so each registration is
    # still read after its ack, as the proof needs.
    names = sorted(names)
    policy = client.exists_async(paths.acl_policy_path(root))
    ack_reads = [client.get_async(f"{parent}/{name}") for name in names]
    reg_reads = [client.exists_async(paths.producer_path(root, topic, n)) for n in names]
    # Without a policy anyone may write anything: an ack of a producer gone since
    # counts, as it always did (a cleanly leaving producer's last ack).
    secured = policy.get() is not None
    for name, ack_read, reg_read in zip(names, ack_reads, reg_reads, strict=True):
        path = f"{parent}/{name}"
        try:
            data, ack_stat = ack_read.get()
        except NoNodeError:
            continue
        record = AckRecord.from_json(data, path)
        if record.id != name or record.epoch != epoch:
            forged[name] = _writers(client, path)
            continue
        reg_stat = reg_read.get()
        if reg_stat is None:
            (unproven if secured else genuine)[name] = record
        elif ack_stat.czxid <= reg_stat.mzxid:
            genuine[name] = record
        else:
            forged[name] = _writers(client, path)
    return AckCheck(genuine, forged, unproven)
