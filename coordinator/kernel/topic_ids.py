"""Topic identity: a layout applies only to the Kafka topic it was adopted for.

Kafka gives every topic an id at creation; a topic deleted and created again under the
same name gets a new one, while its name (and so its znodes) stay the same. An adoption
records Kafka's id in :attr:`TopicRecord.topic_id`, and everything that reads a layout
checks it against Kafka before trusting it: the producer and the consumer when they
first load a topic, every ``ordered`` command, the daemon (through the controller), the
Spark source. A mismatch is a :class:`~coordinator.kernel.errors.TopicIdMismatchError` naming
both ids; ``ordered adopt TOPIC --replace`` re-adopts the new topic and ``ordered
unadopt TOPIC`` removes the layout.

Records written before topic ids (record version 1) carry none: they are *unbound*,
nothing can be checked and they are used as before; ``ordered adopt TOPIC`` (same
settings) binds such a record to the topic's current id.

:func:`check_topic_id` is the pure rule; :class:`TopicIds` asks Kafka, once per topic
(again only when the recorded id changes), so a client pays one DescribeTopics request
per topic, never one per record.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final, Protocol

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock
from coordinator.kernel.errors import (
    ConfigError,
    TopicIdMismatchError,
    UnknownTopicError,
)
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store.records import TopicRecord

__all__ = ["RECHECK_S", "TopicIds", "check_topic_id"]

RECHECK_S: Final = 1.0
"""A mismatch found less than this many seconds ago is reported again without asking
Kafka (a client that keeps retrying costs at most one request per second and topic)."""

# The settings a client's AdminClient needs to reach the same cluster the same way:
# the address, security and network settings of the client's own configuration.
_ADMIN_PREFIXES: Final = (
    "bootstrap.servers",
    "metadata.broker.list",
    "security.protocol",
    "sasl.",
    "ssl.",
    "ssl_",
    "enable.ssl",
    "oauthbearer_",
    "oauth_cb",
    "client.id",
    "client.dns.lookup",
    "client.rack",
    "socket.",
    "broker.address.",
    "connections.max.idle.ms",
    "reconnect.backoff",
    "api.version",
    "broker.version.fallback",
)


class TopicIdSource(Protocol):
    """Anything that answers Kafka's topic id of a topic (``KafkaAdmin``, say)."""

    def topic_id(self, topic: str) -> str:
        """Kafka's topic id of ``topic``."""
        ...


def _describe_topic_id(
    bootstrap: str, extra: Mapping[str, Any], topic: str, timeout_s: float
) -> str:
    """One DescribeTopics request with a helper made for it (what a client needs once)."""
    admin = KafkaAdmin(bootstrap, timeout=timeout_s, config=dict(extra))
    try:
        # No diagnosis on a timeout: the caller retries, within one timeout a try.
        return admin.describe_topic(topic, diagnose=False).topic_id
    finally:
        admin.close()


def check_topic_id(record: TopicRecord | None, kafka_topic_id: str | None) -> None:
    """Refuse a layout adopted for another incarnation of the topic (pure).

    Args:
        record: The topic record (``None``: not adopted, nothing to check).
        kafka_topic_id: Kafka's topic id now (``None``: unknown, nothing to check).

    Raises:
        TopicIdMismatchError: The record is bound to another topic id.
    """
    if record is None or record.topic_id is None or kafka_topic_id is None:
        return
    if record.topic_id != kafka_topic_id:
        raise TopicIdMismatchError(record.topic, record.topic_id, kafka_topic_id)


