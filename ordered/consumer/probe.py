"""The log-start probe: a fetch-less client that answers ``get_watermark_offsets`` quickly."""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from typing import Any, NamedTuple

from confluent_kafka import Consumer, KafkaException, TopicPartition

__all__ = ["LOG_START_TTL", "LogStartProbe"]

_log = logging.getLogger(__name__)

LOG_START_TTL = 5.0
"""Seconds a log start offset is reused (it only grows)."""


class _Known(NamedTuple):
    offset: int
    at: float


class LogStartProbe:
    """Log start offsets of partitions, each at most :data:`LOG_START_TTL` old.

    Asked of a separate, fetch-less client: on the consumer's own connection a
    ListOffsets request waits behind the broker's long-poll of the running fetch (up to
    ``fetch.wait.max.ms``). A log start only grows, so an older value is a safe lower
    bound, and an unknown one counts as "nothing trimmed".

    Args:
        kafka_config: The consumer's librdkafka settings (callbacks are dropped).
        timeout: Seconds one request may take.
    """

    def __init__(self, kafka_config: Mapping[str, Any], timeout: float) -> None:
        self._config = {
            k: v
            for k, v in kafka_config.items()
            if k not in ("on_commit", "stats_cb", "enable.auto.commit")
        }
        self._timeout = timeout
        self._client: Any = None
        self._known: dict[tuple[str, int], _Known] = {}

    def log_start(self, topic: str, partition: int) -> int:
        """The log start offset of ``topic``/``partition`` (a lower bound)."""
        key = (topic, partition)
        now = time.monotonic()
        cached = self._known.get(key)
        if cached is not None and now - cached.at < LOG_START_TTL:
            return cached.offset
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
        self._known[key] = _Known(known, now)
        return known

    def close(self) -> None:
        """Close the probe's client, if one was made."""
        if self._client is not None:
            client, self._client = self._client, None
            client.close()
