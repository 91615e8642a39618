"""Split an ``OrderedConsumer`` configuration into librdkafka and ``ordered.*`` settings.

The dict is the one ``confluent_kafka.Consumer`` takes, plus ``ordered.``-prefixed keys
(see :data:`CONSUMER_KEYS`). Every ``ordered.`` key is removed before librdkafka sees
the dict; an undocumented one is a :class:`~coordinator.errors.ConfigError`, so a typo never
silently turns a setting off.

Two librdkafka settings are changed (see :class:`ConsumerConfig`):

* ``enable.auto.offset.store`` is forced to ``false``: librdkafka stores the offset of
  every record it hands to Python, including records a closed gate holds back; the
  wrapper stores the offsets of the records it delivers instead (when the user asked
  for automatic storing).
* ``topic.metadata.refresh.interval.ms`` defaults to :data:`METADATA_REFRESH_MS`
  instead of 5 minutes: librdkafka's group rejoins onto new partitions only at its own
  periodic refresh (a ``list_topics`` call from the application updates the cache but
  does not trigger the rejoin; measured with librdkafka 2.16), and an expansion must
  be picked up within seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from coordinator.errors import ConfigError

__all__ = [
    "CONSUMER_KEYS",
    "METADATA_REFRESH_MS",
    "VIOLATION_POLICIES",
    "ConsumerConfig",
    "ConsumerSettings",
    "parse_bool",
    "split_consumer_config",
]

CONSUMER_KEYS: Final[Mapping[str, str]] = {
    "ordered.zookeeper.connect": "ZooKeeper connect string, optionally with a chroot (required)",
    "ordered.zookeeper.root": "root znode of the layout store (default /ordered)",
    "ordered.zookeeper.session.timeout.ms": "ZooKeeper session timeout (default 10000)",
    "ordered.violation.policy": "what to do with a misplaced record: log or raise (default log)",
    "ordered.epoch.header.audit": "check each record's epoch header (default false)",
    "ordered.epoch.header.name": "name of the epoch header (default ordered.epoch)",
    "ordered.key.audit": "check each keyed record's partition against the layout (default true)",
    "ordered.gate.poll.interval.ms": "how often a closed gate is re-checked (default 100)",
    "ordered.positions": "open gates sooner through the position service (default true)",
    "ordered.audit.every": "audit one record in N on the fast path (default 16; 1: every record)",
}
"""The documented ``ordered.`` settings of the consumer and what each one means."""

METADATA_REFRESH_MS: Final = 2000
"""The default ``topic.metadata.refresh.interval.ms`` of an ordered consumer."""

VIOLATION_POLICIES: Final = ("log", "raise")
"""Valid values of ``ordered.violation.policy``."""


ORDERED_PREFIX: Final = "ordered."

_TRUE: Final = frozenset({"true", "t", "1"})
_FALSE: Final = frozenset({"false", "f", "0"})


def parse_bool(key: str, value: Any) -> bool:
    """Parse a boolean setting the way librdkafka does.

    Args:
        key: The setting's name, for the error message.
        value: A ``bool``, the integers 0/1, or ``true``/``t``/``1``/``false``/``f``/``0``
            (any case).

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


def _int(key: str, value: Any, minimum: int) -> int:
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


def _str(key: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"{key}: expected a non-empty string, got {value!r}")
    return value.strip()


