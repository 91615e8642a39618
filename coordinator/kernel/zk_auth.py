"""ZooKeeper credentials: ``digest:USER:PASSWORD`` or ``sasl:USER:PASSWORD``, never shown.

The one spelling of ZooKeeper credentials across the project: ``ordered.zookeeper.auth``
in the clients' config, ``--zookeeper-auth`` and ``$ORDERED_ZOOKEEPER_AUTH`` for the
command line and the daemon, ``ordered.zookeeper.auth`` in a ``--command-config`` file.

- ``digest:USER:PASSWORD``: ZooKeeper's digest scheme (``addauth digest USER:PASSWORD``
  in ``zkCli``); the identity in ACLs is ``digest:USER:base64(sha1(USER:PASSWORD))``.
- ``sasl:USER:PASSWORD``: SASL DIGEST-MD5 against a server's JAAS ``Server`` section;
  the identity in ACLs is ``sasl:USER``.

A :class:`ZkAuth` never shows its password: its ``repr`` and ``str`` redact it, and a
malformed value is reported without echoing it.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass, field
from typing import Any, Final

from coordinator.kernel.errors import ConfigError

__all__ = ["NO_AUTH", "SCHEMES", "ZkAuth", "digest_id"]

SCHEMES: Final = ("digest", "sasl")
"""The authentication schemes ``ZkAuth`` accepts."""


def digest_id(user: str, password: str) -> str:
    """Return ZooKeeper's digest ACL id of ``user``: ``USER:base64(sha1(USER:PASSWORD))``."""
    raw = hashlib.sha1(f"{user}:{password}".encode()).digest()
    return f"{user}:{base64.b64encode(raw).decode()}"


@dataclass(frozen=True)
class ZkAuth:
    """ZooKeeper credentials of one client (or none: :data:`NO_AUTH`).

    Attributes:
        scheme: ``digest``, ``sasl``, or ``""`` for no authentication.
        user: The user name.
        password: The password; never part of ``repr``/``str``.
    """

    scheme: str = ""
    user: str = ""
    password: str = field(default="", repr=False)

    @classmethod
    def parse(cls, text: Any, source: str = "ordered.zookeeper.auth") -> ZkAuth:
        """Parse ``SCHEME:USER:PASSWORD`` (``""`` or ``None``: no authentication).

        Raises:
            ConfigError: Not of that form, or an unknown scheme; the message names
                ``source`` and never echoes the value.
        """
        if text is None or (isinstance(text, str) and not text.strip()):
            return NO_AUTH
        if isinstance(text, ZkAuth):
            return text
        if not isinstance(text, str):
            raise ConfigError(
                f"{source}: expected SCHEME:USER:PASSWORD, got a {type(text).__name__}"
            )
        scheme, _, rest = text.strip().partition(":")
        user, _, password = rest.partition(":")
        if scheme not in SCHEMES:
            raise ConfigError(
                f"{source}: expected SCHEME:USER:PASSWORD with SCHEME one of "
                f"{', '.join(SCHEMES)} (the value is not shown)"
            )
        if not user or not password:
            raise ConfigError(
                f"{source}: expected {scheme}:USER:PASSWORD with a user and a password "
                "(the value is not shown)"
            )
        return cls(scheme, user, password)

    def __bool__(self) -> bool:
        return bool(self.scheme)

    def __str__(self) -> str:
        return f"{self.scheme}:{self.user}:***" if self else "none"

    @property
    def identity(self) -> tuple[str, str] | None:
        """The ACL id this client is known by: ``(scheme, id)``, or None without auth."""
        if self.scheme == "digest":
            return ("digest", digest_id(self.user, self.password))
        if self.scheme == "sasl":
            return ("sasl", self.user)
        return None

    @property
    def principal(self) -> str:
        """``scheme:user`` (no secret): how logs and ``describe`` name this identity."""
        return f"{self.scheme}:{self.user}" if self else "anonymous"

    def kazoo_arguments(self) -> dict[str, Any]:
        """Return the ``KazooClient`` keyword arguments that authenticate with these."""
        if self.scheme == "digest":
            return {"auth_data": [("digest", f"{self.user}:{self.password}")]}
        if self.scheme == "sasl":
            return {
                "sasl_options": {
                    "mechanism": "DIGEST-MD5",
                    "username": self.user,
                    "password": self.password,
                }
            }
        return {}


NO_AUTH: Final = ZkAuth()
"""No ZooKeeper authentication (the default)."""
