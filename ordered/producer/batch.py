"""``produce_batch`` of a topic the producer routes.

confluent's ``produce_batch`` queues what it can and marks each record it could not
with an ``_error`` field (its ``KafkaError``); a routed topic's batch does the same.
In the steady state (a route, no switch tracked, the session usable, nothing per record
to add) the batch is routed by the route's ``place`` and handed to confluent's C
``produce_batch`` in one call (:func:`send_routed`), under the producer's lock: the
batch is fenced from a route switch as one record of ``produce`` is
(``docs/protocol.md``, "Fencing the route switch"). Otherwise one ``produce()`` per
record (a topic met first here is used, or held, by the first).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, Protocol

import confluent_kafka

from coordinator.kernel.errors import LayoutUnavailableError
from ordered.producer.routes import Route, TopicState
from ordered.producer.session import ProducerSession
from ordered.producer.topics import TopicRegistry
from ordered.producer.tracking import DeliveryCallback, DrainTracker

_CLOSED = "Producer has been closed"
_DATA = (bytes, str)


class _Producer(Protocol):
    """The parts of ``OrderedProducer`` a batch needs."""

    _lock: threading.Lock
    _routes: dict[str, Route]
    _tracker: DrainTracker
    _session: ProducerSession
    _topics: TopicRegistry
    _producer: confluent_kafka.Producer
    _pause: bool
    _emulate: bool

    def produce(self, *args: Any) -> None: ...


__all__ = ["check_messages", "send", "send_each", "send_routed"]


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


def send(
    producer: _Producer,
    route: Route | None,
    topic: str,
    messages: list[dict[str, Any]],
    partition: int,
    callback: DeliveryCallback | None,
    on_delivery: DeliveryCallback | None,
) -> int:
    """``produce_batch`` of a topic that is not plain, or has no route yet.

    Returns:
        The number of records queued.

    Raises:
        LayoutUnavailableError: As ``produce``, before anything is sent.
        TypeError: As confluent's, for a batch it refuses (:func:`check_messages`, or
            confluent's own check in the steady state: the same words).
        RuntimeError: The producer is closed.
    """
    if route is not None and partition == -1 and not (producer._pause or producer._emulate):
        with producer._lock:
            current = producer._routes.get(topic)
            if (
                current is not None
                and not current.plain
                and not producer._topics.closed
                and not producer._tracker.tracking
                and producer._session.usable
            ):
                sent = send_routed(
                    producer._producer.produce_batch,
                    current,
                    topic,
                    messages,
                    callback,
                    on_delivery,
                )
                if sent is not None:
                    return sent
    check_messages(messages)
    if producer._topics.closed:
        raise RuntimeError(_CLOSED)
    # A topic without a route yet: each record's produce() uses it first (or holds it).
    suspended = route is not None and route.state is TopicState.SUSPENDED
    unusable = not producer._session.usable or suspended
    routed = route is not None and not route.plain
    if routed and unusable and any(m.get("key") is not None for m in messages):
        raise LayoutUnavailableError(
            f"cannot route keyed records to {topic}: the ZooKeeper session is "
            "not usable; poll() and retry"
        )
    default = callback if callback is not None else on_delivery
    return send_each(producer.produce, topic, messages, partition, default)


def send_routed(
    produce_batch: Callable[..., int],
    route: Route,
    topic: str,
    messages: Any,
    callback: DeliveryCallback | None,
    on_delivery: DeliveryCallback | None,
) -> int | None:
    """Route every record by ``route`` and queue them with confluent's ``produce_batch``.

    The caller holds the producer's lock and has checked that the producer is open, no
    switch is tracked, the session is usable and delivery reports need no filter. Each
    record gets the partition ``produce`` would give it (``route.place(key)``, unkeyed
    ones round robin); the records of one partition go in one call, in the batch's order
    (confluent's ``produce_batch`` takes one partition per call: it ignores a record's
    own). Every record is checked first, so a batch confluent would refuse goes to the
    record-by-record path, which refuses it before anything is sent, in confluent's words.

    Returns:
        The number of records queued, or ``None`` (nothing sent) when the batch needs
        the record-by-record path: not a list of dicts, a key or value that is not bytes
        or str, an explicit partition, a timestamp, headers, or a route with an epoch
        header or compaction copies.
    """
    place, robin = route.place, route.round_robin
    if place is None or robin is None or not route.routable or route.compacted:
        return None
    if route.headers is not None or type(messages) is not list:
        return None
    groups: dict[int, list[dict[str, Any]]] = {}
    for m in messages:
        if type(m) is not dict or "partition" in m or "headers" in m or "timestamp" in m:
            return None
        key, value = m.get("key"), m.get("value")
        if value is not None and type(value) not in _DATA:
            return None
        if key is None:
            target = next(robin)
        elif type(key) in _DATA:
            target = place(key)
        else:
            return None
        group = groups.get(target)
        if group is None:
            groups[target] = [m]
        else:
            group.append(m)
    # confluent takes ``on_delivery`` only when ``callback`` is not passed at all.
    default = callback if callback is not None else on_delivery
    queued = 0
    for target, group in groups.items():
        queued += int(produce_batch(topic, group, target, default))
    return queued
