"""The one splitter of a client's configuration dict, driven by the settings table.

``OrderedProducer`` and ``OrderedConsumer`` (and their serializing variants) take the
dict their confluent client takes plus ``ordered.``-prefixed keys. Both halves are split
here: the librdkafka keys go on (each client then changes the few it must, see
:mod:`ordered.producer.config` and :mod:`ordered.consumer_config`), and the
``ordered.`` keys are checked and parsed against :data:`ordered.settings.SETTINGS` for
the client's :class:`~ordered.settings.Role` into its settings view. The ZooKeeper
authentication and TLS settings, which both views hold, are declared once here
(:class:`ZkSecuritySettings`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, TypeVar

from coordinator.client.zk_auth import ZkAuth
from coordinator.client.zk_tls import ZkTls
from ordered.settings import Role, parse_settings, setting_field, split_ordered

__all__ = ["ZkSecuritySettings", "split_client_config"]

V = TypeVar("V")


def split_client_config(
    config: Mapping[str, Any] | None,
    overrides: Mapping[str, Any] | None,
    role: Role,
    view: Callable[..., V],
) -> tuple[dict[str, Any], V]:
    """Split a client's configuration into its librdkafka keys and its ``ordered.`` view.

    Args:
        config: The configuration dict, as given to confluent; not modified.
        overrides: Keyword-argument settings; they win over ``config``.
        role: The client whose settings the ``ordered.`` keys must be.
        view: The settings view built from the parsed settings (attribute -> value).

    Returns:
        A new dict of every non-``ordered.`` key, and the view.

    Raises:
        ConfigError: ``config`` is not a mapping, a key is not a string, an unknown
            ``ordered.`` key, a missing required one, or a malformed value.
    """
    kafka, ordered = split_ordered(config, overrides)
    return kafka, view(**parse_settings(ordered, role))


@dataclass(frozen=True, slots=True, kw_only=True)
class ZkSecuritySettings:
    """The ZooKeeper authentication and TLS settings of a client's settings view.

    The base of :class:`~ordered.producer.config.ProducerSettings` and
    :class:`~ordered.consumer_config.ConsumerSettings`: its fields come from the settings
    table like theirs (keyword-only, so a view's own fields keep their positions), and
    the TLS settings are checked as a whole whenever a view is made.

    Attributes:
        zookeeper_auth: ``ordered.zookeeper.auth`` (its ``repr`` hides the password).
        zookeeper_ssl_client_enable, zookeeper_ssl_ca_location,
            zookeeper_ssl_certificate_location, zookeeper_ssl_key_location,
            zookeeper_ssl_endpoint_identification_algorithm: ZooKeeper over TLS
            (``ordered.zookeeper.ssl.*``; together: :attr:`zookeeper_tls`).
    """

    zookeeper_auth: ZkAuth = setting_field("zookeeper_auth")
    zookeeper_ssl_client_enable: bool = setting_field("zookeeper_ssl_client_enable")
    zookeeper_ssl_ca_location: str = setting_field("zookeeper_ssl_ca_location")
    zookeeper_ssl_certificate_location: str = setting_field("zookeeper_ssl_certificate_location")
    zookeeper_ssl_key_location: str = setting_field("zookeeper_ssl_key_location")
    zookeeper_ssl_endpoint_identification_algorithm: str = setting_field(
        "zookeeper_ssl_endpoint_identification_algorithm"
    )

    def __post_init__(self) -> None:
        # The TLS settings as a whole, however the view is made: refused at the door.
        ZkTls.from_parsed(self)

    @property
    def zookeeper_tls(self) -> ZkTls:
        """The ``ordered.zookeeper.ssl.*`` settings together (checked as a whole)."""
        return ZkTls.from_parsed(self)
