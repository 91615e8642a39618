"""The ZooKeeper client of the project: authenticated, ACL-aware, refusals with a path.

:func:`coordinator.kernel.zk.make_client` makes every client as an :class:`AuthClient`:

- it authenticates with the given :class:`~coordinator.kernel.zk_auth.ZkAuth` (digest or SASL),
  over TLS when given a :class:`~coordinator.kernel.zk_tls.ZkTls` that enables it;
- every node it creates under ``acl_root`` gets the ACL that root's policy
  (``{root}/acl``, :mod:`coordinator.kernel.zk_acl`) gives its path; the policy is read when
  the client starts and followed with a watch that never blocks kazoo's thread;
- a refusal by ZooKeeper (NoAuth, or a session closed for want of authentication)
  becomes a :class:`_PathNoAuthError` naming the operation, the path and the identity,
  never a password.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from typing import Any

from kazoo.client import KazooClient, TransactionRequest
from kazoo.exceptions import (
    AuthFailedError,
    ConnectionClosedError,
    KazooException,
    NoAuthError,
    NoNodeError,
    SessionClosedRequireSaslError,
    SessionExpiredError,
)
from kazoo.protocol.serialization import Auth
from kazoo.protocol.states import KeeperState

from coordinator.kernel.errors import RecordCorruptError, StoreAuthError
from coordinator.kernel.store.records import AclPolicyRecord
from coordinator.kernel.zk_acl import acl_for_new, policy_path
from coordinator.kernel.zk_auth import ZkAuth
from coordinator.kernel.zk_tls import NO_TLS, ZkTls

__all__ = ["AuthClient", "check_sasl", "install_quiet_hook"]

_log = logging.getLogger(__name__)


class _PathNoAuthError(NoAuthError):  # type: ignore[misc]
    """ZooKeeper refused an operation on a path: a kazoo ``NoAuthError`` naming the path.

    Raised as kazoo's own ``NoAuthError`` (callers catch that); the store turns it into
    :class:`~coordinator.kernel.errors.StoreAuthError`.

    Attributes:
        op: The operation (``create``, ``set``, ``delete``, ``read``...).
        path: The znode path (chroot included).
        principal: Who asked (``digest:USER``, ``anonymous``), never a password.
    """

    def __init__(self, op: str, path: str, principal: str, reason: str = "") -> None:
        why = reason or "this identity lacks the permission"
        super().__init__(f"NoAuth: ZooKeeper refused to {op} {path} as {principal} ({why})")
        self.op = op
        self.path = path
        self.principal = principal


_REFUSED = (NoAuthError, SessionClosedRequireSaslError, AuthFailedError)


class _Transaction(TransactionRequest):  # type: ignore[misc]
    """A transaction whose creates get the policy's ACL and whose NoAuth names the path."""

    def create(self, path: str, value: bytes = b"", acl: Any = None, **kwargs: Any) -> None:
        if acl is None:
            acl = self.client.policy_acl(path)
        super().create(path, value, acl=acl, **kwargs)

    def commit(self) -> list[Any]:
        results: list[Any] = super().commit()
        out = []
        for op, result in zip(self.operations, results, strict=False):
            if isinstance(result, _REFUSED) and not isinstance(result, _PathNoAuthError):
                kind = type(op).__name__.lower().replace("setdata", "set")
                result = self.client.refused(kind, op.path, result, chrooted=True)
            out.append(result)
        return out


