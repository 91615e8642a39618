"""Per-batch progress figures of the source: lag behind Kafka, and what the gates hold.

Spark's Kafka source reports ``minOffsetsBehindLatest``, ``maxOffsetsBehindLatest`` and
``avgOffsetsBehindLatest`` as custom metrics of the query's progress. PySpark 4.3's
Python streaming source API has no custom metrics (only ``reportLatestOffset``, which
this source implements), so the driver-side reader logs these figures, plus
``recordsHeldAtGates`` and ``oldestGateWaitMs``, once per planned batch on the
``spark_source.progress`` logger (as JSON), and keeps the last ones in
``OrderedKafkaStreamReader.progress``. Pure computation here; no I/O.
"""

from __future__ import annotations

from collections.abc import Mapping, MutableMapping
from typing import Any

__all__ = ["GateClock", "batch_progress"]

Offsets = Mapping[str, Mapping[int, int]]


class GateClock:
    """Since when each partition has been held at a gate (monotonic seconds)."""

    def __init__(self) -> None:
        self.since: MutableMapping[tuple[str, int], float] = {}

    def update(self, latest: Offsets, capped: Offsets, now: float) -> float:
        """Note which partitions the gates hold now; return the oldest wait in ms.

        A partition is held when its gate cap lies below Kafka's end offset.
        """
        held = {
            (t, p)
            for t, parts in capped.items()
            for p, cap in parts.items()
            if cap < latest.get(t, {}).get(p, cap)
        }
        for key in list(self.since):
            if key not in held:
                del self.since[key]
        for key in held:
            self.since.setdefault(key, now)
        if not self.since:
            return 0.0
        return (now - min(self.since.values())) * 1000.0


def batch_progress(
    latest: Offsets, capped: Offsets, end: Offsets, oldest_wait_ms: float
) -> dict[str, Any]:
    """The figures of one planned batch.

    Args:
        latest: Kafka's end offsets, as read for this batch.
        capped: The ends after the gates (before the read limit).
        end: The batch's end offsets (after the read limit).
        oldest_wait_ms: From :meth:`GateClock.update`.

    Returns:
        ``minOffsetsBehindLatest``/``maxOffsetsBehindLatest``/``avgOffsetsBehindLatest``
        over every partition (``latest - end``, as Spark's Kafka source), and
        ``recordsHeldAtGates`` (offsets between the gate caps and Kafka's end),
        ``partitionsHeldAtGates`` and ``oldestGateWaitMs``.
    """
    behind: list[int] = []
    held = 0
    held_partitions = 0
    for topic, parts in latest.items():
        for p, last in parts.items():
            behind.append(max(0, last - end.get(topic, {}).get(p, last)))
            cap = capped.get(topic, {}).get(p, last)
            if cap < last:
                held += last - cap
                held_partitions += 1
    out: dict[str, Any] = {
        "minOffsetsBehindLatest": min(behind) if behind else 0,
        "maxOffsetsBehindLatest": max(behind) if behind else 0,
        "avgOffsetsBehindLatest": round(sum(behind) / len(behind), 1) if behind else 0.0,
        "recordsHeldAtGates": held,
        "partitionsHeldAtGates": held_partitions,
        "oldestGateWaitMs": round(oldest_wait_ms, 1),
    }
    return out
