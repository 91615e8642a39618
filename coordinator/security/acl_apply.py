"""``ordered acl apply|show``: set and list the ACLs of a store root's tree.

:func:`apply_policy` writes the policy record (``{root}/acl``) that every client reads
for the nodes it creates, creates the nodes each role needs to exist (the root,
``topics``, ``groups``, each topic's ``producers``), and sets on every existing node the
ACL :func:`coordinator.kernel.zk_acl.acl_for_existing` gives it. It is idempotent (a second
run changes nothing) and ``dry_run`` only reports what it would do.

The identity that applies must keep its access: a coordinator identity, or a ZooKeeper
super user (the dev cluster's ``admin``).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, NoNodeError
from kazoo.security import ACL

from coordinator.kernel.store import paths
from coordinator.kernel.store.records import AclPolicyRecord
from coordinator.kernel.zk_acl import acl_for_existing, acl_for_new, acl_text, is_open, policy_path

__all__ = [
    "AclChange",
    "ApplyResult",
    "NodeAcl",
    "apply_policy",
    "change_dict",
    "read_policy",
    "show_acls",
    "tree_is_open",
]

Progress = Callable[[str], None]


@dataclass(frozen=True)
class AclChange:
    """One node whose ACL ``apply`` sets (or would set, or creates).

    Attributes:
        path: The znode path.
        before: Its ACL before (``scheme:id:perms``), empty for a created node.
        after: Its ACL after.
        note: Why, when not obvious (an open node's owners, a created node).
    """

    path: str
    before: tuple[str, ...]
    after: tuple[str, ...]
    note: str = ""


@dataclass(frozen=True)
class ApplyResult:
    """What :func:`apply_policy` did.

    Attributes:
        root: The store root.
        changes: The nodes created or whose ACL changed.
        unchanged: How many nodes already had their ACL.
        dry_run: Whether nothing was written.
    """

    root: str
    changes: tuple[AclChange, ...] = field(default_factory=tuple)
    unchanged: int = 0
    dry_run: bool = False


@dataclass(frozen=True)
class NodeAcl:
    """One node's ACL, as ``acl show`` lists it."""

    path: str
    acl: tuple[str, ...]
    open: bool


def _same(a: list[ACL] | tuple[ACL, ...], b: list[ACL] | tuple[ACL, ...]) -> bool:
    return sorted(acl_text(a)) == sorted(acl_text(b))


def _walk(client: KazooClient, root: str) -> Iterator[str]:
    stack = [root]
    while stack:
        path = stack.pop()
        try:
            children = client.get_children(path)
        except NoNodeError:
            continue
        yield path
        prefix = "" if path == "/" else path
        stack.extend(f"{prefix}/{child}" for child in sorted(children, reverse=True))


def read_policy(client: KazooClient, root: str) -> AclPolicyRecord | None:
    """Return the policy at ``{root}/acl``, or None when the tree has none."""
    path = policy_path(root)
    try:
        data, _ = client.get(path)
    except NoNodeError:
        return None
    return AclPolicyRecord.from_json(data, path) if data else None


def tree_is_open(client: KazooClient, root: str) -> bool:
    """Whether anyone may write the root (no policy applied, or an open root ACL)."""
    root = paths.check_root(root)
    try:
        acls, _ = client.get_acls(root)
    except NoNodeError:
        return True
    return read_policy(client, root) is None or is_open(acls)


def _required(client: KazooClient, root: str) -> list[str]:
    """The nodes that must exist so no role needs CREATE where it must not have it."""
    needed = [root, paths.topics_path(root), paths.groups_path(root)]
    # Consumers create their barrier nodes below these, but nothing directly under root.
    needed += [paths.barrier_topics_path(root), paths.barrier_members_path(root)]
    try:
        topics = client.get_children(paths.topics_path(root))
    except NoNodeError:
        topics = []
    needed += [paths.producers_path(root, t) for t in sorted(topics)]
    return needed


def apply_policy(
    client: KazooClient,
    root: str,
    policy: AclPolicyRecord,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> ApplyResult:
    """Apply ``policy`` to the tree under ``root`` (see the module).

    Raises:
        KazooException: ZooKeeper failed or refused (the caller maps it).
    """
    say = progress or (lambda _m: None)
    root = paths.check_root(root)
    changes: list[AclChange] = []
    for path in _required(client, root):
        if client.exists(path) is None:
            acl = acl_for_new(policy, root, path)
            changes.append(AclChange(path, (), tuple(acl_text(acl or [])), "created"))
            if not dry_run:
                with contextlib.suppress(NodeExistsError):
                    client.create(path, b"", acl=acl, makepath=True)
    ppath = policy_path(root)
    acl = acl_for_new(policy, root, ppath) or []
    current = read_policy(client, root) if client.exists(ppath) else None
    if current is None or current.to_dict() | {"applied_at": 0} != policy.to_dict() | {
        "applied_at": 0
    }:
        changes.append(AclChange(ppath, (), tuple(acl_text(acl)), "policy record written"))
        if not dry_run:
            try:
                client.create(ppath, policy.to_json(), acl=acl)
            except NodeExistsError:
                client.set(ppath, policy.to_json())
    unchanged = 0
    for count, path in enumerate(_walk(client, root), 1):
        if count % 500 == 0:
            say(f"{count} nodes checked")
        try:
            before, _ = client.get_acls(path)
        except NoNodeError:
            continue
        after, note = acl_for_existing(policy, root, path, before)
        if _same(before, after):
            unchanged += 1
            continue
        changes.append(AclChange(path, tuple(acl_text(before)), tuple(acl_text(after)), note))
        if not dry_run:
            try:
                client.set_acls(path, after)
            except NoNodeError:
                continue  # an ephemeral node that went away
    return ApplyResult(root, tuple(changes), unchanged, dry_run)


def show_acls(client: KazooClient, root: str) -> list[NodeAcl]:
    """Return every node under ``root`` with its ACL."""
    root = paths.check_root(root)
    out = []
    for path in _walk(client, root):
        try:
            acls, _ = client.get_acls(path)
        except NoNodeError:
            continue
        out.append(NodeAcl(path, tuple(acl_text(acls)), is_open(acls)))
    return out


def change_dict(change: AclChange) -> dict[str, Any]:
    """``change`` as a JSON-ready dict."""
    return {
        "path": change.path,
        "before": list(change.before),
        "after": list(change.after),
        "note": change.note,
    }
