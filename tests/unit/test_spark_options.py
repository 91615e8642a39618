"""The Spark source's option checks: Spark's names, defaults and errors (no Spark needed)."""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.kernel.errors import ConfigError
from spark_source.options import parse_sink_options, parse_source_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "subscribe": "t"}


def parse(streaming: bool | None = True, **extra: Any) -> Any:
    options = dict(BASE)
    options.update(extra)
    given = {k: v for k, v in options.items() if v is not None}
    return parse_source_options(given, streaming=streaming)


def test_defaults_mirror_spark() -> None:
    options = parse()
    assert options.strategy == "subscribe" and options.topics == ("t",)
    assert options.starting == "latest"
    assert options.fail_on_data_loss is True
    assert options.include_headers is False
    assert options.max_offsets is None and options.min_offsets is None
    assert options.max_trigger_delay_ms == 15 * 60_000
    assert options.zookeeper_connect is None and options.zookeeper_root == "/ordered"
    assert parse(streaming=False).starting == "earliest"


def test_names_are_case_insensitive_and_kafka_prefix_is_stripped() -> None:
    options = parse_source_options(
        {
            "KAFKA.BOOTSTRAP.SERVERS": "h:1",
            "Subscribe": "a, b ,a",
            "kafka.client.id": "me",
            "MaxOffsetsPerTrigger": "10",
            "startingOffsets": '{"a":{"0":-2,"1":5},"b":{"0":-1}}',
        },
        streaming=True,
    )
    assert options.topics == ("a", "b")
    assert options.kafka == {"bootstrap.servers": "h:1", "client.id": "me"}
    assert options.max_offsets == 10
    assert options.starting == {"a": {0: -2, 1: 5}, "b": {0: -1}}


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ({"kafka.bootstrap.servers": None}, "kafka.bootstrap.servers"),
        ({"assign": '{"t":[0]}'}, "Only one of the following options"),
        ({"subscribe": None}, "One of the following options must be specified"),
        ({"subscribe": " , "}, "'subscribe'"),
        ({"startingOffsets": "oldest"}, "startingOffsets"),
        ({"startingOffsets": '{"t": {"0": '}, "startingOffsets"),
        ({"startingOffsets": '{"t": {"x": 1}}'}, "startingOffsets"),
        ({"startingOffsets": '{"t": {"0": -3}}'}, "startingOffsets"),
        ({"minOffsetsPerTrigger": "20", "maxOffsetsPerTrigger": "10"}, "minOffsetPerTrigger"),
        ({"maxOffsetsPerTrigger": "0"}, "maxOffsetsPerTrigger"),
        ({"minPartitions": "-1"}, "minPartitions"),
        ({"kafka.auto.offset.reset": "earliest"}, "startingOffsets"),
        ({"kafka.enable.auto.commit": "true"}, "enable.auto.commit"),
        ({"kafka.key.deserializer": "x"}, "key.deserializer"),
        ({"failOnDataLoss": "maybe"}, "failOnDataLoss"),
        ({"maxTriggerDelay": "soon"}, "maxTriggerDelay"),
        ({"ordered.zookeeper.typo": "x"}, "ordered.zookeeper.typo"),
        ({"endingOffsets": "latest"}, "endingOffsets"),
    ],
)
def test_bad_options_fail_naming_the_option(extra: dict[str, Any], message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        parse(**extra)


def test_auto_offset_reset_points_to_starting_offsets() -> None:
    with pytest.raises(ConfigError) as info:
        parse(**{"kafka.auto.offset.reset": "latest"})
    assert "'auto.offset.reset' is not supported" in str(info.value)
    assert "'startingOffsets' to 'earliest' or 'latest'" in str(info.value)


def test_batch_reads_refuse_latest_start_and_earliest_end() -> None:
    with pytest.raises(ConfigError, match="startingOffsets"):
        parse(streaming=False, startingOffsets="latest")
    with pytest.raises(ConfigError, match="endingOffsets"):
        parse(streaming=False, endingOffsets="earliest")
    assert parse(streaming=False, endingOffsets='{"t":{"0":5}}').ending == {"t": {0: 5}}


def test_assign_and_pattern() -> None:
    options = parse(subscribe=None, assign='{"t":[1,0,1]}')
    assert options.strategy == "assign" and options.assigned == {"t": (0, 1)}
    with pytest.raises(ConfigError, match="assign"):
        parse(subscribe=None, assign="t:0")
    assert parse(subscribe=None, subscribePattern="t-.*").pattern == "t-.*"
    with pytest.raises(ConfigError, match="subscribePattern"):
        parse(subscribe=None, subscribePattern="(")


def test_sink_options() -> None:
    sink = parse_sink_options(
        {
            "kafka.bootstrap.servers": "h:1",
            "kafka.linger.ms": "5",
            "ordered.zookeeper.connect": "z:2",
            "topic": " out ",
        }
    )
    assert sink.topic == "out"
    assert sink.producer == {
        "bootstrap.servers": "h:1",
        "linger.ms": "5",
        "ordered.zookeeper.connect": "z:2",
    }
    with pytest.raises(ConfigError, match=r"ordered\.zookeeper\.connect"):
        parse_sink_options({"kafka.bootstrap.servers": "h:1"})
    with pytest.raises(ConfigError, match=r"kafka\.bootstrap\.servers"):
        parse_sink_options({"ordered.zookeeper.connect": "z:2"})


def test_security_options_as_sparks_kafka_source_takes_them() -> None:
    jaas = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required "
        'username="u" password="s3cret";'
    )
    security = {
        "kafka.bootstrap.servers": "h:1",
        "kafka.security.protocol": "SASL_SSL",
        "kafka.sasl.mechanism": "SCRAM-SHA-512",
        "kafka.sasl.jaas.config": jaas,
        "kafka.ssl.truststore.type": "PEM",
        "kafka.ssl.truststore.location": "/ca.pem",
    }
    expected = {
        "bootstrap.servers": "h:1",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "u",
        "sasl.password": "s3cret",
        "ssl.ca.location": "/ca.pem",
    }
    source = parse_source_options(
        {**security, "subscribe": "t", "ordered.zookeeper.auth": "digest:r:zk-s3cret"},
        streaming=False,
    )
    assert dict(source.kafka) == expected
    assert source.zookeeper_auth.user == "r" and "zk-s3cret" not in repr(source)
    sink = parse_sink_options({**security, "ordered.zookeeper.connect": "z:2"})
    assert {k: v for k, v in sink.producer.items() if not k.startswith("ordered.")} == expected
