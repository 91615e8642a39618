"""The Spark source and sink and both clients accept and refuse the same ``ordered.`` values.

Each reader parses its ``ordered.`` options through the one table (ordered.settings);
a value one of them takes and another refuses would make a query or a client fail
only after it moved between them.
"""

from __future__ import annotations

from typing import Any

import pytest

from coordinator.kernel.errors import ConfigError
from ordered.consumer_config import split_consumer_config
from ordered.producer.config import split_producer_config
from spark_source.options import parse_sink_options, parse_source_options

CONNECT = "zk:2181"
KAFKA = {"kafka.bootstrap.servers": "127.0.0.1:9092"}

# Values Spark would pass (always strings) for the settings all four readers share.
SHARED: dict[str, list[str]] = {
    "ordered.zookeeper.root": ["/ordered", "/a/b", "/", "ordered", "/a/", "", "  /x  "],
    "ordered.zookeeper.session.timeout.ms": ["1", "10000", " 250 ", "0", "-5", "1.5", "abc", ""],
    "ordered.zookeeper.connect": ["zk:2181", "a:1,b:2/chroot", " zk:1 ", "", "   "],
}
# Settings of the producer, which the Spark sink passes to it.
PRODUCER_ONLY: dict[str, list[str]] = {
    "ordered.epoch.header": ["true", "false", "T", "f", "1", "0", "TRUE", "yes", "2", ""],
    "ordered.epoch.header.name": ["ordered.epoch", "h", "", " "],
}


def _outcome(read: Any) -> tuple[str, Any]:
    try:
        return ("ok", read())
    except ConfigError:
        return ("refused", None)


def _with_connect(key: str, value: str) -> dict[str, str]:
    given = {"ordered.zookeeper.connect": CONNECT}
    given[key] = value
    return given


def _source(key: str, value: str) -> Any:
    options = parse_source_options(
        {**KAFKA, "subscribe": "t", **_with_connect(key, value)}, streaming=True
    )
    return {
        "ordered.zookeeper.connect": options.zookeeper_connect,
        "ordered.zookeeper.root": options.zookeeper_root,
        "ordered.zookeeper.session.timeout.ms": options.zookeeper_session_timeout_ms,
    }[key]


def _sink(key: str, value: str) -> Any:
    # The sink checks at definition time; the producer it builds parses the values.
    sink = parse_sink_options({**KAFKA, **_with_connect(key, value)})
    return _producer(key, sink.producer[key])


def _attr(key: str) -> str:
    return {
        "ordered.zookeeper.connect": "zookeeper_connect",
        "ordered.zookeeper.root": "zookeeper_root",
        "ordered.zookeeper.session.timeout.ms": "zookeeper_session_timeout_ms",
        "ordered.epoch.header": "epoch_header",
        "ordered.epoch.header.name": "epoch_header_name",
    }[key]


def _producer(key: str, value: str) -> Any:
    return getattr(split_producer_config(_with_connect(key, value)).ordered, _attr(key))


def _consumer(key: str, value: str) -> Any:
    return getattr(split_consumer_config(_with_connect(key, value)).ordered, _attr(key))


@pytest.mark.parametrize(("key", "value"), [(k, v) for k, values in SHARED.items() for v in values])
def test_the_shared_settings_agree_everywhere(key: str, value: str) -> None:
    outcomes = {
        "source": _outcome(lambda: _source(key, value)),
        "sink": _outcome(lambda: _sink(key, value)),
        "producer": _outcome(lambda: _producer(key, value)),
        "consumer": _outcome(lambda: _consumer(key, value)),
    }
    assert len(set(outcomes.values())) == 1, outcomes


@pytest.mark.parametrize(
    ("key", "value"), [(k, v) for k, values in PRODUCER_ONLY.items() for v in values]
)
def test_the_sink_and_the_producer_agree(key: str, value: str) -> None:
    assert _outcome(lambda: _sink(key, value)) == _outcome(lambda: _producer(key, value))


def test_both_readers_refuse_a_typo_naming_it() -> None:
    for read in (_source, _sink, _producer, _consumer):
        with pytest.raises(ConfigError, match=r"ordered\.zookeeper\.typo"):
            read("ordered.zookeeper.typo", "x")


def test_some_values_are_refused_and_some_accepted() -> None:
    # Guards the test itself: both outcomes occur, so agreement is not vacuous.
    outcomes = {
        _outcome(lambda k=k, v=v: _producer(k, v))[0]  # type: ignore[misc]
        for k, values in SHARED.items()
        for v in values
    }
    assert outcomes == {"ok", "refused"}
