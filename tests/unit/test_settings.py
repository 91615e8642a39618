"""The one table of ``ordered.`` settings: both wrappers read it, each default once."""

from __future__ import annotations

import dataclasses
import logging

import pytest

from coordinator.kernel.errors import ConfigError
from ordered.consumer_config import CONSUMER_KEYS, ConsumerSettings, split_consumer_config
from ordered.producer.config import PRODUCER_KEYS, ProducerSettings, split_producer_config
from ordered.settings import REMOVED, SETTINGS, Role, parse_settings

CONNECT = {"ordered.zookeeper.connect": "zk:2181"}


def test_every_key_is_unique_and_prefixed() -> None:
    keys = [s.key for s in SETTINGS]
    attrs = [s.attr for s in SETTINGS]
    assert len(keys) == len(set(keys))
    assert len(attrs) == len(set(attrs))
    assert all(k.startswith("ordered.") for k in keys)


@pytest.mark.parametrize(
    ("cls", "role"), [(ProducerSettings, Role.PRODUCER), (ConsumerSettings, Role.CONSUMER)]
)
def test_dataclass_defaults_come_from_the_table(cls: type, role: Role) -> None:
    fields = {f.name: f for f in dataclasses.fields(cls)}
    table = {s.attr: s for s in SETTINGS if s.role & role}
    assert set(fields) == set(table)
    for name, setting in table.items():
        if setting.default is None:
            assert fields[name].default is dataclasses.MISSING
        else:
            assert fields[name].default == setting.default_for(role), name


def test_a_consumer_gets_its_own_session_timeout_default_and_others_the_clients_one() -> None:
    # An idle consumer's only ZooKeeper requests are its session's pings (a third of it).
    assert split_consumer_config(CONNECT).ordered.zookeeper_session_timeout_ms == 18_000
    assert split_producer_config(CONNECT).ordered.zookeeper_session_timeout_ms == 10_000
    assert CONSUMER_KEYS["ordered.zookeeper.session.timeout.ms"].endswith("(default 18000)")
    assert PRODUCER_KEYS["ordered.zookeeper.session.timeout.ms"].endswith("(default 10000)")
    given = {**CONNECT, "ordered.zookeeper.session.timeout.ms": 12_000}
    assert split_consumer_config(given).ordered.zookeeper_session_timeout_ms == 12_000


def test_shared_settings_have_one_name_in_both_wrappers() -> None:
    shared = {
        "ordered.zookeeper.root": "/r",
        "ordered.zookeeper.session.timeout.ms": 1234,
        "ordered.epoch.header.name": "h",
    }
    producer = split_producer_config({**CONNECT, **shared}).ordered
    consumer = split_consumer_config({**CONNECT, **shared}).ordered
    for attr in ("zookeeper_root", "zookeeper_session_timeout_ms", "epoch_header_name"):
        assert getattr(producer, attr) == getattr(consumer, attr)
    assert consumer.header_name == "h"  # the consumer's old attribute name still works


def test_keys_are_documented_per_role() -> None:
    assert "ordered.epoch.header" in PRODUCER_KEYS
    assert "ordered.epoch.header" not in CONSUMER_KEYS
    assert "ordered.key.audit" in CONSUMER_KEYS
    assert "ordered.key.audit" not in PRODUCER_KEYS
    assert PRODUCER_KEYS["ordered.epoch.header"].endswith("(default false)")


def test_a_setting_of_the_other_wrapper_is_unknown() -> None:
    with pytest.raises(ConfigError, match=r"unknown setting\(s\) ordered\.key\.audit"):
        parse_settings({**CONNECT, "ordered.key.audit": True}, Role.PRODUCER)
    with pytest.raises(ConfigError, match=r"ordered\.epoch\.header\b"):
        split_consumer_config({**CONNECT, "ordered.epoch.header": True})


@pytest.mark.parametrize("value", [True, False])
def test_a_removed_setting_is_ignored_with_a_warning_that_gives_its_reason(
    value: bool, caplog: pytest.LogCaptureFixture
) -> None:
    """``ordered.fetch.favour.sources`` went with the sources-first favour: whatever its
    value, a configuration of the release before still starts (a rolling upgrade), the
    key reaches neither the settings nor librdkafka, and the log says to delete it."""
    key = "ordered.fetch.favour.sources"
    assert key in REMOVED and key not in CONSUMER_KEYS
    with caplog.at_level(logging.WARNING, logger="ordered.settings"):
        split = split_consumer_config({**CONNECT, key: value})
    assert key not in split.kafka
    assert "ordered.fetch.favour.sources is no longer a setting" in caplog.text
    assert "delete it" in caplog.text
    for role in (Role.PRODUCER, Role.SOURCE):
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="ordered.settings"):
            parse_settings({**CONNECT, key: value}, role)
        assert "favour was removed" in caplog.text


def test_ordered_keys_never_reach_librdkafka() -> None:
    every = {s.key: s.default for s in SETTINGS if s.default is not None}
    producer = split_producer_config(
        {**CONNECT, **{k: v for k, v in every.items() if k in PRODUCER_KEYS}}
    )
    consumer = split_consumer_config(
        {**CONNECT, **{k: v for k, v in every.items() if k in CONSUMER_KEYS}}
    )
    assert not any(k.startswith("ordered.") for k in producer.kafka)
    assert not any(k.startswith("ordered.") for k in consumer.kafka)


def test_a_view_that_drifts_from_the_table_fails_when_declared() -> None:
    from ordered.settings import setting_field, settings_view

    with pytest.raises(TypeError, match="differ from the settings table"):

        @settings_view(Role.PRODUCER)
        @dataclasses.dataclass(frozen=True)
        class Missing:  # no epoch_header_name
            zookeeper_connect: str = setting_field("zookeeper_connect")
            zookeeper_root: str = setting_field("zookeeper_root")
            zookeeper_session_timeout_ms: int = setting_field("zookeeper_session_timeout_ms")
            epoch_header: bool = setting_field("epoch_header")

    with pytest.raises(TypeError, match="declare it with setting_field"):

        @settings_view(Role.PRODUCER)
        @dataclasses.dataclass(frozen=True)
        class Restated:
            zookeeper_connect: str
            zookeeper_root: str = "/elsewhere"
            zookeeper_session_timeout_ms: int = 1
            epoch_header: bool = False
            epoch_header_name: str = "h"
            hooks: tuple[object, ...] = ()
            zookeeper_auth: object = None
            switch_mode: str = "track"
            zookeeper_ssl_client_enable: bool = False
            zookeeper_ssl_ca_location: str = ""
            zookeeper_ssl_certificate_location: str = ""
            zookeeper_ssl_key_location: str = ""
            zookeeper_ssl_endpoint_identification_algorithm: str = "https"
