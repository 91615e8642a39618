"""Unit tests of ordered.producer.config: splitting a producer config, checking ordered.* keys."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.kernel.errors import ConfigError
from coordinator.kernel.zk_auth import ZkAuth
from ordered.producer.config import (
    DEFAULT_DELIVERY_TIMEOUT_MS,
    PRODUCER_KEYS,
    ProducerSettings,
    parse_bool,
    split_producer_config,
)

BASE: dict[str, Any] = {
    "bootstrap.servers": "127.0.0.1:9092",
    "ordered.zookeeper.connect": "127.0.0.1:2181/chroot",
}


def test_split_removes_ordered_keys_and_forces_idempotence() -> None:
    config = dict(BASE, **{"linger.ms": 5, "ordered.epoch.header": "false"})
    split = split_producer_config(config)
    assert split.kafka == {
        "bootstrap.servers": "127.0.0.1:9092",
        "linger.ms": 5,
        "enable.idempotence": True,
        "delivery.timeout.ms": DEFAULT_DELIVERY_TIMEOUT_MS,
    }
    assert split.ordered == ProducerSettings(
        zookeeper_connect="127.0.0.1:2181/chroot", epoch_header=False
    )
    assert config["ordered.epoch.header"] == "false"  # the caller's dict is untouched
    assert not any(key.startswith("ordered.") for key in split.kafka)


def test_defaults() -> None:
    split = split_producer_config(BASE)
    assert split.ordered.zookeeper_root == "/ordered"
    assert split.ordered.zookeeper_session_timeout_ms == 10_000
    assert split.ordered.epoch_header is False  # opt-in (issue 11)
    assert split.ordered.epoch_header_name == "ordered.epoch"
    assert split.delivery_timeout_ms == DEFAULT_DELIVERY_TIMEOUT_MS == 60_000
    assert split.kafka["delivery.timeout.ms"] == DEFAULT_DELIVERY_TIMEOUT_MS
    assert split.only_error is False
    assert split.client_id == ""
    assert split.ordered.switch_mode == "track"


def test_every_documented_key_is_accepted() -> None:
    values = {
        "ordered.zookeeper.connect": "zk:2181",
        "ordered.zookeeper.root": "/x/y",
        "ordered.zookeeper.session.timeout.ms": "2000",
        "ordered.epoch.header": 0,
        "ordered.epoch.header.name": "e",
        "ordered.hooks": [_SwitchHook()],
        "ordered.zookeeper.auth": "digest:u:secret",
        "ordered.switch.mode": "Pause",
        "ordered.zookeeper.ssl.client.enable": "false",
        "ordered.zookeeper.ssl.ca.location": "",
        "ordered.zookeeper.ssl.certificate.location": " ",
        "ordered.zookeeper.ssl.key.location": "",
        "ordered.zookeeper.ssl.endpoint.identification.algorithm": "NONE",
    }
    assert set(values) == set(PRODUCER_KEYS)
    settings = split_producer_config(values).ordered
    hooks = tuple(values["ordered.hooks"])
    assert settings == ProducerSettings(
        "zk:2181",
        "/x/y",
        2000,
        False,
        "e",
        hooks,
        zookeeper_auth=ZkAuth("digest", "u", "secret"),
        switch_mode="pause",
        zookeeper_ssl_client_enable=False,
        zookeeper_ssl_ca_location="",
        zookeeper_ssl_certificate_location="",
        zookeeper_ssl_key_location="",
        zookeeper_ssl_endpoint_identification_algorithm="none",
    )
    assert "secret" not in repr(settings)


def test_the_view_keeps_its_positions_and_the_rest_is_keyword_only() -> None:
    # The first six by position as always; zookeeper_auth (7th before the ZooKeeper
    # security fields moved to a shared base) must not land in switch_mode unseen.
    settings = ProducerSettings("zk:2181", "/r", 2000, True, "e", ())
    assert (settings.zookeeper_session_timeout_ms, settings.epoch_header_name) == (2000, "e")
    with pytest.raises(TypeError):
        ProducerSettings("zk:2181", "/r", 2000, True, "e", (), ZkAuth("digest", "u", "p"))  # type: ignore[misc]


class _SwitchHook:
    def on_route_switch(self, topic: str, from_epoch: int, to_epoch: int) -> None:
        """A hook of one event."""


def test_unknown_ordered_key_is_named() -> None:
    with pytest.raises(ConfigError, match=r"ordered\.epoch\.headers"):
        split_producer_config(dict(BASE, **{"ordered.epoch.headers": True}))


def test_missing_connect() -> None:
    with pytest.raises(ConfigError, match=r"ordered\.zookeeper\.connect is required"):
        split_producer_config({"bootstrap.servers": "x"})


@pytest.mark.parametrize("value", [False, "false", "FALSE", 0, "0", "f"])
def test_idempotence_false_is_rejected(value: Any) -> None:
    with pytest.raises(ConfigError, match=r"enable\.idempotence"):
        split_producer_config(dict(BASE, **{"enable.idempotence": value}))


@pytest.mark.parametrize("value", [True, "true", 1, "1"])
def test_idempotence_true_is_kept_true(value: Any) -> None:
    assert (
        split_producer_config(dict(BASE, **{"enable.idempotence": value})).kafka[
            "enable.idempotence"
        ]
        is True
    )


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ordered.zookeeper.root", "ordered"),
        ("ordered.zookeeper.root", "/ordered/"),
        ("ordered.zookeeper.root", ""),
        ("ordered.zookeeper.session.timeout.ms", "soon"),
        ("ordered.zookeeper.session.timeout.ms", 0),
        ("ordered.zookeeper.session.timeout.ms", True),
        ("ordered.epoch.header", "maybe"),
        ("ordered.epoch.header", 2),
        ("ordered.epoch.header.name", ""),
        ("ordered.zookeeper.connect", 5),
    ],
)
def test_bad_values_name_the_key(key: str, value: Any) -> None:
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")):
        split_producer_config(dict(BASE, **{key: value}))


def test_delivery_timeout_and_alias() -> None:
    split = split_producer_config(dict(BASE, **{"delivery.timeout.ms": 3000}))
    assert split.delivery_timeout_ms == 3000
    assert (
        split_producer_config(dict(BASE, **{"message.timeout.ms": "4000"})).delivery_timeout_ms
        == 4000
    )
    # The alias set by the user is kept, and no second key is added beside it.
    assert (
        "delivery.timeout.ms"
        not in split_producer_config(dict(BASE, **{"message.timeout.ms": "4000"})).kafka
    )
    with pytest.raises(ConfigError, match="infinite"):
        split_producer_config(dict(BASE, **{"delivery.timeout.ms": 0}))


def test_default_delivery_timeout_stays_above_a_long_linger() -> None:
    split = split_producer_config(dict(BASE, **{"linger.ms": "60000"}))
    assert split.delivery_timeout_ms == 60_000 + DEFAULT_DELIVERY_TIMEOUT_MS
    assert split_producer_config(dict(BASE, **{"linger.ms": 5})).delivery_timeout_ms == (
        DEFAULT_DELIVERY_TIMEOUT_MS
    )


def test_only_error_is_taken_out_for_emulation() -> None:
    split = split_producer_config(dict(BASE, **{"delivery.report.only.error": "true"}))
    assert split.only_error is True
    assert "delivery.report.only.error" not in split.kafka


def test_only_error_is_passed_on_as_a_bool_in_pause_mode() -> None:
    config = dict(BASE, **{"delivery.report.only.error": "true", "ordered.switch.mode": "pause"})
    split = split_producer_config(config)
    assert split.only_error is True
    assert split.kafka["delivery.report.only.error"] is True  # confluent wants a bool
    off = dict(config, **{"delivery.report.only.error": "false"})
    assert "delivery.report.only.error" not in split_producer_config(off).kafka


def test_switch_mode_is_checked() -> None:
    with pytest.raises(ConfigError, match=r"ordered.switch.mode: expected one of track, pause"):
        split_producer_config(dict(BASE, **{"ordered.switch.mode": "wait"}))


def test_kwargs_override_config() -> None:
    split = split_producer_config(BASE, {"ordered.epoch.header": False, "client.id": "me"})
    assert split.ordered.epoch_header is False
    assert split.client_id == "me"
    assert split.kafka["client.id"] == "me"


def test_not_a_mapping() -> None:
    with pytest.raises(ConfigError, match="dict"):
        split_producer_config(["bootstrap.servers"])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "expected"),
    [(True, True), (False, False), ("True", True), ("t", True), ("0", False), (1, True)],
)
def test_parse_bool(value: Any, expected: bool) -> None:
    assert parse_bool("k", value) is expected


def test_parse_bool_rejects() -> None:
    with pytest.raises(ConfigError, match="k: expected a boolean"):
        parse_bool("k", "yes")
