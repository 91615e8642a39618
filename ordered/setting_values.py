"""Value parsers of the settings table: a string, a znode root, a connect string.

Split from :mod:`ordered.settings`, which re-exports :func:`parse_str` and
:func:`parse_zookeeper_connect`; the command line checks ``--zookeeper`` with the same
rule.
"""

from __future__ import annotations

from typing import Any

from coordinator.client.errors import ConfigError

__all__ = ["parse_root", "parse_str", "parse_zookeeper_connect"]


def parse_str(key: str, value: Any) -> str:
    """Parse a non-empty string setting (stripped).

    Raises:
        ConfigError: Not a string, empty, or not encodable as UTF-8 (a lone surrogate:
            ZooKeeper, Kafka headers and librdkafka take UTF-8 only).
    """
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{key}: expected UTF-8 text, got {value!r}") from None
    return value.strip()


def _znode_chars_ok(text: str) -> bool:
    """ZooKeeper's ``PathUtils.validatePath`` character rule."""
    for ch in text:
        c = ord(ch)
        if c == 0 or 0x01 <= c <= 0x1F or 0x7F <= c <= 0x9F:
            return False
        if 0xD800 <= c <= 0xF8FF or 0xFFF0 <= c <= 0xFFFF:
            return False
    return True


def parse_root(key: str, value: Any) -> str:
    """Parse an absolute znode path (``/ordered``): no empty, ``.`` or ``..`` part, no
    character ZooKeeper refuses.

    Raises:
        ConfigError: The path is malformed; the message names the key.
    """
    root = parse_str(key, value)
    if not root.startswith("/") or (len(root) > 1 and root.endswith("/")):
        raise ConfigError(f"{key}: expected an absolute znode path like /ordered, got {root!r}")
    parts = root.split("/")[1:]
    if root != "/" and any(part in ("", ".", "..") for part in parts):
        raise ConfigError(f"{key}: a znode path has no empty, '.' or '..' component, got {root!r}")
    if not _znode_chars_ok(root):
        raise ConfigError(
            f"{key}: {root!r} holds a character ZooKeeper refuses in a path (control "
            "characters, U+D800-U+F8FF, U+FFF0-U+FFFF)"
        )
    return root


def parse_zookeeper_connect(key: str, value: Any) -> str:
    """Parse a ZooKeeper connect string: ``host[:port][,host[:port]...][/chroot]``.

    Ports are 1 to 65535 (an IPv6 host is bracketed: ``[::1]:2181``); a chroot is a
    znode path. The same rule checks ``--zookeeper`` on the command line.

    Raises:
        ConfigError: The string is malformed; the message names the key and the part.
    """
    text = parse_str(key, value)
    hosts, slash, chroot = text.partition("/")
    if not hosts:
        raise ConfigError(f"{key}: expected host:port[,host:port...][/chroot], got {text!r}")
    for part in hosts.split(","):
        host, port = part, "2181"
        if part.startswith("["):
            close = part.find("]")
            if close < 0 or (part[close + 1 :] and not part[close + 1 :].startswith(":")):
                raise ConfigError(f"{key}: bad ZooKeeper host {part!r} in {text!r}")
            host, port = part[: close + 1], part[close + 2 :] or "2181"
        elif ":" in part:
            host, port = part.rsplit(":", 1)
        host = host.strip()
        if not host or (not host.startswith("[") and ":" in host):
            raise ConfigError(
                f"{key}: bad ZooKeeper host {part!r} in {text!r} (expected host:port)"
            )
        if not (port.isascii() and port.isdigit()) or not 1 <= int(port) <= 65535:
            raise ConfigError(f"{key}: bad ZooKeeper port {port!r} in {text!r} (expected 1-65535)")
    if slash:
        parse_root(f"{key} (chroot)", "/" + chroot)
    return text