class TopicIds:
    """Kafka's topic ids, asked once per topic, to check layouts against.

    Thread-safe. Kafka is asked only for a record bound to a topic id, and again only
    when a record names an id other than the one last seen in Kafka (a re-adoption
    after the topic was created again), at most once per :data:`RECHECK_S`.

    Args:
        describe: Returns Kafka's topic id of a topic (for example
            :meth:`KafkaAdmin.topic_id`); raises ``UnknownTopicError`` or
            ``OrderedKafkaError``.
        clock: Where the time is read (a test's fake).
    """

    def __init__(self, describe: Callable[[str], str], clock: Clock = SYSTEM_CLOCK) -> None:
        self._describe = describe
        self._clock = clock
        self._lock = threading.Lock()
        self._known: dict[str, tuple[str, float]] = {}
        self.requests = 0
        """How many times Kafka was asked (for tests and metrics)."""

    @classmethod
    def for_admin(cls, admin: TopicIdSource) -> TopicIds:
        """Ask through an existing admin helper (the service's ``KafkaAdmin``, say)."""
        return cls(admin.topic_id)

    @classmethod
    def for_client(cls, kafka_config: Mapping[str, Any], timeout_s: float = 5.0) -> TopicIds:
        """Ask Kafka as a producer or consumer with ``kafka_config`` reaches it.

        An admin client is made for each request and dropped after it (requests are
        rare: one per topic), from the address, security and network settings of
        ``kafka_config``. Nothing connects until the first request; a request without
        ``bootstrap.servers`` raises :class:`~coordinator.kernel.errors.ConfigError`.

        Args:
            kafka_config: The client's librdkafka settings.
            timeout_s: How long one request may take (a consumer's first load of a
                topic waits for it; a producer's first records are held meanwhile and
                the request runs on a background thread); a Kafka that does not answer
                is an ``OrderedKafkaError`` the caller retries.
        """
        bootstrap = kafka_config.get("bootstrap.servers") or kafka_config.get(
            "metadata.broker.list"
        )
        extra = {
            k: v
            for k, v in kafka_config.items()
            if k.startswith(_ADMIN_PREFIXES) and k not in ("bootstrap.servers",)
        }
        extra.pop("metadata.broker.list", None)

        def describe(topic: str) -> str:
            if not bootstrap:
                raise ConfigError(
                    f"cannot check the topic id of {topic}: bootstrap.servers is not set"
                )
            return _describe_topic_id(str(bootstrap), extra, topic, timeout_s)

        return cls(describe)

    def kafka_id(self, topic: str) -> str:
        """Ask Kafka for ``topic``'s id now (and remember it).

        Raises:
            UnknownTopicError: The topic does not exist in Kafka.
            OrderedKafkaError: Kafka failed or did not answer in time.
        """
        self.requests += 1
        topic_id = self._describe(topic)
        with self._lock:
            self._known[topic] = (topic_id, self._clock.monotonic())
        return topic_id

    def answers_now(self, record: TopicRecord | None) -> bool:
        """Whether :meth:`verify` of ``record`` would answer without asking Kafka.

        True for a record that is not bound to a topic id (or none), for one whose id
        Kafka was last seen to give the topic, and for a mismatch found less than
        :data:`RECHECK_S` ago. A producer holds a topic's first records while a check
        that must ask Kafka runs in the background (Kafka may be down: the request
        could take its whole timeout).
        """
        if record is None or record.topic_id is None:
            return True
        with self._lock:
            known = self._known.get(record.topic)
        if known is None:
            return False
        return known[0] == record.topic_id or self._clock.monotonic() - known[1] < RECHECK_S

    def verify(self, record: TopicRecord | None) -> TopicRecord | None:
        """Return ``record`` if its layout applies to Kafka's topic now.

        Args:
            record: The topic record as read from the store (``None``: not adopted).

        Returns:
            ``record``, unchanged.

        Raises:
            TopicIdMismatchError: The record is bound to another topic id than Kafka's.
            UnknownTopicError: The record is bound to an id and the topic does not
                exist in Kafka (deleted).
            OrderedKafkaError: Kafka failed or did not answer in time.
        """
        if record is None or record.topic_id is None:
            return record
        topic = record.topic
        with self._lock:
            known = self._known.get(topic)
        if known is not None and known[0] == record.topic_id:
            return record
        if known is None or self._clock.monotonic() - known[1] >= RECHECK_S:
            try:
                kafka_id = self.kafka_id(topic)
            except UnknownTopicError:
                raise UnknownTopicError(
                    f"topic {topic} (adopted as topic id {record.topic_id}) does not exist "
                    "in Kafka: it was deleted; remove its layout with `ordered unadopt "
                    f"{topic}`, or create it again and run `ordered adopt {topic} --replace`"
                ) from None
        else:
            kafka_id = known[0]
        check_topic_id(record, kafka_id)
        return record

    def forget(self, topic: str) -> None:
        """Forget what Kafka said about ``topic`` (the next check asks again)."""
        with self._lock:
            self._known.pop(topic, None)
