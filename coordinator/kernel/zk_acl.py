"""Which ZooKeeper ACL each node of the tree gets, by role (``ordered acl apply``).

The roles of an :class:`~coordinator.kernel.store.records.AclPolicyRecord` (stored at
``{root}/acl``) and what they may do:

============  =======================================================================
coordinator   every permission on every node
producer      create its registration under ``topics/{t}/producers`` and its acks under
              ``topics/{t}/epochs/{e}/acks``; read (its registration ends with its
              session: removing it early would need DELETE on every registration)
consumer      create its group under ``groups``; write its group's subtree (interest,
              progress, registrations); create its consumer barrier nodes (member
              node, registrations, acks, rewind acks) under ``barrier``; read
reader        read
============  =======================================================================

A node a role creates for itself (a registration, an ack, a group's subtree) is owned
by the identity that created it: its ACL names that identity through ZooKeeper's
``auth`` scheme, which the server replaces by the creator's authenticated ids. Owners
get READ, WRITE, CREATE and DELETE but not ADMIN, so an owner cannot lock the
coordinator out of its node. A consumer group listed in the policy's ``groups`` is
owned by the identities listed there instead.

Nothing here talks to ZooKeeper: :func:`acl_for_new` is what the client factory
(:mod:`coordinator.kernel.zk`) gives every node it creates under a root with a policy, and
:func:`acl_for_existing` is what ``acl apply`` sets on a node that exists.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Sequence
from typing import Final

from kazoo.security import ACL, Id, Permissions

from coordinator.kernel.store import paths
from coordinator.kernel.store.records import AclPolicyRecord

__all__ = [
    "OWNER_PERMS",
    "NodeKind",
    "acl_for_existing",
    "acl_for_new",
    "acl_text",
    "classify",
    "is_open",
    "owners_of",
    "parse_identity",
    "policy_path",
]

OWNER_PERMS: Final = Permissions.READ | Permissions.WRITE | Permissions.CREATE | Permissions.DELETE
"""What the owner of a node gets: everything but ADMIN (changing the node's ACL)."""

_CREATOR: Final = Id("auth", "")
_SCHEMES: Final = ("digest", "sasl", "x509", "ip", "world")


class NodeKind(enum.Enum):
    """The kinds of node the ACL rules tell apart."""

    OTHER = "other"  # the root, topics, a topic and its epochs, retired, coordinator...
    PRODUCERS = "producers"  # topics/{t}/producers: producers create their registration
    REGISTRATION = "registration"  # topics/{t}/producers/{id}: owned by the producer
    ACKS = "acks"  # topics/{t}/epochs/{e}/acks: producers create their acks
    ACK = "ack"  # topics/{t}/epochs/{e}/acks/{id}: owned by the producer
    GROUPS = "groups"  # groups: consumers create their group
    GROUP = "group"  # groups/{g} and everything below: owned by the group's consumers
    BARRIER = "barrier"  # barrier/{topics/{t}/{consumers,acks,rewinds},members}: consumers create
    BARRIER_NODE = "barrier node"  # a consumer's own node below those: owned by the consumer


def policy_path(root: str) -> str:
    """``{root}/acl``: the :class:`AclPolicyRecord`."""
    return paths.acl_policy_path(root)


def parse_identity(text: str) -> str:
    """Check a ZooKeeper ACL id (``digest:USER:HASH``, ``sasl:USER``...); return it.

    Raises:
        ValueError: Not ``SCHEME:ID`` with a known scheme, or a digest id without a hash.
    """
    scheme, _, ident = text.strip().partition(":")
    if scheme not in _SCHEMES or not ident:
        raise ValueError(
            f"not a ZooKeeper identity: {text!r} (expected digest:USER:HASH or sasl:USER)"
        )
    if scheme == "digest":
        user, _, digest = ident.partition(":")
        if not user or len(digest) != 28 or not digest.endswith("="):
            raise ValueError(
                f"not a digest identity: {text!r} (expected digest:USER:BASE64-SHA1, as "
                "`ordered acl id` prints it)"
            )
    return f"{scheme}:{ident}"


def _id(identity: str) -> Id:
    scheme, _, ident = identity.partition(":")
    return Id(scheme, ident)


def _name(acl_id: Id) -> str:
    return f"{acl_id.scheme}:{acl_id.id}"


def classify(root: str, path: str) -> tuple[NodeKind, str | None] | None:
    """Return the kind of ``path`` under ``root`` and its group node name, or None if outside.

    Args:
        root: The store root.
        path: A znode path, in the same chroot as ``root``.
    """
    base = paths.check_root(root)
    prefix = "" if base == "/" else base
    if path != base and not path.startswith(prefix + "/"):
        return None
    parts = [p for p in path[len(prefix) :].split("/") if p]
    if len(parts) >= 2 and parts[0] == "groups":
        return NodeKind.GROUP, parts[1]
    if parts == ["groups"]:
        return NodeKind.GROUPS, None
    if len(parts) >= 3 and parts[0] == "topics" and parts[2] == "producers":
        if len(parts) == 3:
            return NodeKind.PRODUCERS, None
        if len(parts) == 4:
            return NodeKind.REGISTRATION, None
    if parts and parts[0] == "barrier":
        return _barrier_kind(parts), None
    if len(parts) >= 5 and parts[0] == "topics" and parts[2] == "epochs" and parts[4] == "acks":
        if len(parts) == 5:
            return NodeKind.ACKS, None
        if len(parts) == 6:
            return NodeKind.ACK, None
    return NodeKind.OTHER, None


_BARRIER_DIRS: Final = frozenset({"consumers", "acks", "rewinds"})


def _barrier_kind(parts: list[str]) -> NodeKind:
    """``barrier`` and below: the containers consumers create in, and their own nodes.

    A topic's ``announcement`` is the coordinator's (``OTHER``). Consumers get CREATE on
    the containers but not DELETE: with DELETE one consumer could remove another's
    registration, and a controller would then publish without waiting for it.
    """
    if len(parts) <= 2 and parts[1:] in ([], ["topics"], ["members"]):
        return NodeKind.BARRIER
    if len(parts) == 3 and parts[1] == "members":
        return NodeKind.BARRIER_NODE
    if len(parts) >= 3 and parts[1] == "topics":
        if len(parts) == 3 or (len(parts) == 4 and parts[3] in _BARRIER_DIRS):
            return NodeKind.BARRIER
        if len(parts) == 5 and parts[3] in _BARRIER_DIRS:
            return NodeKind.BARRIER_NODE
    return NodeKind.OTHER


def _everyone(policy: AclPolicyRecord) -> list[str]:
    seen: dict[str, None] = {}
    for ident in (*policy.coordinator, *policy.producers, *policy.consumers, *policy.readers):
        seen.setdefault(ident, None)
    return list(seen)


def _base(policy: AclPolicyRecord, grants: dict[str, int]) -> list[ACL]:
    """Coordinator ALL, ``grants`` (identity -> perms) on top of READ for everyone listed."""
    perms: dict[str, int] = {ident: Permissions.READ for ident in _everyone(policy)}
    for ident, extra in grants.items():
        perms[ident] = perms.get(ident, 0) | extra
    for ident in policy.coordinator:
        perms[ident] = Permissions.ALL
    return [ACL(p, _id(ident)) for ident, p in perms.items()]


def _group_owners(policy: AclPolicyRecord, group: str | None) -> tuple[str, ...]:
    if group is None:
        return ()
    return policy.groups.get(group, ())


def _under_seen(root: str, path: str) -> bool:
    base = paths.check_root(root)
    parts = [p for p in path[len("" if base == "/" else base) :].split("/") if p]
    return len(parts) >= 3 and parts[2] == "seen"


def acl_for_new(
    policy: AclPolicyRecord, root: str, path: str, creator: str | None = None
) -> list[ACL] | None:
    """Return the ACL a node created at ``path`` gets, or None outside ``root``.

    Owned kinds name the creator through the ``auth`` scheme (the server fills in the
    creating session's ids); a listed group's owners are named instead. A coordinator
    (``creator``) that creates part of a group nobody listed (the daemon's relayed
    progress, a group seen with plain commits first) shares it with every consumer
    identity, so the group's consumer can still write it; only ``seen`` records,
    which decide when a group is stale, stay the coordinator's.
    """
    found = classify(root, path)
    if found is None:
        return None
    kind, group = found
    if kind is NodeKind.PRODUCERS:
        # No DELETE: it would let one producer remove another's registration. A
        # producer's own registration goes with its session.
        return _base(policy, dict.fromkeys(policy.producers, Permissions.CREATE))
    if kind is NodeKind.ACKS:
        return _base(policy, dict.fromkeys(policy.producers, Permissions.CREATE))
    if kind in (NodeKind.GROUPS, NodeKind.BARRIER):
        return _base(policy, dict.fromkeys(policy.consumers, Permissions.CREATE))
    if kind is NodeKind.GROUP:
        owners = _group_owners(policy, group)
        if owners:
            return _base(policy, dict.fromkeys(owners, OWNER_PERMS))
        if creator in policy.coordinator:
            if _under_seen(root, path):
                return _base(policy, {})
            return _base(policy, dict.fromkeys(policy.consumers, OWNER_PERMS))
        return [*_base(policy, {}), ACL(OWNER_PERMS, _CREATOR)]
    if kind in (NodeKind.REGISTRATION, NodeKind.ACK, NodeKind.BARRIER_NODE):
        return [*_base(policy, {}), ACL(OWNER_PERMS, _CREATOR)]
    return _base(policy, {})


def owners_of(policy: AclPolicyRecord, acls: Iterable[ACL]) -> list[str]:
    """Identities other than the coordinator's that may write a node, from its ACL."""
    out = []
    for acl in acls:
        name = _name(acl.id)
        if acl.id.scheme == "world" or name in policy.coordinator:
            continue
        if acl.perms & Permissions.WRITE and name not in out:
            out.append(name)
    return out


def is_open(acls: Sequence[ACL]) -> bool:
    """Whether ``acls`` let anyone write (``world:anyone`` with WRITE, CREATE or DELETE)."""
    writes = Permissions.WRITE | Permissions.CREATE | Permissions.DELETE
    return any(a.id.scheme == "world" and a.perms & writes for a in acls)


def acl_for_existing(
    policy: AclPolicyRecord, root: str, path: str, current: Sequence[ACL]
) -> tuple[list[ACL], str]:
    """Return the ACL ``acl apply`` sets on an existing node, and a note on its owner.

    Owned nodes keep their owners (the identities other than the coordinator's that
    may write them now); a listed group's owners replace them; an open group node
    (written before any ACL) is shared by every consumer identity, and an open
    registration or ack has no owner (that producer re-registers to own one).
    """
    found = classify(root, path)
    if found is None:
        raise ValueError(f"{path} is not under {root}")
    kind, group = found
    if kind is NodeKind.GROUP and _under_seen(root, path):
        return _base(policy, {}), ""  # the daemon's: when a group is stale
    if kind not in (NodeKind.GROUP, NodeKind.REGISTRATION, NodeKind.ACK, NodeKind.BARRIER_NODE):
        acl = acl_for_new(policy, root, path)
        assert acl is not None  # classify() found it under the root
        return acl, ""
    listed = _group_owners(policy, group)
    current_owners = [] if is_open(current) else owners_of(policy, current)
    note = ""
    if listed:
        owners = list(listed)
    elif current_owners:
        owners = current_owners
    elif kind is NodeKind.GROUP:
        owners = list(policy.consumers)
        note = "open before: shared by every consumer identity"
    else:
        owners = []
        who = "consumer" if kind is NodeKind.BARRIER_NODE else "producer"
        note = f"open before: no owner (the {who} must register again)"
    return _base(policy, dict.fromkeys(owners, OWNER_PERMS)), note


def acl_text(acls: Iterable[ACL]) -> list[str]:
    """``scheme:id:perms`` lines, as ``zkCli getAcl`` shows them (``cdrwa`` letters)."""
    letters = (
        (Permissions.CREATE, "c"),
        (Permissions.DELETE, "d"),
        (Permissions.READ, "r"),
        (Permissions.WRITE, "w"),
        (Permissions.ADMIN, "a"),
    )
    return [
        f"{_name(a.id)}:{''.join(ch for bit, ch in letters if a.perms & bit)}"
        for a in sorted(acls, key=lambda a: (_name(a.id), a.perms))
    ]
