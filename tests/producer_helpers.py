"""Helpers shared by the OrderedProducer integration tests (tests/integration/test_producer*.py)."""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from confluent_kafka import Producer
from fixtures import run_in_background

from ordered import OrderedProducer

__all__ = ["KEYS", "header", "produce_keys", "writing_meanwhile"]

KEYS = [f"key-{i}" for i in range(200)] + ["", "ключ", "\U0001f511"]


def header(msg: Any, name: str = "ordered.epoch") -> bytes | None:
    for key, value in msg.headers() or []:
        if key == name:
            return bytes(value)
    return None


def produce_keys(producer: OrderedProducer | Producer, topic: str, tag: str) -> list[Any]:
    """Produce every key once; return the delivery reports (err, msg)."""
    reports: list[Any] = []
    for key in KEYS:
        producer.produce(
            topic,
            value=f"{tag}:{key}".encode(),
            key=key,
            on_delivery=lambda e, m: reports.append((e, m)),
        )
    assert producer.flush(20) == 0
    assert all(err is None for err, _ in reports)
    return reports


@contextlib.contextmanager
def writing_meanwhile(
    producer: OrderedProducer,
    write: Callable[[int], None],
    backoff: float = 0.0,
    pause: float = 0.0,
) -> Iterator[None]:
    """Call ``write(0)``, ``write(1)``, ... in a thread while the block runs.

    ``producer`` is polled after each call; a ``BufferError`` (queue full, or a switch
    draining) is retried after ``poll(backoff)``; ``pause``: a sleep between calls. Once
    the block ends the thread stops, and what it raised is raised here.
    """
    stop = threading.Event()

    def run() -> None:
        i = 0
        while not stop.is_set():
            try:
                write(i)
                i += 1
            except BufferError:
                producer.poll(backoff)
            producer.poll(0)
            if pause:
                time.sleep(pause)

    writer = run_in_background(run)
    try:
        yield
    finally:
        stop.set()
    writer.join(10)
