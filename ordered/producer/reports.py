"""Delivery reports the producer owes without librdkafka: a partition the topic lacks.

On an ordered topic the producer holds the topic's metadata from its first-use check, so
librdkafka refuses ``produce(..., partition=99)`` at once with ``_UNKNOWN_PARTITION``.
An application written for confluent never sees that raised (its first record to a
topic finds no metadata yet, and librdkafka reports the error in the delivery report),
so the producer keeps such a record's report here and serves it on the next
``poll``/``flush``, as confluent would.
"""

from __future__ import annotations

import collections
from typing import Any

import confluent_kafka

from ordered.producer.tracking import DeliveryCallback

__all__ = ["UNKNOWN_PARTITION", "DueReports"]

UNKNOWN_PARTITION = confluent_kafka.KafkaError._UNKNOWN_PARTITION
"""The librdkafka error that becomes a delivery report instead of an exception."""


class DueReports:
    """Error reports due to the application, served in order by :meth:`serve`."""

    def __init__(self) -> None:
        self._due: collections.deque[tuple[DeliveryCallback | None, Any]] = collections.deque()

    def __len__(self) -> int:
        """Reports not served yet (they count in ``len(producer)``, as queued records)."""
        return len(self._due)

    def add(
        self,
        callback: DeliveryCallback | None,
        error: confluent_kafka.KafkaError,
        topic: str,
        partition: int,
        key: Any,
        value: Any,
        headers: Any,
    ) -> None:
        """Owe ``callback`` a report of ``error`` for the record described."""
        # As librdkafka's reports: the key and value as bytes (a str was sent as UTF-8).
        message = confluent_kafka.Message(
            topic=topic,
            partition=partition,
            key=key.encode() if isinstance(key, str) else key,
            value=value.encode() if isinstance(value, str) else value,
            headers=headers,
            error=error,
        )
        self._due.append((callback, message))

    def serve(self) -> int:
        """Call each owed callback with ``(err, msg)``; return how many reports were served."""
        served = 0
        while self._due:
            callback, message = self._due.popleft()
            served += 1
            if callback is not None:
                callback(message.error(), message)
        return served
