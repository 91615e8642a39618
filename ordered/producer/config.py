"""The producer's configuration: librdkafka settings and ``ordered.*`` settings.

An :class:`~ordered.OrderedProducer` takes the same configuration dict as
``confluent_kafka.Producer`` plus the ``ordered.``-prefixed keys of
:data:`ordered.settings.SETTINGS` (listed in :data:`PRODUCER_KEYS`). Every ``ordered.``
key is removed before the dict reaches librdkafka; an undocumented one is a
:class:`~coordinator.kernel.errors.ConfigError` naming it.

Three librdkafka settings are changed (see :class:`ProducerConfig`):
``enable.idempotence`` is forced on, ``delivery.report.only.error`` is emulated by the
wrapper (unless ``ordered.switch.mode=pause``), and ``delivery.timeout.ms`` defaults
to :data:`DEFAULT_DELIVERY_TIMEOUT_MS` instead of librdkafka's 300000, because it is
what a crashed producer costs an expansion (see the constant).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import KW_ONLY, dataclass
from typing import Any, Final

from coordinator.kernel.errors import ConfigError
from coordinator.kernel.store import DEFAULT_DELIVERY_TIMEOUT_MS
from ordered.settings import (
    ORDERED_PREFIX,
    Role,
    ZkSecuritySettings,
    keys_for,
    parse_bool,
    parse_int,
    parse_settings,
    setting_field,
    settings_view,
    split_client_config,
)

__all__ = [
    "DEFAULT_DELIVERY_TIMEOUT_MS",
    "ORDERED_PREFIX",
    "PRODUCER_KEYS",
    "ProducerConfig",
    "ProducerSettings",
    "parse_bool",
    "split_producer_config",
]

PRODUCER_KEYS: Final[Mapping[str, str]] = keys_for(Role.PRODUCER)
"""The ``ordered.`` settings of the producer and what each one means."""


@settings_view(Role.PRODUCER)
@dataclass(frozen=True, slots=True)
class ProducerSettings(ZkSecuritySettings):
    """The ``ordered.*`` settings of a producer, parsed and checked.

    Keys and defaults come from :data:`ordered.settings.SETTINGS` (a field the table
    does not give the producer fails at import).

    Attributes:
        zookeeper_connect: ``ordered.zookeeper.connect``; may end in a chroot path.
        zookeeper_root: ``ordered.zookeeper.root``: the layout store's root znode.
        zookeeper_session_timeout_ms: ``ordered.zookeeper.session.timeout.ms``.
        epoch_header: ``ordered.epoch.header``: add the epoch header to routed records.
        epoch_header_name: ``ordered.epoch.header.name``.
        hooks: ``ordered.hooks``: objects that receive the producer's events
            (:mod:`coordinator.kernel.hooks`).
        zookeeper_auth, zookeeper_ssl_*, zookeeper_tls: ZooKeeper authentication and
            TLS (:class:`~ordered.settings.ZkSecuritySettings`).
        switch_mode: ``ordered.switch.mode``: ``track`` or ``pause`` (what the send
            path does while a route switch drains; see :class:`~ordered.OrderedProducer`).
    """

    zookeeper_connect: str = setting_field("zookeeper_connect")
    zookeeper_root: str = setting_field("zookeeper_root")
    zookeeper_session_timeout_ms: int = setting_field("zookeeper_session_timeout_ms")
    epoch_header: bool = setting_field("epoch_header")
    epoch_header_name: str = setting_field("epoch_header_name")
    hooks: tuple[object, ...] = setting_field("hooks")
    # Keyword-only, as the base's ZooKeeper security fields are: the 7th positional
    # argument used to be zookeeper_auth, and must not now land in switch_mode unseen.
    _: KW_ONLY
    switch_mode: str = setting_field("switch_mode")

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> ProducerSettings:
        """Build the settings from ``ordered.``-prefixed keys (other keys are rejected).

        Raises:
            ConfigError: An unknown ``ordered.`` key, a missing
                ``ordered.zookeeper.connect``, or a malformed value.
        """
        return cls(**parse_settings(settings, Role.PRODUCER))


@dataclass(frozen=True, slots=True)
class ProducerConfig:
    """A producer configuration split into its two halves.

    Attributes:
        kafka: What goes to ``confluent_kafka.Producer``: every non-``ordered.`` key
            unchanged, ``enable.idempotence`` forced to ``True``,
            ``delivery.timeout.ms`` defaulted to :data:`DEFAULT_DELIVERY_TIMEOUT_MS`,
            and ``delivery.report.only.error`` removed (the wrapper emulates it, see
            ``only_error``), except with ``ordered.switch.mode=pause``, where it is
            passed on as a bool (no record is tracked, so confluent's own filter is
            safe).
        ordered: The parsed ``ordered.*`` settings.
        delivery_timeout_ms: ``delivery.timeout.ms`` (or its alias
            ``message.timeout.ms``) in force: how long an undelivered record can still
            reach the broker.
        only_error: ``delivery.report.only.error`` as the user set it.
        client_id: ``client.id`` as the user set it, or ``""``.
    """

    kafka: dict[str, Any]
    ordered: ProducerSettings
    delivery_timeout_ms: int
    only_error: bool
    client_id: str


def _linger_ms(kafka: Mapping[str, Any]) -> int:
    """``linger.ms`` (alias ``queue.buffering.max.ms``), 0 when unset or unreadable."""
    value = kafka.get("linger.ms", kafka.get("queue.buffering.max.ms", 0))
    try:
        return int(float(value))
    except (TypeError, ValueError):
        return 0  # librdkafka reports the bad value itself


def split_producer_config(
    config: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None
) -> ProducerConfig:
    """Split a producer configuration into librdkafka settings and ``ordered.*`` settings.

    Args:
        config: The configuration dict, as given to ``confluent_kafka.Producer``.
        overrides: Keyword-argument settings; they win over ``config``.

    Returns:
        The split configuration. ``config`` is not modified.

    Raises:
        ConfigError: ``config`` is not a mapping, a key is not a string, an unknown
            ``ordered.`` key, a malformed ``ordered.`` value, ``enable.idempotence``
            set to false, ``acks`` other than ``all``, or a malformed ``delivery.timeout.ms``/
            ``delivery.report.only.error``.
    """
    kafka, settings = split_client_config(config, overrides, Role.PRODUCER, ProducerSettings)
    if "enable.idempotence" in kafka and not parse_bool(
        "enable.idempotence", kafka["enable.idempotence"]
    ):
        raise ConfigError(
            "enable.idempotence=false is not allowed: per-partition order across retries "
            "needs the idempotent producer (the ordering layer turns it on)"
        )
    for acks_key in ("acks", "request.required.acks"):
        if acks_key in kafka and str(kafka[acks_key]).strip().lower() not in ("all", "-1"):
            raise ConfigError(
                f"{acks_key}={kafka[acks_key]!r} is not allowed: the ordering layer needs "
                "the idempotent producer (enable.idempotence, which it turns on) so that "
                "retries keep each partition in order, and idempotence needs acks=all; "
                "leave acks unset or set it to all"
            )
    kafka["enable.idempotence"] = True
    only_error = parse_bool(
        "delivery.report.only.error", kafka.pop("delivery.report.only.error", False)
    )
    if only_error and settings.switch_mode == "pause":
        # Nothing is tracked in pause mode: confluent may drop the successes before any
        # Python object is built for them (its filter also drops tracked successes,
        # which is why track mode emulates it instead).
        kafka["delivery.report.only.error"] = True
    if "delivery.timeout.ms" in kafka:
        timeout_key = "delivery.timeout.ms"
    elif "message.timeout.ms" in kafka:
        timeout_key = "message.timeout.ms"
    else:
        timeout_key = "delivery.timeout.ms"
        # librdkafka requires the delivery timeout above linger.ms: a very long linger
        # keeps its own margin rather than failing on a default the user never set.
        linger = _linger_ms(kafka)
        kafka[timeout_key] = (
            DEFAULT_DELIVERY_TIMEOUT_MS
            if linger < DEFAULT_DELIVERY_TIMEOUT_MS
            else linger + DEFAULT_DELIVERY_TIMEOUT_MS
        )
    delivery_timeout = parse_int(timeout_key, kafka[timeout_key], minimum=0)
    if delivery_timeout == 0:
        # librdkafka's 0 means "no timeout": an expired producer's records could arrive
        # at any time, so no grace period could seal an epoch without it.
        raise ConfigError(
            f"{timeout_key}=0 (infinite) is not allowed: an epoch could never be sealed "
            "after this producer's session expires"
        )
    return ProducerConfig(
        kafka=kafka,
        ordered=settings,
        delivery_timeout_ms=delivery_timeout,
        only_error=only_error,
        client_id=str(kafka.get("client.id", "")),
    )
