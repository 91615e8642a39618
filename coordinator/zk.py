"""The one place that makes ZooKeeper clients: bounded retries, prompt exit.

Every ``KazooClient`` of the project (the clients, the command line, the daemon, the
Spark source, benchmarks and tests) comes from :func:`make_client` and is started by
:func:`start_client`, so retry bounds and the connection error are the same everywhere.

Security lives here too: the client authenticates with the given
:class:`~coordinator.zk_auth.ZkAuth` (digest or SASL), every node it creates under
``acl_root`` gets the ACL that root's policy (``{root}/acl``, :mod:`coordinator.zk_acl`)
gives its path, and a refusal by ZooKeeper (NoAuth, or a session closed for want of
authentication) becomes a :class:`NoAuthError` naming the operation, the path and the
identity, never a password.

Why bounded: kazoo retries a command forever by default, and a watch callback that
reads through such a retry blocks kazoo's worker thread, ``KazooClient.stop()`` and so
interpreter exit, while ZooKeeper is away. A bounded ``command_retry`` makes every store
call fail with :class:`~coordinator.errors.StoreUnavailableError` instead.
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
from kazoo.handlers.threading import KazooTimeoutError

from coordinator.errors import RecordCorruptError, StoreAuthError, StoreUnavailableError
from coordinator.store.records import AclPolicyRecord
from coordinator.zk_acl import acl_for_new, policy_path
from coordinator.zk_auth import NO_AUTH, ZkAuth

__all__ = [
    "COMMAND_RETRY",
    "AuthClient",
    "PathNoAuthError",
    "close_client",
    "make_client",
    "start_client",
]

_log = logging.getLogger(__name__)

COMMAND_RETRY: dict[str, Any] = {"max_tries": 20, "delay": 0.05, "max_delay": 0.5, "deadline": 5.0}
"""Default retry bounds of one store command: at most 20 tries within 5 s."""

_CONNECTION_RETRY: dict[str, Any] = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}


class PathNoAuthError(NoAuthError):  # type: ignore[misc]
    """ZooKeeper refused an operation on a path (a kazoo ``NoAuthError`` with the path).

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
            if isinstance(result, _REFUSED) and not isinstance(result, PathNoAuthError):
                kind = type(op).__name__.lower().replace("setdata", "set")
                result = self.client.refused(kind, op.path, result, chrooted=True)
            out.append(result)
        return out


class AuthClient(KazooClient):  # type: ignore[misc]
    """A ``KazooClient`` that applies a root's ACL policy to what it creates.

    Made only by :func:`make_client`. Without ``acl_root`` (or while the root has no
    policy) nodes are created with kazoo's default (open) ACL, as before.
    """

    def __init__(self, *, auth: ZkAuth, acl_root: str | None, **kwargs: Any) -> None:
        super().__init__(**auth.kazoo_arguments(), **kwargs)
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
            _log.warning("cannot re-read the ACL policy at %s: %s", path, exc)
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
        """Return the :class:`PathNoAuthError` for ``exc`` raised by ``op`` on ``path``."""
        full = path if chrooted or not self.chroot else self.chroot + path
        reason = ""
        if isinstance(exc, SessionClosedRequireSaslError | AuthFailedError):
            reason = (
                "the server requires authentication; set ordered.zookeeper.auth"
                if not self.ordered_auth
                else "the server refused this client's authentication"
            )
        return PathNoAuthError(op, full, self.ordered_auth.principal, reason)

    def _checked(self, op: str, path: str, call: Callable[[], Any]) -> Any:
        try:
            return call()
        except PathNoAuthError:
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


def make_client(
    hosts: str,
    *,
    session_timeout_s: float = 10.0,
    command_deadline_s: float | None = None,
    reconnect: bool = True,
    client_id: tuple[int, bytes] | None = None,
    auth: ZkAuth | str | None = None,
    acl_root: str | None = None,
) -> AuthClient:
    """Create (not start) a ``KazooClient`` with the project's retry bounds.

    Args:
        hosts: The ZooKeeper connect string, optionally with a chroot.
        session_timeout_s: The requested session timeout in seconds.
        command_deadline_s: How long one store command may retry (default 5 s).
        reconnect: Keep reconnecting after the connection drops (clients and the
            daemon ride out outages); ``False`` gives up after a few tries.
        client_id: An existing session's ``(session id, password)`` to join (tests
            use it to expire a session the way ZooKeeper's own harness does).
        auth: ZooKeeper credentials (:class:`ZkAuth` or ``SCHEME:USER:PASSWORD``).
        acl_root: The store root whose ACL policy applies to the nodes this client
            creates; read when the client starts and kept current.

    Returns:
        The client, not yet started.

    Raises:
        ConfigError: ``auth`` is malformed (the message does not show it).
    """
    command = dict(COMMAND_RETRY)
    if command_deadline_s is not None:
        command["deadline"] = command_deadline_s
        command["max_tries"] = max(20, int(command_deadline_s * 4))
    connection = dict(_CONNECTION_RETRY)
    if not reconnect:
        connection["max_tries"] = 3
    # kazoo logs every refused connection; callers report one error instead.
    logging.getLogger("kazoo.client").setLevel(logging.CRITICAL)
    parsed = ZkAuth.parse(auth, "ZooKeeper auth") if auth is not None else NO_AUTH
    if parsed.scheme == "sasl":
        _install_quiet_hook()
    return AuthClient(
        auth=parsed,
        acl_root=acl_root,
        hosts=hosts,
        timeout=session_timeout_s,
        command_retry=command,
        connection_retry=connection,
        client_id=client_id,
    )


def start_client(client: KazooClient, timeout_s: float, what: str = "") -> KazooClient:
    """Start ``client`` within ``timeout_s`` or raise; a failed start is cleaned up.

    Args:
        client: A client from :func:`make_client`.
        timeout_s: How long to wait for the first connection.
        what: Where the connect string came from, for the message (for example
            ``"ordered.zookeeper.connect"``).

    Returns:
        ``client``, connected.

    Raises:
        StoreUnavailableError: No connection within ``timeout_s``.
    """
    try:
        client.start(timeout=timeout_s)
    except (KazooTimeoutError, OSError) as exc:
        close_client(client)
        source = f" ({what})" if what else ""
        hosts = ",".join(f"{host}:{port}" for host, port in client.hosts) + (client.chroot or "")
        raise StoreUnavailableError(
            f"cannot connect to ZooKeeper at {hosts}{source} within {timeout_s:g} s"
        ) from exc
    if isinstance(client, AuthClient):
        try:
            if client.ordered_auth.scheme == "sasl":
                _check_sasl(client)
            client.load_policy()
        except Exception:
            close_client(client)
            raise
    return client


def _check_sasl(client: AuthClient) -> None:
    """Fail at once when the server refused the SASL login (kazoo connects regardless)."""
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


def _install_quiet_hook() -> None:
    global _previous_excepthook
    if threading.excepthook is not _quiet_kazoo_auth_failure:
        _previous_excepthook = threading.excepthook
        threading.excepthook = _quiet_kazoo_auth_failure


def close_client(client: KazooClient) -> None:
    """Stop and close ``client``; never raises (for ``finally`` blocks and exit hooks)."""
    try:
        client.stop()
    except Exception:  # best effort on the way out
        logging.getLogger(__name__).debug("kazoo stop failed", exc_info=True)
    try:
        client.close()
    except Exception:  # best effort on the way out
        logging.getLogger(__name__).debug("kazoo close failed", exc_info=True)
