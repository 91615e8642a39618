"""ZooKeeper over TLS: what a client needs to reach a ``secureClientPort``.

The settings follow Kafka's own ZooKeeper TLS settings (``zookeeper.ssl.client.enable``,
``zookeeper.ssl.endpoint.identification.algorithm``) with an ``ordered.`` prefix, and
take PEM files the way librdkafka's ``ssl.ca.location``, ``ssl.certificate.location``
and ``ssl.key.location`` do:

- ``ordered.zookeeper.ssl.client.enable``: connect over TLS (default false);
- ``ordered.zookeeper.ssl.ca.location``: the PEM CA certificate(s) that signed the
  server's certificate (default: the system's trust store);
- ``ordered.zookeeper.ssl.certificate.location`` and ``ordered.zookeeper.ssl.key.location``:
  a client certificate and its unencrypted PEM key, for a server that asks for one
  (``ssl.clientAuth``); both or neither;
- ``ordered.zookeeper.ssl.endpoint.identification.algorithm``: ``https`` (default:
  the server's certificate must name the host of the connect string) or ``none``.

The settings table (:mod:`ordered.settings`) declares them; this module parses their
values (a missing or unreadable file, or one that is not PEM, is a
:class:`~coordinator.kernel.errors.ConfigError` naming the key, when the client is
made) and turns them into kazoo's arguments (``use_ssl``, ``ca``, ``certfile``,
``keyfile``, ``verify_certs``, ``check_hostname``).
"""

from __future__ import annotations

import contextlib
import os
import socket
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from coordinator.kernel.errors import ConfigError

__all__ = [
    "CA",
    "CERTIFICATE",
    "ENABLE",
    "IDENTIFICATION",
    "KEY",
    "NO_TLS",
    "TLS_ATTRS",
    "TLS_KEYS",
    "ZkTls",
    "diagnose",
    "parse_identification",
    "parse_pem_file",
]

ENABLE: Final = "ordered.zookeeper.ssl.client.enable"
CA: Final = "ordered.zookeeper.ssl.ca.location"
CERTIFICATE: Final = "ordered.zookeeper.ssl.certificate.location"
KEY: Final = "ordered.zookeeper.ssl.key.location"
IDENTIFICATION: Final = "ordered.zookeeper.ssl.endpoint.identification.algorithm"
TLS_KEYS: Final = (ENABLE, CA, CERTIFICATE, KEY, IDENTIFICATION)
"""The ZooKeeper TLS settings, in the order of :class:`ZkTls`' fields."""
TLS_ATTRS: Final = tuple(k.removeprefix("ordered.").replace(".", "_") for k in TLS_KEYS)
"""Their attributes in the parsed settings (``zookeeper_ssl_client_enable``...)."""

_IDENTIFICATIONS: Final = ("https", "none")


def parse_pem_file(key: str, value: Any) -> str:
    """Check that ``value`` names a readable regular file; return the path (stripped).

    An empty value means unset, as in Kafka's properties files; it returns ``""``.

    Raises:
        ConfigError: Not a string, or no readable file there.
    """
    if not isinstance(value, str):
        raise ConfigError(f"{key}: expected the path of a PEM file, got {value!r}")
    text = value.strip()
    if not text:
        return ""
    try:
        path = Path(text)
        is_file = path.is_file()
    except (OSError, ValueError):  # an embedded NUL, a name too long
        is_file = False
    if not is_file:
        raise ConfigError(f"{key}: no such file: {text!r}")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{key}: the file {text!r} is not readable")
    return text


def parse_identification(key: str, value: Any) -> str:
    """``https`` or ``none`` (any case; empty means ``none``, as in Kafka).

    Raises:
        ConfigError: Any other value.
    """
    if isinstance(value, str):
        text = value.strip().lower() or "none"
        if text in _IDENTIFICATIONS:
            return text
    raise ConfigError(f"{key}: expected one of {', '.join(_IDENTIFICATIONS)}, got {value!r}")


