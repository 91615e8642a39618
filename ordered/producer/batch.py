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

__all__ = ["check_messages", "send_each"]


def check_messages(messages: Any) -> None:
    """Refuse a batch as confluent's ``produce_batch`` does, before any record is sent.

    The same checks, exception types and messages as confluent's C code (its own unit
    tests match them), so an application's handling of a bad batch does not change.

    Raises:
        TypeError: ``messages`` is not a list; a message is not a dict; its value or key
            is not bytes or str; its partition is not an int.
        NotImplementedError: A message has a timestamp (confluent refuses them in batches).
    """
    if not isinstance(messages, list):
        raise TypeError("messages must be a list")
    for i, message in enumerate(messages):
        if not isinstance(message, dict):
            raise TypeError(f"Message at index {i} must be a dict")
        for field in ("value", "key"):
            data = message.get(field)
            if data is not None and not isinstance(data, (bytes, str)):
                raise TypeError(f"Message {field} at index {i} must be bytes or str")
        part = message.get("partition")
        if part is not None and not isinstance(part, int):
            raise TypeError(f"Message partition at index {i} must be int")
        if message.get("timestamp") is not None:
            raise NotImplementedError(
                "Message timestamps are not currently supported in batch mode"
            )


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
                partition if message.get("partition") is None else message["partition"],
                own if own is not None else default,
                None,
                0,
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
