"""Options of the ``ordered-kafka`` source and sink, checked as Spark's Kafka source checks them.

Names, defaults and the wording of the errors follow Spark's ``KafkaSourceProvider``
(``connector/kafka-0-10-sql``), so a query moves between ``format("kafka")`` and
``format("ordered-kafka")`` unchanged. Option names are case-insensitive, as in Spark.
Every check runs when the query is defined (``load()``), and each error names the option
that is wrong.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from coordinator.kernel.errors import ConfigError
from coordinator.kernel.kafka_security import translate
from coordinator.kernel.zk_auth import ZkAuth
from coordinator.kernel.zk_tls import NO_TLS, ZkTls
from ordered.settings import ORDERED_PREFIX, Role, default, parse_settings

__all__ = [
    "EARLIEST",
    "LATEST",
    "STRATEGIES",
    "SinkOptions",
    "SourceOptions",
    "parse_duration_ms",
    "parse_sink_options",
    "parse_source_options",
    "parse_starting_offsets",
]

EARLIEST: Final = -2
"""Offset of a partition in ``startingOffsets`` JSON meaning its log start."""

LATEST: Final = -1
"""Offset of a partition in ``startingOffsets`` JSON meaning its end."""

STRATEGIES: Final = ("subscribe", "subscribepattern", "assign")
"""The ways to name the topics read; exactly one must be given (Spark's order)."""

# Kafka client settings Spark refuses, with its reasons.
_REFUSED: Final[Mapping[str, str]] = {
    "kafka.key.deserializer": (
        "Kafka option 'key.deserializer' is not supported as keys are deserialized as byte "
        "arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly deserialize "
        "the keys."
    ),
    "kafka.value.deserializer": (
        "Kafka option 'value.deserializer' is not supported as values are deserialized as "
        "byte arrays with ByteArrayDeserializer. Use DataFrame operations to explicitly "
        "deserialize the values."
    ),
    "kafka.enable.auto.commit": "Kafka option 'enable.auto.commit' is not supported",
    "kafka.interceptor.classes": "Kafka option 'interceptor.classes' is not supported",
}

_AUTO_OFFSET_RESET: Final = (
    "Kafka option 'auto.offset.reset' is not supported. Instead set the source option "
    "'startingOffsets' to 'earliest' or 'latest' to specify where to start. Structured "
    "Streaming manages which offsets are consumed internally, rather than relying on the "
    "kafkaConsumer to do it. This will ensure that no data is missed when new "
    "topics/partitions are dynamically subscribed. Note that 'startingOffsets' only applies "
    "when a new Streaming query is started, and that resuming will always pick up from where "
    "the query left off."
)


_DURATION: Final = re.compile(r"^\s*(\d+)\s*(ms|s|m|min|h|d)?\s*$", re.IGNORECASE)
_UNIT_MS: Final[Mapping[str, int]] = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "min": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
}


@dataclass(frozen=True)
class SourceOptions:
    """The checked options of one ``ordered-kafka`` read.

    Attributes:
        strategy: ``"subscribe"``, ``"subscribepattern"`` or ``"assign"``.
        topics: The topics of ``subscribe`` (in order, without duplicates).
        pattern: The regular expression of ``subscribePattern`` (whole-name match).
        assigned: Topic -> partitions of ``assign``.
        starting: ``"earliest"``, ``"latest"`` or topic -> {partition: offset}
            (``-2`` earliest, ``-1`` latest).
        ending: As ``starting``, for batch reads only (``"latest"`` by default).
        fail_on_data_loss: ``failOnDataLoss``.
        include_headers: ``includeHeaders``.
        min_partitions: ``minPartitions`` (``None`` when not set).
        max_offsets: ``maxOffsetsPerTrigger`` (``None`` when not set).
        min_offsets: ``minOffsetsPerTrigger`` (``None`` when not set).
        max_trigger_delay_ms: ``maxTriggerDelay`` in milliseconds (15 minutes by default).
        kafka: librdkafka settings from the ``kafka.*`` options, prefix stripped.
        zookeeper_connect: ``ordered.zookeeper.connect``, ``None`` when topics are read
            as plain Kafka topics (nothing is adopted then).
        zookeeper_root: ``ordered.zookeeper.root``.
        zookeeper_session_timeout_ms: ``ordered.zookeeper.session.timeout.ms``.
        zookeeper_auth: ``ordered.zookeeper.auth`` (its ``repr`` hides the password).
        zookeeper_tls: ``ordered.zookeeper.ssl.*``: ZooKeeper over TLS, checked as a whole.
        poll_timeout_ms: ``kafkaConsumer.pollTimeoutMs``: how long a task waits for a
            record it knows exists (120 s, Spark's ``spark.network.timeout``).
        group_id_prefix: ``groupIdPrefix`` of the generated consumer group ids.
    """

    strategy: str
    topics: tuple[str, ...] = ()
    pattern: str = ""
    assigned: Mapping[str, tuple[int, ...]] = field(default_factory=dict)
    starting: str | Mapping[str, Mapping[int, int]] = "latest"
    ending: str | Mapping[str, Mapping[int, int]] = "latest"
    fail_on_data_loss: bool = True
    include_headers: bool = False
    min_partitions: int | None = None
    max_offsets: int | None = None
    min_offsets: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    kafka: Mapping[str, str] = field(default_factory=dict)
    zookeeper_connect: str | None = None
    zookeeper_root: str = default("zookeeper_root")
    zookeeper_session_timeout_ms: int = default("zookeeper_session_timeout_ms")
    zookeeper_auth: ZkAuth = default("zookeeper_auth")
    zookeeper_tls: ZkTls = NO_TLS
    poll_timeout_ms: int = 120_000
    group_id_prefix: str = "spark-kafka-source"

    @property
    def bootstrap_servers(self) -> str:
        """``kafka.bootstrap.servers``."""
        return self.kafka["bootstrap.servers"]


