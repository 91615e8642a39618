"""Parsing of the OrderedConsumer configuration (pure)."""

from __future__ import annotations

import pytest

from coordinator.kernel.errors import ConfigError
from ordered.consumer_config import (
    FETCH_QUEUE_BACKOFF_MS,
    METADATA_REFRESH_MS,
    ConsumerSettings,
    parse_bool,
    split_consumer_config,
)

BASE = {"bootstrap.servers": "b:9092", "group.id": "g", "ordered.zookeeper.connect": "zk:2181"}


def test_defaults_and_stripping() -> None:
    config = split_consumer_config(BASE)
    assert config.kafka == {
        "bootstrap.servers": "b:9092",
        "group.id": "g",
        "enable.auto.offset.store": False,
        "topic.metadata.refresh.interval.ms": METADATA_REFRESH_MS,
        "fetch.queue.backoff.ms": FETCH_QUEUE_BACKOFF_MS,
    }
    assert FETCH_QUEUE_BACKOFF_MS == 10
    assert config.ordered == ConsumerSettings("zk:2181")
    assert config.store_offsets and config.auto_commit and config.group_id == "g"
    assert BASE == {
        "bootstrap.servers": "b:9092",
        "group.id": "g",
        "ordered.zookeeper.connect": "zk:2181",
    }


def test_every_setting_parsed() -> None:
    config = split_consumer_config(
        {
            **BASE,
            "enable.auto.offset.store": "false",
            "enable.auto.commit": False,
            "topic.metadata.refresh.interval.ms": 300000,
            "fetch.queue.backoff.ms": 1000,
            "ordered.zookeeper.root": "/x/y",
            "ordered.zookeeper.session.timeout.ms": "4000",
            "ordered.violation.policy": "RAISE",
            "ordered.epoch.header.audit": "false",
            "ordered.epoch.header.name": "e",
            "ordered.key.audit": 0,
            "ordered.gate.poll.interval.ms": 25,
            "ordered.audit.every": "16",
        },
        {"group.id": "override"},
    )
    assert config.ordered == ConsumerSettings(
        "zk:2181", "/x/y", 4000, "raise", False, "e", False, 25, 16
    )
    assert not config.store_offsets and not config.auto_commit
    assert config.group_id == "override"
    assert config.kafka["topic.metadata.refresh.interval.ms"] == 300000
    assert config.kafka["fetch.queue.backoff.ms"] == 1000  # the user's own value is kept


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"ordered.zookeeper.conect": "x"}, "unknown setting"),
        ({"ordered.violation.policy": "ignore"}, "violation.policy"),
        ({"ordered.gate.poll.interval.ms": 0}, "must be >= 1"),
        ({"ordered.audit.every": 0}, "must be >= 1"),
        ({"ordered.gate.poll.interval.ms": True}, "expected an integer"),
        ({"ordered.zookeeper.root": "rel"}, "absolute znode path"),
        ({"ordered.epoch.header.audit": "maybe"}, "expected a boolean"),
        ({"enable.auto.commit": "perhaps"}, "expected a boolean"),
        ({"ordered.commit.mode": "manual"}, "expected one of auto, application"),
        ({"ordered.commit.mode": "application"}, "enable.auto.commit must be false"),
    ],
)
def test_bad_settings(extra: dict[str, object], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        split_consumer_config({**BASE, **extra})


def test_application_commit_mode() -> None:
    config = split_consumer_config(
        {**BASE, "enable.auto.commit": "false", "ordered.commit.mode": "Application"}
    )
    assert config.ordered.commit_mode == "application"
    assert "ordered.commit.mode" not in config.kafka
    assert split_consumer_config(BASE).ordered.commit_mode == "auto"


def test_connect_required_and_mapping_required() -> None:
    with pytest.raises(ConfigError, match="required"):
        split_consumer_config({"group.id": "g"})
    with pytest.raises(ConfigError, match="must be a dict"):
        split_consumer_config([("a", "b")])  # type: ignore[arg-type]
    with pytest.raises(ConfigError, match="keys must be strings"):
        split_consumer_config({**BASE, 1: "x"})  # type: ignore[dict-item]


def test_parse_bool() -> None:
    assert parse_bool("k", "TRUE") and parse_bool("k", 1) and not parse_bool("k", "f")
    with pytest.raises(ConfigError):
        parse_bool("k", 2)
