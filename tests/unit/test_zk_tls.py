"""The ``ordered.zookeeper.ssl.*`` settings: checked at the door, handed to kazoo as such."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from coordinator.kernel.errors import ConfigError
from coordinator.kernel.zk import make_client
from coordinator.kernel.zk_tls import (
    CA,
    CERTIFICATE,
    ENABLE,
    IDENTIFICATION,
    KEY,
    NO_TLS,
    TLS_ATTRS,
    TLS_KEYS,
    ZkTls,
    parse_identification,
    parse_pem_file,
)
from ordered.consumer_config import split_consumer_config
from ordered.producer.config import split_producer_config
from ordered.settings import SETTINGS, Role, keys_for

CONNECT = {"ordered.zookeeper.connect": "127.0.0.1:2181"}


def _system_ca() -> str:
    paths = ssl.get_default_verify_paths()
    for candidate in (paths.cafile, paths.openssl_cafile):
        if candidate and Path(candidate).is_file():
            return candidate
    pytest.skip("no system CA bundle to stand for a PEM CA file")


def test_every_key_is_in_the_settings_table_for_every_reader() -> None:
    table = {s.key: s.attr for s in SETTINGS}
    assert [table[k] for k in TLS_KEYS] == list(TLS_ATTRS)
    for role in (Role.PRODUCER, Role.CONSUMER, Role.SOURCE):
        assert set(TLS_KEYS) <= set(keys_for(role))


def test_a_file_setting_names_a_readable_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match=f"{CA}: no such file: '/nonexistent/ca.pem'"):
        parse_pem_file(CA, "/nonexistent/ca.pem")
    with pytest.raises(ConfigError, match="no such file"):
        parse_pem_file(CA, str(tmp_path))  # a directory
    with pytest.raises(ConfigError, match="no such file"):
        parse_pem_file(CA, "a\x00b")
    with pytest.raises(ConfigError, match="expected the path of a PEM file"):
        parse_pem_file(CA, 3)
    assert parse_pem_file(CA, "  ") == ""  # unset, as an empty property is in Kafka
    ca = tmp_path / "ca.pem"
    ca.write_text("x")
    assert parse_pem_file(CA, f" {ca} ") == str(ca)


def test_identification_is_https_or_none() -> None:
    assert parse_identification(IDENTIFICATION, "HTTPS") == "https"
    assert parse_identification(IDENTIFICATION, "") == "none"
    with pytest.raises(ConfigError, match=IDENTIFICATION):
        parse_identification(IDENTIFICATION, "http")


def test_the_combination_is_checked_at_the_door(tmp_path: Path) -> None:
    ca = _system_ca()
    # A CA without enable is a forgotten switch, not a silent plain connection.
    with pytest.raises(ConfigError, match=f"{CA} set but {ENABLE} is false"):
        split_producer_config({**CONNECT, CA: ca})
    # Half a client certificate.
    with pytest.raises(ConfigError, match=f"{CERTIFICATE} and {KEY} go together"):
        split_consumer_config({**CONNECT, ENABLE: "true", CERTIFICATE: ca, "group.id": "g"})
    # A file that holds no certificate.
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match=f"{CA}: .* holds no PEM CA certificate"):
        split_producer_config({**CONNECT, ENABLE: True, CA: str(junk)})
    # A certificate and "key" that are not a pair.
    with pytest.raises(ConfigError, match="do not load as a PEM certificate"):
        ZkTls.of(True, ca, ca, str(junk))
    # None of them reaches librdkafka.
    split = split_producer_config({**CONNECT, ENABLE: "true", CA: ca})
    assert not any(k.startswith("ordered.") for k in split.kafka)
    assert split.ordered.zookeeper_tls == ZkTls(True, ca, "", "", "https")


def test_kazoo_gets_the_settings() -> None:
    ca = _system_ca()
    assert NO_TLS.kazoo_arguments() == {} and not NO_TLS
    tls = ZkTls.of(True, ca, identification="none")
    assert tls.kazoo_arguments() == {
        "use_ssl": True,
        "verify_certs": True,
        "check_hostname": False,
        "ca": ca,
    }
    client = make_client("127.0.0.1:2181", tls=ZkTls.of(True, ca))
    assert client.use_ssl and client.verify_certs and client.check_hostname and client.ca == ca
    plain = make_client("127.0.0.1:2181")
    assert not plain.use_ssl


def test_the_spark_source_and_sink_take_them_as_options() -> None:
    from spark_source.options import parse_sink_options, parse_source_options

    ca = _system_ca()
    base = {
        "kafka.bootstrap.servers": "127.0.0.1:9092",
        "subscribe": "t",
        "ordered.zookeeper.connect": "127.0.0.1:2181",
    }
    read = parse_source_options({**base, ENABLE: "true", CA: ca}, streaming=False)
    assert read.zookeeper_tls == ZkTls(True, ca, "", "", "https")
    assert parse_source_options(base, streaming=False).zookeeper_tls == NO_TLS
    with pytest.raises(ConfigError, match=f"{CA}: no such file"):
        parse_source_options({**base, ENABLE: "true", CA: "/nonexistent"}, streaming=False)
    # The sink: refused when the write is defined, not in a task.
    sink = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
    sink["ordered.zookeeper.connect"] = "127.0.0.1:2181"
    with pytest.raises(ConfigError, match=f"{CA} set but {ENABLE} is false"):
        parse_sink_options({**sink, CA: ca})