@dataclass(frozen=True, slots=True)
class ConsumerSettings:
    """The parsed ``ordered.*`` settings of a consumer.

    Attributes:
        zookeeper_connect: ``ordered.zookeeper.connect``; may end in a chroot path.
        zookeeper_root: ``ordered.zookeeper.root``.
        zookeeper_session_timeout_ms: ``ordered.zookeeper.session.timeout.ms``.
        violation_policy: ``log`` (count and log) or ``raise`` (``OrderViolationError``).
        header_audit: ``ordered.epoch.header.audit`` (off by default): compare each
            record's epoch header with the boundaries, for producers outside the
            layer. Not needed for order: a new epoch is known before a batch fetched
            after it is judged (the fetch check). Reading headers costs
            confluent-kafka about half a microsecond per record.
        header_name: ``ordered.epoch.header.name``.
        key_audit: ``ordered.key.audit``.
        gate_poll_interval_ms: ``ordered.gate.poll.interval.ms``.
        positions: ``ordered.positions``: declare interest and publish boundary progress
            in ZooKeeper (:mod:`coordinator.positions`) so a closed gate is re-checked as
            soon as what it waits on is committed; the committed offsets in Kafka still
            decide.
        audit_every: ``ordered.audit.every``: the audits look at every N-th record of a
            batch (by position) when nothing in the batch reaches a gate. Reading a
            record's headers costs confluent-kafka about half a microsecond, so a
            header audit of every record roughly halves throughput; 1 in 16 still finds
            a producer that places records wrongly, within a few batches. The
            default is 16 (sampled); 1 is the full audit, opt-in. Records the checked
            path judges (a gate ahead, a compacted topic, several topics) are all
            audited whatever this says.
    """

    zookeeper_connect: str
    zookeeper_root: str = "/ordered"
    zookeeper_session_timeout_ms: int = 10_000
    violation_policy: str = "log"
    header_audit: bool = False
    header_name: str = "ordered.epoch"
    key_audit: bool = True
    gate_poll_interval_ms: int = 100
    audit_every: int = 16
    positions: bool = True

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> ConsumerSettings:
        """Parse ``ordered.``-prefixed keys.

        Args:
            settings: Only ``ordered.`` keys.

        Raises:
            ConfigError: An unknown key, a missing ``ordered.zookeeper.connect`` or a
                malformed value.
        """
        unknown = sorted(key for key in settings if key not in CONSUMER_KEYS)
        if unknown:
            known = ", ".join(sorted(CONSUMER_KEYS))
            raise ConfigError(f"unknown setting(s) {', '.join(unknown)} (known: {known})")
        if "ordered.zookeeper.connect" not in settings:
            raise ConfigError("ordered.zookeeper.connect is required (the layout store)")
        get = settings.get
        root = _str("ordered.zookeeper.root", get("ordered.zookeeper.root", "/ordered"))
        if not root.startswith("/") or (len(root) > 1 and root.endswith("/")):
            raise ConfigError(
                f"ordered.zookeeper.root: expected an absolute znode path like /ordered, "
                f"got {root!r}"
            )
        policy = _str("ordered.violation.policy", get("ordered.violation.policy", "log"))
        if policy.lower() not in VIOLATION_POLICIES:
            raise ConfigError(
                f"ordered.violation.policy: expected one of {', '.join(VIOLATION_POLICIES)}, "
                f"got {policy!r}"
            )
        return cls(
            zookeeper_connect=_str(
                "ordered.zookeeper.connect", settings["ordered.zookeeper.connect"]
            ),
            zookeeper_root=root,
            zookeeper_session_timeout_ms=_int(
                "ordered.zookeeper.session.timeout.ms",
                get("ordered.zookeeper.session.timeout.ms", 10_000),
                1,
            ),
            violation_policy=policy.lower(),
            header_audit=parse_bool(
                "ordered.epoch.header.audit", get("ordered.epoch.header.audit", False)
            ),
            header_name=_str(
                "ordered.epoch.header.name", get("ordered.epoch.header.name", "ordered.epoch")
            ),
            key_audit=parse_bool("ordered.key.audit", get("ordered.key.audit", True)),
            gate_poll_interval_ms=_int(
                "ordered.gate.poll.interval.ms", get("ordered.gate.poll.interval.ms", 100), 1
            ),
            audit_every=_int("ordered.audit.every", get("ordered.audit.every", 16), 1),
            positions=parse_bool("ordered.positions", get("ordered.positions", True)),
        )


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A consumer configuration split into its two halves.

    Attributes:
        kafka: What goes to ``confluent_kafka.Consumer``: every non-``ordered.`` key,
            with ``enable.auto.offset.store`` forced to ``false`` and
            ``topic.metadata.refresh.interval.ms`` defaulted.
        ordered: The parsed ``ordered.*`` settings.
        store_offsets: ``enable.auto.offset.store`` as the user set it (default
            ``true``): the wrapper stores the offset of each delivered record itself.
        auto_commit: ``enable.auto.commit`` (default ``true``).
        group_id: ``group.id``, ``""`` when unset.
    """

    kafka: dict[str, Any]
    ordered: ConsumerSettings
    store_offsets: bool
    auto_commit: bool
    group_id: str


def split_consumer_config(
    config: Mapping[str, Any] | None, overrides: Mapping[str, Any] | None = None
) -> ConsumerConfig:
    """Split a consumer configuration into librdkafka settings and ``ordered.*`` settings.

    Args:
        config: The dict given to ``confluent_kafka.Consumer``; not modified.
        overrides: Keyword-argument settings; they win over ``config``.

    Returns:
        The split configuration.

    Raises:
        ConfigError: ``config`` is not a mapping, a key is not a string, an unknown or
            malformed ``ordered.`` setting, or a malformed ``enable.auto.offset.store``/
            ``enable.auto.commit``.
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
        (ordered if key.startswith(ORDERED_PREFIX) else kafka)[key] = value
    settings = ConsumerSettings.from_mapping(ordered)
    store = parse_bool("enable.auto.offset.store", kafka.get("enable.auto.offset.store", True))
    auto_commit = parse_bool("enable.auto.commit", kafka.get("enable.auto.commit", True))
    kafka["enable.auto.offset.store"] = False
    kafka.setdefault("topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS)
    return ConsumerConfig(
        kafka=kafka,
        ordered=settings,
        store_offsets=store,
        auto_commit=auto_commit,
        group_id=str(kafka.get("group.id", "")),
    )
