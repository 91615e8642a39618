"""The verifiable producer: numbered records through ``OrderedProducer``, acks recorded.

Each record's value is ``"{producer id}|{sequence}|"`` plus padding; the sequence grows by
one per record of the producer (so per key it only grows). Every delivery report is
written to the producer's history (``ack`` with partition and offset, or ``nack``);
the checker requires every acked record and the order of every key's records.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ordered.producer import OrderedProducer
from ordered.verify.history import HistoryWriter

__all__ = ["VerifiableProducer", "decode_value", "encode_value"]


def encode_value(producer: str, seq: int, padding: int = 0) -> bytes:
    """The value of record ``seq`` of ``producer`` (``padding`` bytes of filler added)."""
    return f"{producer}|{seq}|".encode() + b"x" * padding


def decode_value(value: bytes | None) -> tuple[str, int] | None:
    """``(producer, seq)`` of a value from :func:`encode_value`, or None for another value."""
    if not value:
        return None
    parts = value.split(b"|", 2)
    if len(parts) < 3:
        return None
    try:
        return parts[0].decode(), int(parts[1])
    except (UnicodeDecodeError, ValueError):
        return None


class VerifiableProducer:
    """Writes numbered keyed records to ``topic`` and records every ack.

    Args:
        config: ``OrderedProducer`` configuration (``ordered.epoch.header`` is turned on
            unless set, so readers can record each record's epoch).
        producer_id: This producer's id in the history (unique per process incarnation).
        topic: The topic.
        history: The history file to append acks to.
        keys: The keys to write, chosen uniformly at random (seeded by ``seed``).
        padding: Filler bytes per value.
        seed: Seed of the key choice.
    """

    def __init__(
        self,
        config: dict[str, Any],
        producer_id: str,
        topic: str,
        history: str | Path,
        keys: Sequence[str],
        *,
        padding: int = 0,
        seed: int = 0,
    ) -> None:
        self.producer_id = producer_id
        self.topic = topic
        self.keys = list(keys)
        self.padding = padding
        self.sent = 0
        self.acked = 0
        self.nacked = 0
        self._random = random.Random(seed)
        self._history = HistoryWriter(history)
        self._producer = OrderedProducer({"ordered.epoch.header": True, **config})

    @property
    def producer(self) -> OrderedProducer:
        """The wrapped ``OrderedProducer``."""
        return self._producer

    def _on_delivery(self, err: Any, msg: Any) -> None:
        found = decode_value(msg.value())
        if found is None:
            return
        key = msg.key().decode() if msg.key() is not None else ""
        if err is None:
            self.acked += 1
            self._history.add(
                {
                    "ev": "ack",
                    "p": found[0],
                    "k": key,
                    "s": found[1],
                    "tp": msg.partition(),
                    "o": msg.offset(),
                }
            )
        else:
            self.nacked += 1
            self._history.add(
                {"ev": "nack", "p": found[0], "k": key, "s": found[1], "err": str(err)}
            )

    def send_one(self, key: str | None = None) -> int:
        """Produce the next record (a random key unless given); return its sequence.

        Waits, polling, while the producer cannot take it (a full queue, or the layout
        unavailable during a ZooKeeper session loss).
        """
        seq = self.sent
        chosen = key if key is not None else self._random.choice(self.keys)
        value = encode_value(self.producer_id, seq, self.padding)
        while True:
            try:
                self._producer.produce(
                    self.topic, value=value, key=chosen, on_delivery=self._on_delivery
                )
                break
            except BufferError:
                self._producer.poll(0.05)
                self._history.flush()
        self.sent += 1
        return seq

    def poll(self, timeout: float = 0.0) -> None:
        """Serve delivery reports and write their acks to the history."""
        self._producer.poll(timeout)
        self._history.flush()

    def run(
        self,
        rate: float,
        *,
        duration: float | None = None,
        stop: Callable[[], bool] | None = None,
    ) -> None:
        """Send about ``rate`` records per second until ``duration`` passes or ``stop()``."""
        started = last = time.monotonic()
        credit = 0.0
        while True:
            now = time.monotonic()
            if duration is not None and now - started >= duration:
                return
            if stop is not None and stop():
                return
            # At most one second of catching up (after a SIGSTOP, say), never a flood.
            credit = min(credit + (now - last) * rate, max(rate, 1.0)) if rate > 0 else 100.0
            last = now
            while credit >= 1.0:
                self.send_one()
                credit -= 1.0
            self.poll(0)
            time.sleep(0.02)

    def close(self, timeout: float = 30.0) -> None:
        """Flush, write the last acks, and close the producer and the history."""
        try:
            self._producer.flush(timeout)
            self._history.flush()
            self._producer.close()
        finally:
            self._history.close()
