"""Split an ``OrderedConsumer`` configuration into librdkafka and ``ordered.*`` settings.

The dict is the one ``confluent_kafka.Consumer`` takes, plus ``ordered.``-prefixed keys
(see :data:`CONSUMER_KEYS`). Every ``ordered.`` key is removed before librdkafka sees
the dict; an undocumented one is a :class:`~coordinator.kernel.errors.ConfigError`, so a typo never
silently turns a setting off.

Three librdkafka settings are changed (see :class:`ConsumerConfig`):

* ``enable.auto.offset.store`` is forced to ``false``: librdkafka stores the offset of
  every record it hands to Python, including records a closed gate holds back; the
  wrapper stores the offsets of the records it delivers instead (when the user asked
  for automatic storing).
* ``topic.metadata.refresh.interval.ms`` defaults to :data:`METADATA_REFRESH_MS`
  instead of 5 minutes: librdkafka's group rejoins onto new partitions only at its own
  periodic refresh (a ``list_topics`` call from the application updates the cache but
  does not trigger the rejoin; measured with librdkafka 2.16), and an expansion must
  be picked up within seconds.
* ``fetch.queue.backoff.ms`` defaults to :data:`FETCH_QUEUE_BACKOFF_MS` instead of
  1000: librdkafka postpones a partition's next fetch by that much whenever its queue
  holds ``queued.min.messages``, and a reader that drains the queue faster then waits
  out the rest of the second (librdkafka#2879, "Consumer fetching once a second").
  The layout checks make an ordered reader pause now and then (a batch waits for its
  check slot), so it overruns the queue more often than a plain one: with the 1 s
  backoff a live reader fell behind a fast producer and stayed there, and a backlog
  read ran at ~0.75x of a plain consumer with the same settings (``docs/consumer.md``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from coordinator.kernel.errors import ConfigError
from ordered.settings import (
    ORDERED_PREFIX,
    VIOLATION_POLICIES,
    Role,
    ZkSecuritySettings,
    keys_for,
    parse_bool,
    parse_settings,
    setting_field,
    settings_view,
    split_client_config,
)

__all__ = [
    "CONSUMER_KEYS",
    "FETCH_QUEUE_BACKOFF_MS",
    "METADATA_REFRESH_MS",
    "ORDERED_PREFIX",
    "VIOLATION_POLICIES",
    "ConsumerConfig",
    "ConsumerSettings",
    "parse_bool",
    "split_consumer_config",
]

CONSUMER_KEYS: Final[Mapping[str, str]] = keys_for(Role.CONSUMER)
"""The documented ``ordered.`` settings of the consumer and what each one means."""

METADATA_REFRESH_MS: Final = 2000
"""The default ``topic.metadata.refresh.interval.ms`` of an ordered consumer."""

FETCH_QUEUE_BACKOFF_MS: Final = 10
"""The default ``fetch.queue.backoff.ms`` of an ordered consumer (librdkafka's: 1000).

A queue over its threshold is looked at again every 10 ms per partition instead of
every second: a cheap decision on librdkafka's broker thread, against up to a second
of idle reading each time a fast reader empties its queue.
"""


@settings_view(Role.CONSUMER)
@dataclass(frozen=True, slots=True)
class ConsumerSettings(ZkSecuritySettings):
    """The parsed ``ordered.*`` settings of a consumer (a checked view of the table:
    :func:`~ordered.settings.settings_view`).

    Attributes:
        zookeeper_connect: ``ordered.zookeeper.connect``; may end in a chroot path.
        zookeeper_root: ``ordered.zookeeper.root``.
        zookeeper_session_timeout_ms: ``ordered.zookeeper.session.timeout.ms``.
        zookeeper_auth, zookeeper_ssl_*, zookeeper_tls: ZooKeeper authentication and
            TLS (:class:`~ordered.settings.ZkSecuritySettings`).
        violation_policy: ``log`` (count and log) or ``raise`` (``OrderViolationError``).
        header_audit: ``ordered.epoch.header.audit`` (off by default): compare each
            record's epoch header with the boundaries, for producers outside the
            layer. Not needed for order: a new epoch is known before a batch fetched
            after it is judged (the fetch check). Reading headers costs
            confluent-kafka about half a microsecond per record.
        epoch_header_name: ``ordered.epoch.header.name`` (``header_name`` is an old
            alias, kept for callers outside the project).
        key_audit: ``ordered.key.audit``.
        gate_poll_interval_ms: ``ordered.gate.poll.interval.ms``.
        audit_every: ``ordered.audit.every``: the audits look at every N-th record of a
            batch (by position) when nothing in the batch reaches a gate. Reading a
            record's headers costs confluent-kafka about half a microsecond, so a
            header audit of every record roughly halves throughput; 1 in 16 still finds
            a producer that places records wrongly, within a few batches. The
            default is 16 (sampled); 1 is the full audit, opt-in. Records the checked
            path judges (a gate ahead, a compacted topic, several topics) are all
            audited whatever this says.
        positions: ``ordered.positions``: declare interest and publish boundary progress
            in ZooKeeper (:mod:`coordinator.kernel.positions`) so a closed gate is re-checked as
            soon as what it waits on is committed; the committed offsets in Kafka still
            decide.
        layout_check_max_requests_per_s: ``ordered.layout.check.max.requests.per.s``
            (default 18, under 20 with the session's other requests): the layout checks of
            fetched batches send at most this many
            ZooKeeper requests per second; a batch covered by an earlier check needs
            none (``docs/consumer.md``).
        commit_mode: ``ordered.commit.mode``: ``auto`` (the consumer commits a source's
            boundary, and a rewound source's new position, itself) or ``application``
            (it never commits: a boundary passes once the application's own commit, a
            plain one or the offsets of a transaction, covers it; for exactly-once
            read-process-write pipelines).
        hooks: ``ordered.hooks``: objects that receive the consumer's events
            (:mod:`coordinator.kernel.hooks`), after the consumer's own counters.
    """

    zookeeper_connect: str = setting_field("zookeeper_connect")
    zookeeper_root: str = setting_field("zookeeper_root")
    zookeeper_session_timeout_ms: int = setting_field("zookeeper_session_timeout_ms", Role.CONSUMER)
    violation_policy: str = setting_field("violation_policy")
    header_audit: bool = setting_field("header_audit")
    epoch_header_name: str = setting_field("epoch_header_name")
    key_audit: bool = setting_field("key_audit")
    gate_poll_interval_ms: int = setting_field("gate_poll_interval_ms")
    audit_every: int = setting_field("audit_every")
    positions: bool = setting_field("positions")
    layout_check_max_requests_per_s: int = setting_field("layout_check_max_requests_per_s")
    commit_mode: str = setting_field("commit_mode")
    hooks: tuple[object, ...] = setting_field("hooks")

    @property
    def header_name(self) -> str:
        """The old name of :attr:`epoch_header_name` (kept for existing callers)."""
        return self.epoch_header_name

    @classmethod
    def from_mapping(cls, settings: Mapping[str, Any]) -> ConsumerSettings:
        """Parse ``ordered.``-prefixed keys.

        Raises:
            ConfigError: An unknown key, a missing ``ordered.zookeeper.connect`` or a
                malformed value.
        """
        return cls(**parse_settings(settings, Role.CONSUMER))


@dataclass(frozen=True, slots=True)
class ConsumerConfig:
    """A consumer configuration split into its two halves.

    Attributes:
        kafka: What goes to ``confluent_kafka.Consumer``: every non-``ordered.`` key,
            with ``enable.auto.offset.store`` forced to ``false``, and
            ``topic.metadata.refresh.interval.ms`` and ``fetch.queue.backoff.ms``
            defaulted.
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

    @property
    def prefetch_records(self) -> int:
        """``queued.min.messages``: the records librdkafka pre-fetches of each partition."""
        return int(self.kafka.get("queued.min.messages", 100_000))


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
            malformed ``ordered.`` setting, a malformed ``enable.auto.offset.store``/
            ``enable.auto.commit``, or ``ordered.commit.mode=application`` with
            ``enable.auto.commit`` not ``false``.
    """
    kafka, settings = split_client_config(config, overrides, Role.CONSUMER, ConsumerSettings)
    store = parse_bool("enable.auto.offset.store", kafka.get("enable.auto.offset.store", True))
    auto_commit = parse_bool("enable.auto.commit", kafka.get("enable.auto.commit", True))
    if settings.commit_mode == "application" and auto_commit:
        raise ConfigError(
            "ordered.commit.mode=application: the consumer must never commit on its own, "
            "so enable.auto.commit must be false (commit yourself, or send the offsets "
            "to your transaction)"
        )
    kafka["enable.auto.offset.store"] = False
    kafka.setdefault("topic.metadata.refresh.interval.ms", METADATA_REFRESH_MS)
    kafka.setdefault("fetch.queue.backoff.ms", FETCH_QUEUE_BACKOFF_MS)
    return ConsumerConfig(
        kafka=kafka,
        ordered=settings,
        store_offsets=store,
        auto_commit=auto_commit,
        group_id=str(kafka.get("group.id", "")),
    )
