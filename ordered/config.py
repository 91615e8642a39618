"""Split a confluent-kafka configuration into librdkafka settings and ``ordered.*`` settings.

An :class:`~ordered.OrderedProducer` takes the same configuration dict as
``confluent_kafka.Producer`` plus a few ``ordered.``-prefixed keys (see
:data:`ORDERED_KEYS`). librdkafka rejects keys it does not know, so every ``ordered.``
key is removed before the dict reaches it; an ``ordered.`` key that is not documented is
a :class:`~coordinator.errors.ConfigError` naming it, so a typo never silently turns a
setting off.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from coordinator.errors import ConfigError

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "ORDERED_KEYS",
    "ORDERED_PREFIX",
    "OrderedSettings",
    "ProducerConfig",
    "parse_bool",
    "split_producer_config",
]

ORDERED_PREFIX: Final = "ordered."
"""Every setting of the ordering layer starts with this prefix."""

ORDERED_KEYS: Final[Mapping[str, str]] = {
    "ordered.zookeeper.connect": "ZooKeeper connect string, optionally with a chroot (required)",
    "ordered.zookeeper.root": "root znode of the layout store (default /ordered)",
    "ordered.zookeeper.session.timeout.ms": "ZooKeeper session timeout (default 10000)",
    "ordered.epoch.header": "add the layout epoch header to every routed record (default true)",
    "ordered.epoch.header.name": "name of the epoch header (default ordered.epoch)",
}
"""The documented ``ordered.`` settings and what each one means."""

DEFAULT_DELIVERY_TIMEOUT_MS: Final = 300_000
"""librdkafka's default ``delivery.timeout.ms`` (alias ``message.timeout.ms``)."""

_TRUE: Final = frozenset({"true", "t", "1"})
_FALSE: Final = frozenset({"false", "f", "0"})


def parse_bool(key: str, value: Any) -> bool:
    """Parse a boolean setting the way librdkafka does.

    Args:
        key: The setting's name, for the error message.
        value: A ``bool``, the integers 0/1, or one of ``true``/``t``/``1``/``false``/
            ``f``/``0`` (any case).

    Returns:
        The boolean value.

    Raises:
        ConfigError: Any other value.
    """
    if isinstance(value, bool):
        return value
    if isinstance(value, int) and value in (0, 1):
        return bool(value)
    if isinstance(value, str):
        text = value.strip().lower()
        if text in _TRUE:
            return True
        if text in _FALSE:
            return False
    raise ConfigError(f"{key}: expected a boolean (true or false), got {value!r}")


def _parse_int(key: str, value: Any, minimum: int) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if isinstance(value, int):
        number = value
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    else:
        raise ConfigError(f"{key}: expected an integer, got {value!r}")
    if number < minimum:
        raise ConfigError(f"{key}: must be >= {minimum}, got {number}")
    return number


def _parse_str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value.strip()