@dataclass(frozen=True)
class ZkTls:
    """How a client reaches ZooKeeper over TLS (or not: :data:`NO_TLS`).

    Made with :meth:`of`, which checks the combination; each value was checked by its
    parser (:func:`parse_pem_file`, :func:`parse_identification`).

    Attributes:
        enabled: ``ordered.zookeeper.ssl.client.enable``.
        ca_location: ``ordered.zookeeper.ssl.ca.location`` (``""``: the system's store).
        certificate_location: ``ordered.zookeeper.ssl.certificate.location`` (or ``""``).
        key_location: ``ordered.zookeeper.ssl.key.location`` (or ``""``).
        identification: ``ordered.zookeeper.ssl.endpoint.identification.algorithm``.
    """

    enabled: bool = False
    ca_location: str = ""
    certificate_location: str = ""
    key_location: str = ""
    identification: str = "https"

    @classmethod
    def of(
        cls,
        enabled: bool,
        ca_location: str | None = None,
        certificate_location: str | None = None,
        key_location: str | None = None,
        identification: str = "https",
    ) -> ZkTls:
        """Check parsed values together and return them.

        Raises:
            ConfigError: A file setting without ``ordered.zookeeper.ssl.client.enable``,
                a certificate without its key (or the reverse), a CA file that holds no
                PEM certificate, or a certificate and key that do not load as a pair.
        """
        tls = cls(
            enabled,
            ca_location or "",
            certificate_location or "",
            key_location or "",
            identification,
        )
        given = [k for k, v in zip(TLS_KEYS[1:4], tls._files(), strict=True) if v]
        if given and not enabled:
            raise ConfigError(
                f"{', '.join(given)} set but {ENABLE} is false: set {ENABLE}=true to "
                "connect to ZooKeeper over TLS"
            )
        if bool(tls.certificate_location) != bool(tls.key_location):
            raise ConfigError(f"{CERTIFICATE} and {KEY} go together: set both or neither")
        if enabled:
            tls.context()
        return tls

    @classmethod
    def from_parsed(cls, values: Any) -> ZkTls:
        """The TLS settings among parsed ``values``: a mapping by attribute
        (``zookeeper_ssl_client_enable``...: :data:`TLS_ATTRS`) or an object with those
        attributes (a settings view); missing ones take their defaults.

        Raises:
            ConfigError: A malformed combination (see :meth:`of`).
        """
        if isinstance(values, Mapping):
            enabled, ca, cert, key, ident = (values.get(a) for a in TLS_ATTRS)
        else:
            enabled, ca, cert, key, ident = (getattr(values, a, None) for a in TLS_ATTRS)
        return cls.of(bool(enabled), ca, cert, key, ident or "https")

    def _files(self) -> tuple[str, str, str]:
        return (self.ca_location, self.certificate_location, self.key_location)

    def __bool__(self) -> bool:
        return self.enabled

    def __str__(self) -> str:
        if not self.enabled:
            return "plain"
        ca = self.ca_location or "system CAs"
        cert = self.certificate_location and f", client certificate {self.certificate_location}"
        return f"TLS (CA {ca}{cert}, host name check {self.identification})"

    def context(self) -> ssl.SSLContext:
        """An ``SSLContext`` as kazoo will build it: loads every file now.

        Raises:
            ConfigError: A file that is not PEM, or a certificate and key that do not
                match; the message names the key.
        """
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
        if self.ca_location:
            try:
                ctx.load_verify_locations(self.ca_location)
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise ConfigError(
                    f"{CA}: {self.ca_location!r} holds no PEM CA certificate ({exc})"
                ) from None
        if self.certificate_location:
            try:
                ctx.load_cert_chain(self.certificate_location, self.key_location)
            except (ssl.SSLError, OSError, ValueError) as exc:
                raise ConfigError(
                    f"{CERTIFICATE}/{KEY}: {self.certificate_location!r} and "
                    f"{self.key_location!r} do not load as a PEM certificate and its "
                    f"unencrypted key ({exc})"
                ) from None
        return ctx

    def kazoo_arguments(self) -> dict[str, Any]:
        """The ``KazooClient`` keyword arguments of these settings (none when plain)."""
        if not self.enabled:
            return {}
        args: dict[str, Any] = {
            "use_ssl": True,
            "verify_certs": True,
            "check_hostname": self.identification == "https",
        }
        if self.ca_location:
            args["ca"] = self.ca_location
        if self.certificate_location:
            args["certfile"] = self.certificate_location
            args["keyfile"] = self.key_location
        return args


def diagnose(tls: ZkTls, host: str, port: int, timeout_s: float = 2.0) -> str:
    """Why a client with ``tls`` may not get a session at ``host:port``, in a few words.

    Called after a connection failed: one TLS handshake tells a TLS-only server that a
    plain client reached (it completes), and a certificate either side does not trust
    (the handshake's error, or the server's alert) from a server that is simply away
    (``""``).
    """
    ctx = tls.context()
    if not tls or tls.identification != "https":
        ctx.check_hostname = False
    if not tls:
        # Only whether the server speaks TLS at all: no data is sent, nothing trusted.
        ctx.verify_mode = ssl.CERT_NONE
    try:
        with (
            socket.create_connection((host, port), timeout=timeout_s) as raw,
            ctx.wrap_socket(raw, server_hostname=host) as sock,
        ):
            if tls:
                # TLS 1.3: the server checks the client's certificate after the client
                # finished; its refusal is an alert on the first read.
                sock.settimeout(0.5)
                with contextlib.suppress(TimeoutError):
                    sock.recv(1)
    except ssl.SSLError as exc:
        why = getattr(exc, "verify_message", None) or exc.reason or str(exc)
        return f"the TLS handshake failed: {why}" if tls else ""
    except OSError:
        return ""
    if tls:
        return ""
    return f"{host}:{port} speaks TLS and drops plain clients: set {ENABLE}=true and {CA}"


NO_TLS: Final = ZkTls()
"""A plain connection to ZooKeeper (the default)."""
