"""``ordered acl apply|show|id``: ZooKeeper ACLs on the layout tree, by role.

``apply`` writes the roles' policy and sets every node's ACL (idempotent; ``--dry-run``
prints the changes only). ``show`` lists every node's ACL. ``id`` prints the ACL
identity of the credentials given (``--zookeeper-auth``, ``$ORDERED_ZOOKEEPER_AUTH`` or
``--command-config``), to pass to ``apply``.

Identities are ZooKeeper ACL ids (``digest:USER:HASH``, ``sasl:USER``) or ``@FILE``: the
identity of the ``ordered.zookeeper.auth`` in a properties file (its hash is computed
here; the password is not stored anywhere).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoAuthError

from coordinator.kernel.errors import StoreAuthError, StoreUnavailableError, UsageError
from coordinator.kernel.kafka_security import load_properties
from coordinator.kernel.store import DEFAULT_ROOT
from coordinator.kernel.store.records import AclPolicyRecord
from coordinator.kernel.zk import close_client, make_client, start_client
from coordinator.kernel.zk_acl import parse_identity
from coordinator.kernel.zk_auth import ZkAuth
from coordinator.security.acl_apply import ApplyResult, apply_policy, change_dict, show_acls
from ordered import devcluster
from ordered.cli.options import seconds
from ordered.cli.output import emit, progress
from ordered.cli.security import resolve_security, security_arguments

__all__ = ["add_parser", "resolve_identity"]

_ZOOKEEPER_ENV = "ORDERED_ZOOKEEPER_CONNECT"


def resolve_identity(text: str) -> str:
    """Return the ACL id ``text`` names: a ZooKeeper id, or ``@FILE``'s credentials.

    Raises:
        UsageError: Neither (the message never shows a password).
    """
    if text.startswith("@"):
        props = load_properties(Path(text[1:]))
        auth = ZkAuth.parse(props.get("ordered.zookeeper.auth"), f"{text[1:]}")
        if auth.identity is None:
            raise UsageError(f"{text[1:]} has no ordered.zookeeper.auth")
        scheme, ident = auth.identity
        return f"{scheme}:{ident}"
    try:
        return parse_identity(text)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``acl apply``, ``acl show`` and ``acl id`` on ``sub``."""
    acl = sub.add_parser("acl", help="ZooKeeper ACLs on the layout tree, by role")
    actions = acl.add_subparsers(dest="action", required=True, metavar="ACTION")

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--zookeeper", default=None, help="ZooKeeper connect string")
        p.add_argument("--root", default=DEFAULT_ROOT, help=f"store root (default {DEFAULT_ROOT})")
        p.add_argument("--connect-timeout", type=seconds, default=5.0, help="seconds to connect")
        security_arguments(p)
        p.add_argument("--json", action="store_true", help="print JSON")

    apply = actions.add_parser("apply", help="set the roles' ACLs on every node (idempotent)")
    common(apply)
    for flag, text in (
        ("--coordinator", "coordinator identities: every permission (required)"),
        ("--producers", "producer identities"),
        ("--consumers", "consumer identities"),
        ("--readers", "read-only identities (Spark, describe)"),
    ):
        apply.add_argument(flag, nargs="+", action="extend", default=[], metavar="ID", help=text)
    apply.add_argument(
        "--consumer-group",
        action="append",
        default=[],
        metavar="GROUP=ID",
        help="the consumer identity that owns GROUP (default: whoever creates it first)",
    )
    apply.add_argument("--dry-run", action="store_true", help="print the changes only")
    apply.set_defaults(func=_apply)

    show = actions.add_parser("show", help="list every node's ACL")
    common(show)
    show.set_defaults(func=_show)

    ident = actions.add_parser("id", help="print the ACL identity of the given credentials")
    common(ident)
    ident.set_defaults(func=_id)