@dataclass(frozen=True)
class SinkOptions:
    """The checked options of one ``ordered-kafka`` write.

    Attributes:
        topic: The ``topic`` option (``None``: every row names its topic).
        producer: The ``OrderedProducer`` configuration: ``kafka.*`` with the prefix
            stripped, plus every ``ordered.*`` option as given.
    """

    topic: str | None
    producer: Mapping[str, str]


def _lower(options: Mapping[str, Any]) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, value in options.items():
        out[str(key).lower()] = str(value)
    return out


def _bool(name: str, value: str) -> bool:
    text = value.strip().lower()
    if text == "true":
        return True
    if text == "false":
        return False
    raise ConfigError(f"option '{name}' must be 'true' or 'false', got '{value}'")


def _positive_int(name: str, value: str, what: str = "a positive integer") -> int:
    try:
        number = int(value.strip())
    except ValueError:
        raise ConfigError(f"option '{name}' must be {what}, got '{value}'") from None
    if number <= 0:
        raise ConfigError(f"option '{name}' must be {what}, got '{value}'")
    return number


def parse_duration_ms(name: str, value: str) -> int:
    """Parse a Spark time string (``15m``, ``30s``, ``500ms``, bare number = ms).

    Raises:
        ConfigError: Not a duration; the message names ``name``.
    """
    match = _DURATION.match(value)
    if match is None:
        raise ConfigError(
            f"option '{name}' must be a duration such as '15m' or '30s', got '{value}'"
        )
    unit = (match.group(2) or "ms").lower()
    return int(match.group(1)) * _UNIT_MS[unit]


def parse_starting_offsets(name: str, value: str) -> str | dict[str, dict[int, int]]:
    """Parse ``startingOffsets``/``endingOffsets``: ``earliest``, ``latest`` or Spark's JSON.

    JSON is ``{"topic": {"0": 23, "1": -2}}``: ``-2`` means earliest, ``-1`` latest.

    Raises:
        ConfigError: Anything else; the message names the option and shows the shape.
    """
    text = value.strip()
    lowered = text.lower()
    if lowered in ("earliest", "latest"):
        return lowered
    example = '{"topicA":{"0":23,"1":-1},"topicB":{"0":-2}}'
    if not text.startswith("{"):
        raise ConfigError(
            f"option '{name}' must be 'earliest', 'latest' or JSON such as {example}, got '{value}'"
        )
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"option '{name}': expected e.g. {example}, got '{value}' ({exc})"
        ) from None
    out: dict[str, dict[int, int]] = {}
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"option '{name}': expected e.g. {example}, got '{value}'")
    for topic, partitions in parsed.items():
        if not isinstance(partitions, dict):
            raise ConfigError(f"option '{name}': expected e.g. {example}, got '{value}'")
        offsets: dict[int, int] = {}
        for partition, offset in partitions.items():
            try:
                number = int(partition)
            except ValueError:
                raise ConfigError(
                    f"option '{name}': partition '{partition}' of topic '{topic}' is not a number"
                ) from None
            if isinstance(offset, bool) or not isinstance(offset, int) or offset < EARLIEST:
                raise ConfigError(
                    f"option '{name}': offset {offset!r} of {topic}-{partition} must be an "
                    "integer >= -2 (-2 earliest, -1 latest)"
                )
            offsets[number] = offset
        out[str(topic)] = offsets
    return out


