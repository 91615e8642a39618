"""What the demo shows: the topic and its consumer group, sampled a few times a second.

A :class:`Monitor` thread reads, from outside the clients, what an operator's
``ordered describe TOPIC --group G`` reads: the layout and its pending epoch, the
producer barrier's acks, every partition's end offset, the group's committed offsets
and the gate it waits at (:func:`coordinator.groups.group_status.group_status`), and the
state of each retired partition (:func:`coordinator.trims.retention.retired_status`). Each
partition gets one state:

* ``active``: receives records, no closed gate ahead of the group;
* ``gated``: a closed gate lies ahead of the group, no record has reached it yet;
* ``blocked``: records wait at a closed gate (``blocked_on`` names the partitions whose
  tails the group must commit first; ``-1``: the epoch's seal);
* ``retiring``, ``draining``, ``trimmed``: a partition a shrink retired, before its
  final offset is known, until every interested group committed it, after the trim.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from coordinator.groups.group_status import group_status
from coordinator.kernel.errors import OrderedError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.trims.retention import retired_status

__all__ = ["STATES", "Monitor", "PartSample", "Sample"]

STATES = ("active", "gated", "blocked", "retiring", "draining", "trimmed")
"""Every state a partition can be shown in."""


@dataclass(frozen=True, slots=True)
class PartSample:
    """One partition at one instant.

    Attributes:
        state: One of :data:`STATES`.
        blocked_on: What a ``blocked`` partition waits on (partitions; ``-1``: a seal).
        end: Its end offset.
        committed: The group's committed offset (``None``: none yet).
        rate_in: Records per second written since the previous sample.
        rate_out: Records per second committed by the group since the previous sample.
    """

    state: str
    blocked_on: tuple[int, ...]
    end: int
    committed: int | None
    rate_in: float = 0.0
    rate_out: float = 0.0


@dataclass(frozen=True, slots=True)
class Sample:
    """The topic at one instant.

    Attributes:
        t: Seconds since the monitor started.
        epoch: The latest epoch.
        pending: The epoch waiting for its seal, or ``None``.
        active: The active partition count.
        acks: Producers that acked the pending epoch's barrier.
        producers: Producers registered on the topic.
        parts: Partition -> its sample.
    """

    t: float
    epoch: int
    pending: int | None
    active: int
    acks: int
    producers: int
    parts: dict[int, PartSample] = field(default_factory=dict)


class Monitor:
    """Samples ``topic`` and ``group`` every ``interval`` seconds in a thread.

    Args:
        store: The layout store.
        admin: Kafka admin helpers.
        topic: The topic.
        group: The consumer group.
        interval: Seconds between samples.
        on_sample: Called (in the monitor thread) with every new sample.
    """

    def __init__(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        topic: str,
        group: str,
        interval: float = 0.5,
        on_sample: Callable[[Sample], None] | None = None,
    ) -> None:
        self._store = store
        self._admin = admin
        self._topic = topic
        self._group = group
        self._interval = interval
        self._on_sample = on_sample
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="demo-monitor", daemon=True)
        self.start = time.monotonic()
        self.samples: list[Sample] = []
        self.errors = 0

    def begin(self) -> None:
        """Start sampling."""
        self.start = time.monotonic()
        self._thread.start()

    def stop(self) -> None:
        """Stop sampling and wait for the thread."""
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(10)

    def _run(self) -> None:
        while not self._stop.is_set():
            began = time.monotonic()
            try:
                sample = self.sample(began - self.start)
            except OrderedError:
                self.errors += 1  # a transient Kafka or ZooKeeper error: next round
            else:
                self.samples.append(sample)
                if self._on_sample is not None:
                    self._on_sample(sample)
            self._stop.wait(max(0.05, self._interval - (time.monotonic() - began)))

    def sample(self, t: float) -> Sample:
        """Read the topic and the group once (rates against the previous sample)."""
        record = self._store.get_topic(self._topic)
        if record is None:
            raise OrderedError(f"topic {self._topic} is not adopted")
        status = group_status(self._store, self._admin, self._topic, self._group)
        retired = {
            r.partition: r.state
            for r in retired_status(self._store, self._admin, self._topic)
            if r.partition >= record.active
        }
        acks = producers = 0
        if record.pending is not None:
            acks = len(self._store.acks(self._topic, record.pending))
            producers = len(self._store.producers(self._topic))
        previous = self.samples[-1] if self.samples else None
        parts: dict[int, PartSample] = {}
        for p in status.partitions:
            if p.partition >= record.active and p.partition not in retired:
                continue  # created by an expansion that has not published its epoch yet
            on: tuple[int, ...] = ()
            if p.partition in retired:
                state, on = retired[p.partition], ()
            elif p.state == "open":
                state, on = "active", ()
            else:
                state, on = p.state, tuple(sorted({w.partition for w in p.waits}))
            rate_in = rate_out = 0.0
            before = previous.parts.get(p.partition) if previous else None
            if previous is not None and before is not None and t > previous.t:
                span = t - previous.t
                rate_in = max(0, p.end - before.end) / span
                if p.committed is not None:
                    rate_out = max(0, p.committed - (before.committed or 0)) / span
            parts[p.partition] = PartSample(
                state, on, p.end, p.committed, round(rate_in, 1), round(rate_out, 1)
            )
        return Sample(t, record.epoch, record.pending, record.active, acks, producers, parts)