@contextlib.contextmanager
def _connect(args: argparse.Namespace) -> Iterator[KazooClient]:
    security = resolve_security(args, uses_dev_cluster=not args.command_config)
    hosts = args.zookeeper or os.environ.get(_ZOOKEEPER_ENV) or security.zookeeper
    if not hosts:
        state = devcluster.load_state(devcluster.default_dir())
        hosts = state.zookeeper_connect if state else None
    if not hosts:
        raise UsageError(
            f"no ZooKeeper to talk to: pass --zookeeper, set ${_ZOOKEEPER_ENV}, or start "
            "the dev cluster (ordered cluster up)"
        )
    client = make_client(
        hosts,
        command_deadline_s=args.connect_timeout,
        auth=security.zookeeper_auth,
        tls=security.zookeeper_tls,
    )
    start_client(client, args.connect_timeout)  # the error says why, when TLS tells
    try:
        yield client
    except NoAuthError as exc:
        raise StoreAuthError(str(exc)) from None
    except KazooException as exc:
        raise StoreUnavailableError(f"ZooKeeper failed: {type(exc).__name__}: {exc}") from None
    finally:
        close_client(client)


def _policy(args: argparse.Namespace) -> AclPolicyRecord:
    if not args.coordinator:
        raise UsageError("--coordinator: at least one identity is needed")
    groups: dict[str, list[str]] = {}
    for item in args.consumer_group:
        group, sep, ident = item.partition("=")
        if not sep or not group or not ident:
            raise UsageError(f"--consumer-group: expected GROUP=ID, got {item!r}")
        groups.setdefault(group, []).append(resolve_identity(ident))
    consumers = [resolve_identity(i) for i in args.consumers]
    for owners in groups.values():
        consumers += [o for o in owners if o not in consumers]
    try:
        return AclPolicyRecord(
            coordinator=tuple(resolve_identity(i) for i in args.coordinator),
            producers=tuple(resolve_identity(i) for i in args.producers),
            consumers=tuple(consumers),
            readers=tuple(resolve_identity(i) for i in args.readers),
            groups={g: tuple(o) for g, o in groups.items()},
            applied_at=time.time(),
        )
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def _short(line: str) -> str:
    # digest:USER:HASH:perms -> digest:USER:perms (the hash says nothing to a reader)
    parts = line.split(":")
    return f"{parts[0]}:{parts[1]}:{parts[-1]}" if parts[0] == "digest" else line


def _apply_text(result: ApplyResult) -> str:
    verb = "would change" if result.dry_run else "changed"
    lines = [
        f"{result.root}: {verb} {len(result.changes)} node(s), {result.unchanged} already right"
    ]
    for change in result.changes:
        note = f"  ({change.note})" if change.note else ""
        lines.append(f"  {change.path}: {', '.join(_short(a) for a in change.after)}{note}")
    return "\n".join(lines)


def _apply(args: argparse.Namespace) -> int:
    policy = _policy(args)
    with _connect(args) as client:
        result = apply_policy(client, args.root, policy, args.dry_run, progress)
    payload: dict[str, Any] = {
        "root": result.root,
        "dry_run": result.dry_run,
        "changes": [change_dict(c) for c in result.changes],
        "unchanged": result.unchanged,
        "policy": policy.to_dict(),
    }
    emit(payload, _apply_text(result), args.json)
    return 0


def _show(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        nodes = show_acls(client, args.root)
    payload = {
        "root": args.root,
        "nodes": [{"path": n.path, "acl": list(n.acl), "open": n.open} for n in nodes],
    }
    lines = [
        f"{n.path}: {', '.join(_short(a) for a in n.acl)}" + ("  (OPEN)" if n.open else "")
        for n in nodes
    ]
    if not nodes:
        lines = [f"{args.root}: no such node"]
    emit(payload, "\n".join(lines), args.json)
    return 0


def _id(args: argparse.Namespace) -> int:
    security = resolve_security(args, uses_dev_cluster=not args.command_config)
    if security.zookeeper_auth.identity is None:
        raise UsageError(
            "no credentials: pass --zookeeper-auth, set $ORDERED_ZOOKEEPER_AUTH, or "
            "--command-config with ordered.zookeeper.auth"
        )
    scheme, ident = security.zookeeper_auth.identity
    emit({"identity": f"{scheme}:{ident}"}, f"{scheme}:{ident}", args.json)
    return 0