def _parse_assign(value: str) -> dict[str, tuple[int, ...]]:
    text = value.strip()
    if not text.startswith("{"):
        raise ConfigError(
            f"No topicpartitions to assign as specified value for option 'assign' is '{value}'"
        )
    example = '{"topicA":[0,1],"topicB":[0,1]}'
    try:
        parsed = json.loads(text)
    except json.JSONDecodeError:
        raise ConfigError(f"option 'assign': expected e.g. {example}, got '{value}'") from None
    if not isinstance(parsed, dict) or not parsed:
        raise ConfigError(f"option 'assign': expected e.g. {example}, got '{value}'")
    out: dict[str, tuple[int, ...]] = {}
    for topic, partitions in parsed.items():
        if not isinstance(partitions, list) or not all(
            isinstance(p, int) and not isinstance(p, bool) and p >= 0 for p in partitions
        ):
            raise ConfigError(f"option 'assign': expected e.g. {example}, got '{value}'")
        out[str(topic)] = tuple(sorted(set(partitions)))
    return out


def _client_settings(low: Mapping[str, str], options: Mapping[str, Any]) -> dict[str, str]:
    """The ``kafka.*`` options with the prefix stripped, in librdkafka's names.

    Security settings are taken as Spark's Kafka source takes them (Java client
    names: ``kafka.sasl.jaas.config``, ``kafka.ssl.truststore.location``...) and
    translated by :func:`coordinator.kernel.kafka_security.translate`; librdkafka's own names
    (``kafka.sasl.username``...) pass through unchanged.
    """
    out: dict[str, str] = {}
    for key, value in options.items():
        name = str(key)
        if name.lower().startswith("kafka."):
            out[name[len("kafka.") :].lower()] = str(value)
    kafka, _ = translate(out)
    return kafka


def _ordered(low: Mapping[str, str], role: Role, *, require: bool) -> dict[str, Any]:
    """The ``ordered.*`` options, checked by the one settings table as the clients check them.

    Option names are case-insensitive (Spark's rule); the table's keys are lower case.
    """
    given = {key: value for key, value in low.items() if key.startswith(ORDERED_PREFIX)}
    return parse_settings(given, role, require=require)