class _RedactAuth(logging.Filter):
    """Hide the credentials of kazoo's Auth packets in its DEBUG log lines."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args
        if isinstance(args, tuple) and any(isinstance(a, Auth) for a in args):
            record.args = tuple(
                f"Auth(scheme={a.scheme!r}, auth='***')" if isinstance(a, Auth) else a for a in args
            )
        return True


_REDACT = _RedactAuth()


def _install_redaction(logger: logging.Logger) -> None:
    if _REDACT not in logger.filters:
        logger.addFilter(_REDACT)


class AuthClient(KazooClient):  # type: ignore[misc]
    """A ``KazooClient`` that applies a root's ACL policy to what it creates.

    Made only by :func:`make_client`. Without ``acl_root`` (or while the root has no
    policy) nodes are created with kazoo's default (open) ACL, as before.
    """

    def __init__(
        self, *, auth: ZkAuth, acl_root: str | None, tls: ZkTls = NO_TLS, **kwargs: Any
    ) -> None:
        super().__init__(**auth.kazoo_arguments(), **tls.kazoo_arguments(), **kwargs)
        self.ordered_tls = tls
        if auth:
            # kazoo logs every request it sends at DEBUG, the Auth packet included.
            _install_redaction(self.logger)
        self.ordered_auth = auth
        self.acl_root = acl_root
        self._policy: AclPolicyRecord | None = None
        self._policy_lock = threading.Lock()

    def __repr__(self) -> str:
        return f"AuthClient(hosts={self.hosts!r}, auth={self.ordered_auth})"

    # --- the policy --------------------------------------------------------------

    @property
    def policy(self) -> AclPolicyRecord | None:
        """The ACL policy of ``acl_root`` as last read, or None (an open tree)."""
        with self._policy_lock:
            return self._policy

    def policy_acl(self, path: str) -> Any:
        """The ACL a node created at ``path`` gets (None: kazoo's default)."""
        policy = self.policy
        if policy is None or self.acl_root is None:
            return None
        ident = self.ordered_auth.identity
        creator = f"{ident[0]}:{ident[1]}" if ident else None
        return acl_for_new(policy, self.acl_root, path, creator)

    def load_policy(self) -> None:
        """Read the policy now and keep it current with a watch (never blocks on it)."""
        if self.acl_root is None:
            return
        path = policy_path(self.acl_root)
        try:
            data, _ = self.get(path, watch=self._on_policy_event)
        except NoNodeError:
            self.exists(path, watch=self._on_policy_event)
            data = None
        except _REFUSED as exc:
            _log.warning("cannot read the ACL policy at %s: %s", path, exc)
            return
        self._set_policy(data, path)

    def _on_policy_event(self, _event: Any) -> None:
        # kazoo's thread: re-read asynchronously, which also re-arms the watch.
        if self.acl_root is None:
            return
        path = policy_path(self.acl_root)
        self.get_async(path, watch=self._on_policy_event).rawlink(
            lambda result: self._on_policy_read(result, path)
        )

    def _on_policy_read(self, result: Any, path: str) -> None:
        try:
            data, _ = result.get()
        except NoNodeError:
            self.exists_async(path, watch=self._on_policy_event)
            self._set_policy(None, path)
            return
        except (ConnectionClosedError, SessionExpiredError):
            return  # the client is closing: nothing to follow any more
        except Exception as exc:  # a watch callback must not raise
            if self.client_state == KeeperState.CLOSED:
                # stop() fails the pending read with ConnectionLoss: the client is
                # closing, not losing the policy (and logging may already be shut).
                return
            _log.warning(
                "cannot re-read the ACL policy at %s: %s", path, str(exc) or type(exc).__name__
            )
            return
        self._set_policy(data, path)

    def _set_policy(self, data: bytes | None, path: str) -> None:
        policy = None
        if data:
            try:
                policy = AclPolicyRecord.from_json(data, path)
            except RecordCorruptError as exc:
                _log.warning("ignoring the ACL policy: %s", exc)
        with self._policy_lock:
            self._policy = policy

    # --- errors that name the path -----------------------------------------------

    def refused(self, op: str, path: str, exc: BaseException, chrooted: bool = False) -> Exception:
        """Return the :class:`_PathNoAuthError` for ``exc`` raised by ``op`` on ``path``."""
        full = path if chrooted or not self.chroot else self.chroot + path
        reason = ""
        if isinstance(exc, SessionClosedRequireSaslError | AuthFailedError):
            reason = (
                "the server requires authentication; set ordered.zookeeper.auth"
                if not self.ordered_auth
                else "the server refused this client's authentication"
            )
        return _PathNoAuthError(op, full, self.ordered_auth.principal, reason)

    def _checked(self, op: str, path: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except _PathNoAuthError:
            raise
        except _REFUSED as exc:
            raise self.refused(op, path, exc) from None

    def create(self, path: str, value: bytes = b"", acl: Any = None, **kw: Any) -> Any:
        """``KazooClient.create``, with the policy's ACL and a NoAuth naming the path."""
        return self._checked(
            "create", path, lambda: super(AuthClient, self).create(path, value, acl, **kw)
        )

    def create_async(self, path: str, value: bytes = b"", acl: Any = None, **kw: Any) -> Any:
        """``KazooClient.create_async`` with the policy's ACL."""
        if acl is None:
            acl = self.policy_acl(path)
        return super().create_async(path, value, acl, **kw)

    def ensure_path_async(self, path: str, acl: Any = None) -> Any:
        """``KazooClient.ensure_path_async``; under a policy each node gets its own ACL.

        kazoo passes a created node's ACL on to the parents that ``makepath`` creates;
        under a policy a parent (``groups``, a topic's ``producers``) has its own.
        """
        if self.policy_acl(path) is not None:
            acl = None
        return super().ensure_path_async(path, acl)

    def ensure_path(self, path: str, acl: Any = None) -> Any:
        """``KazooClient.ensure_path``; a NoAuth names the path."""
        return self._checked("create", path, lambda: super(AuthClient, self).ensure_path(path, acl))

    def set(self, path: str, value: bytes, version: int = -1) -> Any:
        """``KazooClient.set``; a NoAuth names the path."""
        return self._checked("set", path, lambda: super(AuthClient, self).set(path, value, version))

    def delete(self, path: str, version: int = -1, recursive: bool = False) -> Any:
        """``KazooClient.delete``; a NoAuth names the path."""
        return self._checked(
            "delete", path, lambda: super(AuthClient, self).delete(path, version, recursive)
        )

    def get(self, path: str, watch: Any = None) -> Any:
        """``KazooClient.get``; a NoAuth names the path."""
        return self._checked("read", path, lambda: super(AuthClient, self).get(path, watch))

    def get_children(self, path: str, *args: Any, **kw: Any) -> Any:
        """``KazooClient.get_children``; a NoAuth names the path."""
        return self._checked(
            "list", path, lambda: super(AuthClient, self).get_children(path, *args, **kw)
        )

    def exists(self, path: str, watch: Any = None) -> Any:
        """``KazooClient.exists``; a refusal names the path."""
        return self._checked("read", path, lambda: super(AuthClient, self).exists(path, watch))

    def set_acls(self, path: str, acls: Any, version: int = -1) -> Any:
        """``KazooClient.set_acls``; a NoAuth names the path."""
        return self._checked(
            "set the ACL of", path, lambda: super(AuthClient, self).set_acls(path, acls, version)
        )

    def transaction(self) -> _Transaction:
        """A transaction whose creates get the policy's ACL."""
        return _Transaction(self)


def check_sasl(client: AuthClient) -> None:
    """Raise :class:`StoreAuthError` now if the server refused the SASL login.

    kazoo reports a connection even then; the first request fails.
    """
    try:
        client.exists("/")
    except KazooException as exc:
        raise StoreAuthError(
            f"ZooKeeper refused the SASL authentication of {client.ordered_auth.principal} "
            f"({type(exc).__name__}): check the user and password"
        ) from None


def _quiet_kazoo_auth_failure(args: threading.ExceptHookArgs) -> None:
    # kazoo's connection thread dies with an unhandled error when the server refuses a
    # SASL login; the client reports that refusal itself, without a traceback.
    if isinstance(args.exc_value, _REFUSED) and "zk_loop" in str(args.thread):
        _log.debug("kazoo's connection thread stopped: %r", args.exc_value)
        return
    _previous_excepthook(args)


_previous_excepthook = threading.excepthook


def install_quiet_hook() -> None:
    """Keep kazoo's connection thread from printing a traceback on a refused SASL login."""
    global _previous_excepthook
    if threading.excepthook is not _quiet_kazoo_auth_failure:
        _previous_excepthook = threading.excepthook
        threading.excepthook = _quiet_kazoo_auth_failure
