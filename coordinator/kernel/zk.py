"""The one place that makes ZooKeeper clients: bounded retries, prompt exit.

Every ``KazooClient`` of the project (the clients, the command line, the daemon, the
Spark source, benchmarks and tests) comes from :func:`make_client` and is started by
:func:`start_client`, so retry bounds and the connection error are the same everywhere.

Why bounded: kazoo retries a command forever by default, and a watch callback that
reads through such a retry blocks kazoo's worker thread, ``KazooClient.stop()`` and so
interpreter exit, while ZooKeeper is away. A bounded ``command_retry`` makes every store
call fail with :class:`~coordinator.kernel.errors.StoreUnavailableError` instead.

Security: every client is a :class:`~coordinator.kernel.zk_client.AuthClient`: it
authenticates with the given credentials (digest or SASL), gives the nodes it creates
under ``acl_root`` the ACL of that root's policy, and names the path and the identity
when ZooKeeper refuses (see :mod:`coordinator.kernel.zk_client`).

Lifecycle, shared by both clients: :func:`close_client_within` closes a client in a
bounded time (kazoo's ``stop()`` joins its threads, which a stuck retry can hold), and
:func:`exit_hook` ends a client's work at interpreter exit without keeping it alive.

Logging: kazoo logs through the ``kazoo.client`` logger (every refused connection, at
warning level); this module leaves it to the application. The ``ordered`` command
turns it down; an application that wants the same sets
``logging.getLogger("kazoo.client").setLevel(logging.CRITICAL)``.
"""

from __future__ import annotations

import atexit
import contextlib
import logging
import threading
import weakref
from collections.abc import Callable
from typing import Any, TypeVar

from kazoo.client import KazooClient
from kazoo.handlers.threading import KazooTimeoutError

from coordinator.kernel.errors import StoreUnavailableError
from coordinator.kernel.zk_auth import NO_AUTH, ZkAuth
from coordinator.kernel.zk_client import AuthClient, check_sasl, install_quiet_hook
from coordinator.kernel.zk_tls import NO_TLS, ZkTls, diagnose

__all__ = [
    "COMMAND_RETRY",
    "KAZOO_LOGGER",
    "close_client",
    "close_client_within",
    "exit_hook",
    "expire_session",
    "make_client",
    "run_bounded",
    "start_client",
]

KAZOO_LOGGER = "kazoo.client"
"""The name of kazoo's logger (left to the application; see the module doc)."""

_T = TypeVar("_T")

COMMAND_RETRY: dict[str, Any] = {"max_tries": 20, "delay": 0.05, "max_delay": 0.5, "deadline": 5.0}
"""Default retry bounds of one store command: at most 20 tries within 5 s."""

_CONNECTION_RETRY: dict[str, Any] = {"max_tries": -1, "delay": 0.1, "max_delay": 1.0}


def make_client(
    hosts: str,
    *,
    session_timeout_s: float = 10.0,
    command_deadline_s: float | None = None,
    reconnect: bool = True,
    client_id: tuple[int, bytes] | None = None,
    auth: ZkAuth | str | None = None,
    acl_root: str | None = None,
    tls: ZkTls | None = None,
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
        tls: Reach ZooKeeper over TLS (:class:`~coordinator.kernel.zk_tls.ZkTls`, the
            ``ordered.zookeeper.ssl.*`` settings); default plain.

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
    parsed = ZkAuth.parse(auth, "ZooKeeper auth") if auth is not None else NO_AUTH
    if parsed.scheme == "sasl":
        install_quiet_hook()
    return AuthClient(
        auth=parsed,
        acl_root=acl_root,
        tls=tls or NO_TLS,
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
        StoreAuthError: The server refused the SASL login.
    """
    try:
        client.start(timeout=timeout_s)
    except (KazooTimeoutError, OSError) as exc:
        close_client(client)
        source = f" ({what})" if what else ""
        hosts = ",".join(f"{host}:{port}" for host, port in client.hosts) + (client.chroot or "")
        raise StoreUnavailableError(
            f"cannot connect to ZooKeeper at {hosts}{source} within {timeout_s:g} s"
            + _tls_hint(client)
        ) from exc
    if isinstance(client, AuthClient):
        try:
            if client.ordered_auth.scheme == "sasl":
                check_sasl(client)
            client.load_policy()
        except Exception:
            close_client(client)
            raise
    return client


def _tls_hint(client: KazooClient) -> str:
    """Why a connection failed, as far as TLS tells (appended to the error): a plain
    client at a TLS-only port, or a handshake the client refused."""
    tls = getattr(client, "ordered_tls", NO_TLS)
    for host, port in client.hosts:
        why = diagnose(tls, host, port)
        if why:
            return f" ({why})"
    return f" over {tls}" if tls else ""


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


def run_bounded(func: Callable[..., Any], *args: Any, timeout: float, name: str) -> bool:
    """Run ``func(*args)`` in a daemon thread and wait at most ``timeout`` seconds for it.

    For ZooKeeper work on the way out: a kazoo call made just as ZooKeeper goes away
    blocks until the session resolves, and a daemon thread cannot delay exit.

    Returns:
        Whether it finished in time.
    """
    worker = threading.Thread(target=func, args=args, name=name, daemon=True)
    worker.start()
    worker.join(timeout)
    return not worker.is_alive()


def close_client_within(client: KazooClient, timeout: float) -> bool:
    """Close ``client`` within ``timeout`` seconds, whatever ZooKeeper does.

    kazoo's ``stop()`` joins its worker threads; one stuck in a kazoo recipe's
    unbounded retry would hold it (and, through kazoo's own exit hook, interpreter
    exit) while ZooKeeper is away. The close runs in a daemon thread instead, and
    kazoo's exit hook is removed: an unfinished close cannot delay exit.

    Returns:
        Whether the close finished in time.
    """
    with contextlib.suppress(Exception):
        atexit.unregister(client.handler.stop)
    return run_bounded(close_client, client, timeout=timeout, name="zookeeper-close")


def exit_hook(owner: _T, on_exit: Callable[[_T], None]) -> Callable[[], None]:
    """Register ``on_exit(owner)`` to run at interpreter exit, holding ``owner`` weakly.

    An exit hook must not keep its client alive: a client collected before exit has
    nothing to do. Registered after kazoo's own hook (made at connect), it runs
    before it. Pass the returned hook to ``atexit.unregister`` when the client closes.

    Returns:
        The registered hook.
    """
    ref = weakref.ref(owner)

    def hook() -> None:
        alive = ref()
        if alive is not None:
            on_exit(alive)

    atexit.register(hook)
    return hook


def expire_session(client: KazooClient, timeout_s: float = 15.0) -> None:
    """Make ZooKeeper expire ``client``'s session now (fault injection).

    The way ZooKeeper's and kazoo's own test harnesses do it: a second connection joins
    the session with its id and password, then closes, which ends the session on the
    server; ``client`` then sees it expired (``LOST``) and starts a new one. Does
    nothing when ``client`` has no session.

    Raises:
        StoreUnavailableError: The second connection could not be made.
    """
    session = client.client_id
    if not session or not session[0]:
        return
    hosts = ",".join(f"{host}:{port}" for host, port in client.hosts) + (client.chroot or "")
    other = make_client(
        hosts, client_id=session, reconnect=False, tls=getattr(client, "ordered_tls", None)
    )
    try:
        start_client(other, timeout_s, "session expiry")
    finally:
        close_client(other)