def parse_source_options(options: Mapping[str, Any], *, streaming: bool | None) -> SourceOptions:
    """Check the options of a read, as Spark's Kafka source does; return them parsed.

    Args:
        options: The reader's options (any case).
        streaming: ``True`` for ``readStream``, ``False`` for a batch ``read``, ``None``
            when not known yet (``load()``: only the checks common to both run).

    Raises:
        ConfigError: An option is missing, unknown, malformed or conflicts with another;
            the message names it.
    """
    low = _lower(options)
    given = [s for s in STRATEGIES if s in low]
    if not given:
        raise ConfigError(
            "One of the following options must be specified for Kafka source: "
            "subscribe, subscribePattern, assign. See the docs for more details."
        )
    if len(given) > 1:
        raise ConfigError(
            "Only one of the following options can be specified for Kafka source: "
            "subscribe, subscribePattern, assign (got "
            + ", ".join(repr(g) for g in given)
            + "). See the docs for more details."
        )
    strategy = given[0]
    topics: tuple[str, ...] = ()
    pattern = ""
    assigned: dict[str, tuple[int, ...]] = {}
    if strategy == "subscribe":
        names = [t.strip() for t in low["subscribe"].split(",") if t.strip()]
        if not names:
            raise ConfigError(
                "No topics to subscribe to as specified value for option 'subscribe' is "
                f"'{low['subscribe']}'"
            )
        topics = tuple(dict.fromkeys(names))
    elif strategy == "subscribepattern":
        pattern = low["subscribepattern"].strip()
        if not pattern:
            raise ConfigError(
                "Pattern to subscribe is empty as specified value for option "
                f"'subscribePattern' is '{low['subscribepattern']}'"
            )
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ConfigError(
                f"option 'subscribePattern': bad pattern '{pattern}': {exc}"
            ) from None
    else:
        assigned = _parse_assign(low["assign"])

    if "kafka.auto.offset.reset" in low:
        raise ConfigError(_AUTO_OFFSET_RESET)
    for key, message in _REFUSED.items():
        if key in low:
            raise ConfigError(message)
    if "kafka.bootstrap.servers" not in low or not low["kafka.bootstrap.servers"].strip():
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka consumer"
        )
    settings = _ordered(low, Role.SOURCE, require=False)

    if streaming is True and "endingoffsets" in low:
        raise ConfigError("ending offset not valid in streaming queries (option 'endingOffsets')")
    for unsupported in (
        "startingtimestamp",
        "startingoffsetsbytimestamp",
        "endingtimestamp",
        "endingoffsetsbytimestamp",
    ):
        if unsupported in low:
            raise ConfigError(f"option '{unsupported}' is not supported by ordered-kafka")
    default_start = "latest" if streaming else "earliest"
    starting = parse_starting_offsets("startingOffsets", low.get("startingoffsets", default_start))
    ending = parse_starting_offsets("endingOffsets", low.get("endingoffsets", "latest"))
    if streaming is False:
        if starting == "latest":
            raise ConfigError(
                "starting offset can't be latest for batch queries on Kafka (option "
                "'startingOffsets')"
            )
        if ending == "earliest":
            raise ConfigError(
                "ending offset can't be earliest for batch queries on Kafka (option "
                "'endingOffsets')"
            )
    min_partitions = None
    if "minpartitions" in low:
        min_partitions = _positive_int("minPartitions", low["minpartitions"])
    max_offsets = None
    if "maxoffsetspertrigger" in low:
        max_offsets = _positive_int("maxOffsetsPerTrigger", low["maxoffsetspertrigger"])
    min_offsets = None
    if "minoffsetspertrigger" in low:
        min_offsets = _positive_int("minOffsetsPerTrigger", low["minoffsetspertrigger"])
    if min_offsets is not None and max_offsets is not None and min_offsets > max_offsets:
        raise ConfigError(
            f"The value of minOffsetPerTrigger({min_offsets}) is higher than the "
            f"maxOffsetsPerTrigger({max_offsets})."
        )
    delay = parse_duration_ms("maxTriggerDelay", low.get("maxtriggerdelay", "15m"))
    fail = _bool("failOnDataLoss", low.get("failondataloss", "true"))
    headers = _bool("includeHeaders", low.get("includeheaders", "false"))
    kafka = _client_settings(low, options)
    poll_ms = 120_000
    if "kafkaconsumer.polltimeoutms" in low:
        poll_ms = _positive_int("kafkaConsumer.pollTimeoutMs", low["kafkaconsumer.polltimeoutms"])
    return SourceOptions(
        poll_timeout_ms=poll_ms,
        group_id_prefix=low.get("groupidprefix", "spark-kafka-source").strip()
        or "spark-kafka-source",
        strategy=strategy,
        topics=topics,
        pattern=pattern,
        assigned=assigned,
        starting=starting,
        ending=ending,
        fail_on_data_loss=fail,
        include_headers=headers,
        min_partitions=min_partitions,
        max_offsets=max_offsets,
        min_offsets=min_offsets,
        max_trigger_delay_ms=delay,
        kafka=kafka,
        zookeeper_connect=settings.get("zookeeper_connect"),
        zookeeper_root=settings["zookeeper_root"],
        zookeeper_session_timeout_ms=settings["zookeeper_session_timeout_ms"],
        zookeeper_auth=settings["zookeeper_auth"],
        zookeeper_tls=ZkTls.from_parsed(settings),
    )


def parse_sink_options(options: Mapping[str, Any]) -> SinkOptions:
    """Check the options of a write; return the producer configuration.

    Raises:
        ConfigError: ``kafka.bootstrap.servers`` or ``ordered.zookeeper.connect`` is
            missing, an ``ordered.*`` option the producer would refuse, or a refused
            Kafka setting is given; the message names it.
    """
    low = _lower(options)
    if "kafka.bootstrap.servers" not in low or not low["kafka.bootstrap.servers"].strip():
        raise ConfigError(
            "Option 'kafka.bootstrap.servers' must be specified for configuring Kafka producer"
        )
    for key in ("kafka.key.serializer", "kafka.value.serializer"):
        if key in low:
            raise ConfigError(
                f"Kafka option '{key[6:]}' is not supported as keys and values are written as "
                "byte arrays; use DataFrame operations to serialize them"
            )
    if not low.get("ordered.zookeeper.connect", "").strip():
        raise ConfigError(
            "Option 'ordered.zookeeper.connect' must be specified for writing to ordered-kafka"
        )
    # Refused at definition, not in a task.
    ZkTls.from_parsed(_ordered(low, Role.PRODUCER, require=True))
    producer: dict[str, str] = _client_settings(low, options)
    for key, value in options.items():
        if str(key).lower().startswith("ordered."):
            producer[str(key).lower()] = str(value)
    topic = low.get("topic")
    return SinkOptions(topic=topic.strip() if topic and topic.strip() else None, producer=producer)
