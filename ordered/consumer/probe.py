"""The log-start probe: a fetch-less client that answers ``get_watermark_offsets`` quickly."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

from coordinator.kernel.clock import SYSTEM_CLOCK, Clock

__all__ = ["LOG_START_TTL", "SEEN_TTL", "LogStartProbe"]

_log = logging.getLogger(__name__)

LOG_START_TTL = 5.0
"""Seconds a log start offset is reused (it only grows)."""

SEEN_TTL = 1.0
"""Seconds a log start the consumer's own fetches saw stands in for the probe's first ask.

A partition librdkafka fetches gets its log start with every fetch response, so the
value is as old as the last one; a paused partition's may be older, and one not fetched
yet counts as 0, hence the short trust (then the probe asks Kafka, as it does at once
for a partition not assigned to this consumer).
"""


class _Known(NamedTuple):
    offset: int
    until: float  # monotonic time it is reused until
    asked: bool  # Kafka's answer (else what the consumer's own fetches saw)


class LogStartProbe:
    """Log start offsets of partitions, each at most :data:`LOG_START_TTL` old.

    Asked of a separate, fetch-less client: on the consumer's own connection a
    ListOffsets request waits behind the broker's long-poll of the running fetch (up to
    ``fetch.wait.max.ms``). A log start only grows, so an older value is a safe lower
    bound, and an unknown one counts as "nothing trimmed".

    The gate rule's first ask of a partition assigned to the consumer
    (:meth:`gate_log_start`) needs no request: the log start librdkafka saw on its last
    fetch of it (``seen``; 0 before its first fetch) answers it for :data:`SEEN_TTL`.
    That takes the probe's connection (about 10-25 ms on a first ask) off the first gate
    decision after an assignment. A replay's start (:meth:`log_start`) is stored as the
    offset to commit, so it is always Kafka's answer.

    Args:
        kafka_config: The consumer's librdkafka settings (callbacks are dropped).
        timeout: Seconds one request may take.
        seen: The log start as of the consumer's own last fetch of an assigned
            partition (:meth:`Core.log_start_seen
            <ordered.consumer.state.Core.log_start_seen>`), ``None`` for any other;
            ``None``: the probe always asks.
        clock: Where the age of an answer is read (the consumer's core clock).
    """

    def __init__(
        self,
        kafka_config: Mapping[str, Any],
        timeout: float,
        seen: Callable[[str, int], int | None] | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._config = {
            k: v
            for k, v in kafka_config.items()
            if k not in ("on_commit", "stats_cb", "enable.auto.commit")
        }
        self._timeout = timeout
        self._seen = seen
        self._clock = clock
        self._client: Any = None
        self._known: dict[tuple[str, int], _Known] = {}

    def log_start(self, topic: str, partition: int) -> int:
        """The log start offset of ``topic``/``partition`` as Kafka answered (a lower bound).

        At most :data:`LOG_START_TTL` old. For a replay's start (``OFFSET_BEGINNING``),
        which is stored as the offset to commit: never what the fetches saw.
        """
        return self._lookup(topic, partition, False)

    def gate_log_start(self, topic: str, partition: int) -> int:
        """:meth:`log_start` for the gate rule, which may also take what the fetches saw.

        A lower bound only keeps a gate closed longer: the first ask of an assigned
        partition takes ``seen`` (for :data:`SEEN_TTL`) instead of a request.
        """
        return self._lookup(topic, partition, True)

    def _lookup(self, topic: str, partition: int, seen_ok: bool) -> int:
        key = (topic, partition)
        now = self._clock.monotonic()
        cached = self._known.get(key)
        if cached is not None and now < cached.until and (cached.asked or seen_ok):
            return cached.offset
        if seen_ok and cached is None and self._seen is not None:
            seen = self._seen(topic, partition)
            if seen is not None:
                self._known[key] = _Known(seen, now + SEEN_TTL, False)
                return seen
        known = cached.offset if cached is not None else 0
        if self._client is None:
            self._client = Consumer({**self._config, "enable.auto.commit": False})
        try:
            low, _high = self._client.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=self._timeout
            )
            known = max(known, int(low))
        except KafkaException as exc:
            _log.debug("log start of %s[%d] unknown: %s", topic, partition, exc)
        self._known[key] = _Known(known, now + LOG_START_TTL, True)
        return known

    def close(self) -> None:
        """Close the probe's client, if one was made."""
        if self._client is not None:
            client, self._client = self._client, None
            client.close()