@dataclass(frozen=True, slots=True)
class OrderedSettings:
    """The ``ordered.*`` settings of a client, parsed and checked.

    Attributes:
        zookeeper_connect: ``ordered.zookeeper.connect``; may end in a chroot path.
        zookeeper_root: ``ordered.zookeeper.root``: the layout store's root znode.
        zookeeper_session_timeout_ms: ``ordered.zookeeper.session.timeout.ms``.
        epoch_header: ``ordered.epoch.header``: add the epoch header to routed records.
        epoch_header_name: ``ordered.epoch.header.name``.
    """

    zookeeper_connect: str
    zookeeper_root: str = "/ordered"
    zookeeper_session_timeout_ms: int = 10_000
    epoch_header: bool = True
    epoch_header_name: str = "ordered.epoch"

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> OrderedSettings:
        """Build the settings from ``ordered.``-prefixed keys (other keys are rejected).

        Args:
            settings: Only ``ordered.`` keys.

        Raises:
            ConfigError: An unknown ``ordered.`` key, a missing
                ``ordered.zookeeper.connect``, or a malformed value.
        """
        unknown = sorted(key for key in settings if key not in ORDERED_KEYS)
        if unknown:
            known = ", ".join(sorted(ORDERED_KEYS))
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)} (known: {known})")
        if "ordered.zookeeper.connect" not in settings:
            raise ConfigError("ordered.zookeeper.connect is required (the layout store)")
        connect = _parse_str("ordered.zookeeper.connect", settings["ordered.zookeeper.connect"])
        root = _parse_str(
            "ordered.zookeeper.root", settings.get("ordered.zookeeper.root", "/ordered")
        )
        if not root.startswith("/") or (len(root) > 1 and root.endswith("/")):
            raise ConfigError(
                f"ordered.zookeeper.root: expected an absolute znode path like /ordered, "
                f"got {root!r}"
            )
        session = _parse_int(
            "ordered.zookeeper.session.timeout.ms",
            settings.get("ordered.zookeeper.session.timeout.ms", 10_000),
            minimum=1,
        )
        header = parse_bool("ordered.epoch.header", settings.get("ordered.epoch.header", True))
        name = _parse_str(
            "ordered.epoch.header.name",
            settings.get("ordered.epoch.header.name", "ordered.epoch"),
        )
        return cls(connect, root, session, header, name)


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """A producer configuration split into its two halves.

    Attributes:
        kafka: What goes to ``confluent_kafka.Producer``: every non-``ordered.`` key
            unchanged, ``enable.idempotence`` forced to ``True``, and
            ``delivery.report.only.error`` removed (the wrapper emulates it, see
            ``only_error``).
        ordered: The parsed ``ordered.*`` settings.
        delivery_timeout_ms: ``delivery.timeout.ms`` (or its alias
            ``message.timeout.ms``), librdkafka's default when unset: how long an
            undelivered record can still reach the broker.
        only_error: ``delivery.report.only.error`` as the user set it.
        client_id: ``client.id`` as the user set it, or ``""``.
    """

    kafka: dict[str, Any]
    ordered: OrderedSettings
    delivery_timeout_ms: int
    only_error: bool
    client_id: str


def split_producer_config(
    config: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None
) -> ProducerConfig:
    """Split a producer configuration into librdkafka settings and ``ordered.*`` settings.

    Args:
        config: The configuration dict, as given to ``confluent_kafka.Producer``.
        overrides: Keyword-argument settings; they win over ``config`` (as confluent's
            ``Producer(config, **kwargs)`` does).

    Returns:
        The split configuration. ``config`` is not modified.

    Raises:
        ConfigError: ``config`` is not a mapping, a key is not a string, an unknown
            ``ordered.`` key, a malformed ``ordered.`` value, ``enable.idempotence``
            set to false, or a malformed ``delivery.timeout.ms``/
            ``delivery.report.only.error``.
    """
    if config is not None and not isinstance(config, Mapping):
        raise ConfigError(f"the configuration must be a dict, got {type(config).__name__}")
    merged: dict[str, Any] = dict(config or {})
    merged.update(overrides or {})
    kafka: dict[str, Any] = {}
    ordered: dict[str, Any] = {}
    for key, value in merged.items():
        if not isinstance(key, str):
            raise ConfigError(f"configuration keys must be strings, got {key!r}")
        if key.startswith(ORDERED_PREFIX):
            ordered[key] = value
        else:
            kafka[key] = value
    settings = OrderedSettings.from_mapping(ordered)
    if "enable.idempotence" in kafka and not parse_bool(
        "enable.idempotence", kafka["enable.idempotence"]
    ):
        raise ConfigError(
            "enable.idempotence=false is not allowed: per-partition order across retries "
            "needs the idempotent producer (the ordering layer turns it on)"
        )
    kafka["enable.idempotence"] = True
    only_error = parse_bool(
        "delivery.report.only.error", kafka.pop("delivery.report.only.error", False)
    )
    timeout_key = "delivery.timeout.ms" if "delivery.timeout.ms" in kafka else "message.timeout.ms"
    delivery_timeout = _parse_int(
        timeout_key, kafka.get(timeout_key, DEFAULT_DELIVERY_TIMEOUT_MS), minimum=0
    )
    if delivery_timeout == 0:
        # librdkafka's 0 means "no timeout": an expired producer's records could arrive
        # at any time, so no grace period could seal an epoch without it.
        raise ConfigError(
            f"{timeout_key}=0 (infinite) is not allowed: an epoch could never be sealed "
            "after this producer's session expires"
        )
    client_id = kafka.get("client.id", "")
    return ProducerConfig(
        kafka=kafka,
        ordered=settings,
        delivery_timeout_ms=delivery_timeout,
        only_error=only_error,
        client_id=str(client_id),
    )
