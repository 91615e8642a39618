"""The demo's end-to-end order check, from the files its workers write.

Inputs (:mod:`ordered.demo.worker`): the producers' acknowledged records and each
consumer group's deliveries, merged over the group's members by their monotonic time
stamps. The check, per ``(producer, key)``:

* **order**: the first deliveries of its records come in sequence order. A record first
  delivered after a record with a higher sequence number is a violation, reported with
  the key, both sequence numbers and the partitions and offsets of both records;
* **lost**: every acknowledged record is delivered at least once;
* **duplicates**: deliveries past the first are counted (a rebalance may re-deliver
  what was not committed yet; that is allowed and is no violation).

Small on purpose and self-contained: it reads the files and nothing else.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["CheckResult", "Violation", "check", "read_acks", "read_deliveries", "worker_summary"]

_Record = tuple[str, str, int]  # producer, key, sequence


@dataclass(frozen=True, slots=True)
class Violation:
    """A record delivered first after a later record of the same producer and key.

    Attributes:
        producer: The producer.
        key: The key.
        seq: The sequence number delivered late.
        after_seq: The higher sequence number delivered before it.
        at: ``(partition, offset)`` of the late record.
        after_at: ``(partition, offset)`` of the record delivered before it.
    """

    producer: str
    key: str
    seq: int
    after_seq: int
    at: tuple[int, int]
    after_at: tuple[int, int]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "producer": self.producer,
            "key": self.key,
            "seq": self.seq,
            "after_seq": self.after_seq,
            "partition": self.at[0],
            "offset": self.at[1],
            "after_partition": self.after_at[0],
            "after_offset": self.after_at[1],
        }


@dataclass(slots=True)
class CheckResult:
    """What :func:`check` found.

    Attributes:
        acked: Records the producers had acknowledged.
        delivered: Distinct records delivered.
        duplicates: Deliveries past the first of a record.
        violations: Order violations (first deliveries out of sequence order).
        lost: Acknowledged records never delivered, as ``(producer, key, seq)``.
    """

    acked: int = 0
    delivered: int = 0
    duplicates: int = 0
    violations: list[Violation] = field(default_factory=list)
    lost: list[_Record] = field(default_factory=list)


def _lines(path: Path) -> Iterable[list[str]]:
    with path.open() as f:
        for line in f:
            if line and not line.startswith("#"):
                fields = line.split()
                if fields:
                    yield fields


def read_acks(paths: Iterable[Path]) -> dict[_Record, tuple[int, int]]:
    """Acknowledged records -> ``(partition, offset)``, from producer files."""
    out: dict[_Record, tuple[int, int]] = {}
    for path in paths:
        for producer, key, seq, partition, offset in _lines(path):
            out[(producer, key, int(seq))] = (int(partition), int(offset))
    return out


def read_deliveries(paths: Iterable[Path]) -> list[tuple[int, _Record, tuple[int, int]]]:
    """One group's deliveries ``(time ns, record, (partition, offset))`` in time order."""
    out = []
    for path in paths:
        for ns, producer, key, seq, partition, offset in _lines(path):
            out.append((int(ns), (producer, key, int(seq)), (int(partition), int(offset))))
    # Stable: one member's lines of the same instant keep their file order.
    out.sort(key=lambda d: d[0])
    return out


def worker_summary(path: Path) -> dict[str, Any]:
    """The ``# {json}`` summary line a worker wrote last ({} if it wrote none)."""
    last: dict[str, Any] = {}
    with path.open() as f:
        for line in f:
            if line.startswith("# "):
                last = json.loads(line[2:])
    return last


def check(
    acks: dict[_Record, tuple[int, int]],
    deliveries: list[tuple[int, _Record, tuple[int, int]]],
) -> CheckResult:
    """Check one group's deliveries against the acknowledged records."""
    result = CheckResult(acked=len(acks))
    first: set[_Record] = set()
    highest: dict[tuple[str, str], tuple[int, tuple[int, int]]] = {}
    for _ns, record, at in deliveries:
        if record in first:
            result.duplicates += 1
            continue
        first.add(record)
        producer, key, seq = record
        top = highest.get((producer, key))
        if top is not None and seq < top[0]:
            result.violations.append(Violation(producer, key, seq, top[0], at, top[1]))
        else:
            highest[(producer, key)] = (seq, at)
    result.delivered = len(first)
    result.lost = sorted(r for r in acks if r not in first)
    return result
