"""Clients that read a consumer group's committed offsets without joining it (OffsetFetch).

One confluent ``Consumer`` per group, kept for the next read (a new one costs a
coordinator lookup before its first answer); at most ``limit`` of them, the least
recently used closed first. Reads of different groups run in parallel: each client has
a lock of its own, and librdkafka's ``committed`` releases the GIL while it waits.
Reads of one group run one after another.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import Consumer, TopicPartition

__all__ = ["GroupProbes"]


@dataclass
class _Probe:
    consumer: Any
    lock: threading.Lock = field(default_factory=threading.Lock)
    closed: bool = False


class GroupProbes:
    """Per-group clients that never join their group, for OffsetFetch reads.

    Args:
        config: librdkafka settings of every client (``bootstrap.servers``, security).
        timeout: Seconds one read may take.
        logger: Where librdkafka's logs go.
        limit: How many clients are kept.
    """

    def __init__(
        self, config: Mapping[str, Any], timeout: float, logger: logging.Logger, limit: int = 64
    ) -> None:
        self._config = dict(config)
        self._timeout = timeout
        self._logger = logger
        self._limit = limit
        self._probes: dict[str, _Probe] = {}
        self._lock = threading.Lock()

    def committed(self, group: str, wanted: Mapping[str, Iterable[int]]) -> list[Any]:
        """``group``'s committed offsets of ``wanted`` (topic -> partitions), one request.

        Returns:
            confluent ``TopicPartition`` objects (offset < 0: no commit; ``error`` set
            when Kafka reported one for the partition).

        Raises:
            KafkaException: The request failed or timed out.
        """
        request = [TopicPartition(t, p) for t, parts in sorted(wanted.items()) for p in parts]
        while True:
            probe = self._probe(group)
            with probe.lock:
                if probe.closed:
                    continue  # evicted between the lookup and the lock: take a new one
                got: list[Any] = probe.consumer.committed(request, timeout=self._timeout)
                return got

    def close(self) -> None:
        """Close every client."""
        with self._lock:
            probes = list(self._probes.values())
            self._probes.clear()
        for probe in probes:
            self._close(probe)

    def _probe(self, group: str) -> _Probe:
        evicted = []
        with self._lock:
            probe = self._probes.pop(group, None)
            if probe is None:
                probe = _Probe(
                    Consumer(
                        {
                            "group.id": group,
                            "enable.auto.commit": False,
                            "socket.timeout.ms": int(self._timeout * 1000),
                            "logger": self._logger,
                            **self._config,
                        }
                    )
                )
            self._probes[group] = probe  # most recently used last
            while len(self._probes) > self._limit:
                evicted.append(self._probes.pop(next(iter(self._probes))))
        for old in evicted:
            self._close(old)
        return probe

    @staticmethod
    def _close(probe: _Probe) -> None:
        # Waits for a read in progress on it: closing under a read would crash it.
        with probe.lock:
            if not probe.closed:
                probe.closed = True
                probe.consumer.close()
