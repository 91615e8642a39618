"""History compaction: drop a topic's old epochs once no record in Kafka needs their gates.

:func:`compact_topic` reads the topic's epochs and Kafka's log start offsets, asks the
pure rule (:func:`linear_hash.compact.compactable`) which oldest epochs can go, and
removes them through :meth:`~coordinator.kernel.store.LayoutStore.drop_epochs` (validated
before any write, oldest first, idempotent). ``ordered compact TOPIC`` runs it once; the
coordinator daemon's leader runs it for every adopted topic after each sweep (trims and
consumed retention are what move log starts).

A retired partition is known by the shrink epoch that retired it; before that epoch
goes, its retirement (epoch, final offset, trimmed) is written to the partition's
:class:`~coordinator.kernel.store.RetiredRecord`, where
:func:`~coordinator.trims.trim_rules.retired_partitions` finds it afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from coordinator.kernel.errors import NotAdoptedError, OrderedError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.topic_ids import check_topic_id
from coordinator.trims.trim_rules import retired_partitions, trimmed_record
from linear_hash.compact import Compaction, compactable
from linear_hash.gating import EpochInfo

__all__ = ["CompactionReport", "compact_all", "compact_topic"]


@dataclass(frozen=True)
class CompactionReport:
    """What one compaction of one topic found and did.

    Attributes:
        topic: The topic.
        epochs: The epochs present before, ascending.
        plan: The rule's answer (what may go, the base, what holds the rest).
        dropped: The epochs this run deleted (empty on a dry run).
        dry_run: Nothing was written.
        log_starts: Partition -> the log start offset the rule used.
        recorded: Retired partitions whose shrink epoch goes: their retirement is kept
            in their :class:`~coordinator.kernel.store.RetiredRecord` (written first).
    """

    topic: str
    epochs: tuple[int, ...]
    plan: Compaction
    dropped: tuple[int, ...] = ()
    dry_run: bool = False
    log_starts: Mapping[int, int] = field(default_factory=dict)
    recorded: tuple[int, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready form."""
        return {
            "topic": self.topic,
            "epochs_before": list(self.epochs),
            "epochs_after": [e for e in self.epochs if e not in self.dropped],
            "droppable": list(self.plan.drop),
            "dropped": list(self.dropped),
            "base": self.plan.base,
            "held_by": None if self.plan.held_by is None else list(self.plan.held_by),
            "reason": self.plan.reason,
            "dry_run": self.dry_run,
            "log_starts": {str(p): o for p, o in sorted(self.log_starts.items())},
            "recorded_retired": list(self.recorded),
        }

    def text(self) -> str:
        """One line for people."""
        before = f"{len(self.epochs)} epoch(s)" + (
            f" {self.epochs[0]}..{self.epochs[-1]}" if self.epochs else ""
        )
        if self.dry_run:
            act = f"would drop {len(self.plan.drop)}"
        else:
            act = f"dropped {len(self.dropped)}"
        shown = self.plan.drop if self.dry_run else self.dropped
        listed = (
            ""
            if not shown
            else f" ({shown[0]})"
            if len(shown) == 1
            else f" ({shown[0]}..{shown[-1]})"
        )
        return (
            f"{self.topic}: {before}; {act}{listed}; kept from {self.plan.base}: {self.plan.reason}"
        )


def compact_topic(
    store: LayoutStore, admin: KafkaAdmin, topic: str, *, dry_run: bool = False
) -> CompactionReport:
    """Drop the epochs of ``topic`` that no record still in Kafka needs.

    The epochs are read before the log starts: a sealed epoch never changes and log
    starts only grow, so what the rule finds passed stays passed.

    Raises:
        NotAdoptedError: The topic is not adopted.
        TopicIdMismatchError: The layout was adopted for another topic id.
        LayoutError: The store refused the removal (nothing was deleted).
        OrderedKafkaError: Kafka failed.
        StoreError: ZooKeeper failed or holds a bad record.
    """
    record = store.get_topic(topic)
    if record is None:
        raise NotAdoptedError(
            f"topic {topic} is not adopted (adopt it first: ordered adopt {topic})"
        )
    epochs = store.epochs(topic)
    numbers = tuple(e.epoch for e in epochs)
    if not record.ordered or len(epochs) < 2:
        # Nothing can go (the newest epoch always stays): no Kafka request, which the
        # daemon would otherwise send for every adopted topic at every sweep.
        why = "not ordered" if not record.ordered else "one epoch: nothing to drop"
        return CompactionReport(
            topic, numbers, Compaction((), numbers[0] if numbers else -1, None, why)
        )
    kafka = admin.describe_topic(topic)
    check_topic_id(record, kafka.topic_id)
    starts = admin.start_offsets(topic, range(kafka.partitions))
    stored = store.retired(topic)  # after the epochs (see retired_partitions)
    retired = retired_partitions(record, epochs, kafka.partitions, stored)
    plan = compactable([EpochInfo.from_record(e) for e in epochs], starts)
    drop = set(plan.drop)
    # A retired partition whose shrink epoch goes keeps its retirement in its record,
    # written first: the drain monitor and describe read it there afterwards.
    # Its epoch is passed, so its log start is at or past its final offset: trimmed.
    now = time.time()
    records = [
        trimmed_record(topic, r, stored.get(p), now)
        for p, r in sorted(retired.items())
        if r.epoch in drop
    ]
    recorded = tuple(r.partition for r in records)
    if dry_run or not plan.drop:
        return CompactionReport(topic, numbers, plan, (), dry_run, starts, recorded)
    going = [e for e in epochs if e.epoch in drop]
    store.check_drop(topic, going)  # before any write, the records' included
    for retirement in records:
        if retirement != stored.get(retirement.partition):
            store.put_retired(retirement)
    dropped = store.drop_epochs(topic, going)
    return CompactionReport(topic, numbers, plan, tuple(dropped), False, starts, recorded)


def compact_all(
    store: LayoutStore, admin: KafkaAdmin, progress: Callable[[str], None]
) -> list[CompactionReport]:
    """Compact every adopted topic; one topic's failure is reported and the rest go on."""
    out = []
    for topic in store.list_topics():
        try:
            report = compact_topic(store, admin, topic)
        except OrderedError as exc:
            progress(f"history compaction of {topic}: {exc}")
            continue
        if report.dropped:
            progress(f"history compaction: {report.text()}")
        out.append(report)
    return out
