"""``produce_batch`` of a topic the producer routes: each record through ``produce``.

confluent's ``produce_batch`` queues what it can and marks each record it could not
with an ``_error`` field (its ``KafkaError``); a routed topic's batch does the same,
one ``produce()`` per record (a topic met first here is used, or held, by the first).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import confluent_kafka

from coordinator.client.errors import LayoutUnavailableError
from ordered.producer.tracking import DeliveryCallback

__all__ = ["send_each"]


def send_each(
    produce: Callable[..., None],
    topic: str,
    messages: list[dict[str, Any]],
    partition: int,
    default: DeliveryCallback | None,
) -> int:
    """Send each of ``messages`` with ``produce``; return how many were queued.

    Raises:
        LayoutUnavailableError: From ``produce`` (the session is not usable).
    """
    queued = 0
    for message in messages:
        own = message.get("callback")
        try:
            produce(
                topic,
                message.get("value"),
                message.get("key"),
                message.get("partition", partition),
                own if own is not None else default,
                None,
                message.get("timestamp", 0),
                message.get("headers"),
            )
        except confluent_kafka.KafkaException as exc:
            message["_error"] = exc.args[0]
            continue
        except LayoutUnavailableError:
            raise
        except BufferError:
            message["_error"] = confluent_kafka.KafkaError(confluent_kafka.KafkaError._QUEUE_FULL)
            continue
        queued += 1
    return queued
