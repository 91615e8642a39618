"""Retired partitions (drain, then trim) and consumed retention (KIP-68, client side).

A shrink retires partitions ``[to, from)``; each one's *final offset* is its boundary
in that (sealed) epoch: no record of the layer lands at or past it afterwards. A
retired partition is

* ``retiring`` while its shrink epoch is pending (final offset not yet known),
* ``draining`` while some interested group (:mod:`coordinator.groups.interest`) has not
  committed it up to its final offset, and
* ``trimmed`` once DeleteRecords moved its log start offset to the final offset.

Kafka cannot delete a partition, so a trimmed one stays, empty, and a later expansion
re-activates it (the controller only creates partitions Kafka lacks); the sweep then
drops its record. Which partitions are retired, and their final offsets, follow from
the epoch history; the store keeps only the state
(:class:`~coordinator.kernel.store.RetiredRecord`).

:class:`Sweeper` is the daemon's drain monitor and consumed-retention sweep: per
adopted topic it trims every draining partition that every interested group has
committed up to its final offset, and, if the topic has a consumed retention of ``MS``
milliseconds, every partition to the smaller of the minimum committed offset over the
interested groups and the offset of the first record newer than ``now - MS``.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from coordinator.groups.interest import GroupHold, InterestSettings, topic_interest
from coordinator.kernel.errors import NotAdoptedError, OrderedError, OrderedKafkaError
from coordinator.kernel.hooks import CoordinatorEvents
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore, RetiredRecord
from coordinator.trims.trim import PartitionTrim, Trimmer
from coordinator.trims.trim_rules import (
    RetiredPartition,
    consumed_targets,
    is_trimmed,
    records_retirement,
    retired_partitions,
    retired_state,
    trim_target,
)

__all__ = [
    "DEFAULT_SWEEP_INTERVAL_S",
    "RetiredPartition",
    "RetiredStatus",
    "SweepSettings",
    "Sweeper",
    "consumed_targets",
    "retention_cutoff_ms",
    "retired_partitions",
    "retired_status",
]

_log = logging.getLogger(__name__)

DEFAULT_SWEEP_INTERVAL_S: Final = 30.0
"""The default ``--sweep-interval`` of the daemon."""

Progress = Callable[[str], None]


_INT64_MAX: Final = 2**63 - 1


def retention_cutoff_ms(now: float, consumed_ms: int) -> int | None:
    """The timestamp (ms) a consumed retention of ``consumed_ms`` cuts at, ``now`` minus it.

    ``None`` when that falls before 1970: Kafka takes no negative timestamp (``-1`` and
    ``-2`` mean *latest* and *earliest* to ListOffsets, anything below is an invalid
    offset, and below -2**63 it is not even a ``long``), and no record is that old, so
    the retention trims nothing. Never raises, whatever the stored value.
    """
    if not isinstance(now, (int, float)) or math.isnan(now) or now < 0:
        return None
    now_ms = min(int(min(now, 1e15) * 1000), _INT64_MAX)
    cutoff = now_ms - max(0, int(consumed_ms))
    return cutoff if cutoff >= 0 else None


@dataclass(frozen=True, slots=True)
class RetiredStatus:
    """What ``describe`` shows of one retired partition.

    Attributes:
        partition: The partition.
        state: ``retiring``, ``draining`` or ``trimmed``.
        epoch: The shrink epoch that retired it.
        final_offset: Its final offset (``-1`` while retiring).
        log_start: Its log start offset now.
        end: Its end offset now.
        holders: The interested groups that have not committed it up to the final
            offset, with where they are.
        unknown: Why holders could not be read (``""`` when they could).
    """

    partition: int
    state: str
    epoch: int
    final_offset: int
    log_start: int
    end: int
    holders: tuple[GroupHold, ...]
    unknown: str

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "partition": self.partition,
            "state": self.state,
            "epoch": self.epoch,
            "final_offset": self.final_offset,
            "log_start": self.log_start,
            "end": self.end,
            "held_by": [
                {
                    "group": g.group,
                    "state": g.state,
                    "committed": g.committed.get(self.partition),
                }
                for g in self.holders
            ],
            "unknown": self.unknown or None,
        }


def retired_status(
    store: LayoutStore,
    admin: KafkaAdmin,
    topic: str,
    settings: InterestSettings | None = None,
) -> list[RetiredStatus]:
    """Describe every retired partition of ``topic``: state, final offset, holders.

    Reads only (the group "seen" clock is not advanced).

    Raises:
        NotAdoptedError: The topic is not adopted.
        OrderedKafkaError: Kafka failed.
        StoreError: ZooKeeper failed or holds a bad record.
    """
    record = store.get_topic(topic)
    if record is None:
        raise NotAdoptedError(f"topic {topic} is not adopted")
    count = admin.partition_count(topic)
    # The epochs before the records: compaction writes a record before it drops the
    # epoch, so one of the two reads holds each retirement.
    epochs = store.epochs(topic)
    stored = store.retired(topic)
    retired = retired_partitions(record, epochs, count, stored)
    if not retired:
        return []
    starts = admin.start_offsets(topic, retired)
    ends = admin.end_offsets(topic, retired)
    interest = topic_interest(store, admin, topic, range(count), settings)
    unknown = "; ".join(f"{g}: {m}" for g, m in sorted(interest.unreadable.items()))
    if not unknown and not interest.holding:
        unknown = "no interested group: nothing is known to be consumed"
    out = []
    for p, r in sorted(retired.items()):
        state = retired_state(r, stored.get(p), starts[p])
        final = -1 if r.final_offset is None else r.final_offset
        holders = interest.holders(p, final) if state == "draining" else ()
        why = unknown if state == "draining" else ""
        out.append(RetiredStatus(p, state, r.epoch, final, starts[p], ends[p], holders, why))
    return out


@dataclass(frozen=True)
class SweepSettings:
    """How the daemon's sweep trims.

    Attributes:
        interest: Which groups count.
        trim_timeout: Seconds one DeleteRecords may wait for every replica.
    """

    interest: InterestSettings = field(default_factory=InterestSettings)
    trim_timeout: float = 30.0


class Sweeper:
    """The drain monitor and consumed-retention sweep of the coordinator daemon.

    Args:
        store: The layout store.
        admin: Kafka admin helpers.
        settings: How to trim.
        progress: Called with one line per trim or problem.
        hooks: Objects that receive an ``on_trim`` event per trim (:mod:`coordinator.kernel.hooks`).
    """

    def __init__(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        settings: SweepSettings | None = None,
        progress: Progress | None = None,
        hooks: Sequence[object] = (),
    ) -> None:
        self._store = store
        self._admin = admin
        self._settings = settings or SweepSettings()
        self._progress: Progress = progress or (lambda _message: None)
        self._trimmer = Trimmer(admin)
        self._last_error: dict[str, str] = {}
        self._too_far: dict[str, int] = {}  # topic -> a retention said once to reach past 1970
        self._last_held: dict[str, str] = {}
        self._listed: dict[str, str] | None = None
        self._in_round = False
        self._events = CoordinatorEvents(hooks)

    def sweep(self) -> list[PartitionTrim]:
        """Sweep every adopted topic once; one topic's failure does not stop the others."""
        results: list[PartitionTrim] = []
        self._in_round = True  # the group list is read once per round, when needed
        try:
            for topic in self._store.list_topics():
                try:
                    results += self.sweep_topic(topic)
                    self._last_error.pop(topic, None)
                except OrderedError as exc:
                    message = f"sweep of {topic}: {exc}"
                    if self._last_error.get(topic) != message:
                        self._progress(message)
                    self._last_error[topic] = message
        finally:
            self._in_round, self._listed = False, None
        return results

    def sweep_topic(self, topic: str, now: float | None = None) -> list[PartitionTrim]:
        """Drain-trim the retired partitions of ``topic`` and apply its retention.

        The group list is read once per :meth:`sweep` round; a direct call reads it
        afresh.

        Raises:
            OrderedError: Kafka or ZooKeeper failed.
        """
        now = time.time() if now is None else now
        record = self._store.get_topic(topic)
        if record is None:
            return []
        count = self._admin.partition_count(topic)
        # The epochs before the records: compaction writes a record before it drops
        # the epoch, so one of the two reads holds each retirement.
        epochs = self._store.epochs(topic)
        stored = self._store.retired(topic)
        retired = retired_partitions(record, epochs, count, stored)
        for p in stored:
            if p not in retired:
                # Re-activated by an expansion (or gone): its trim state is history.
                self._store.delete_retired(topic, p)
        retention = self._store.get_retention(topic)
        if not retired and retention is None:
            return []
        partitions = range(count)
        listed = self._listed if self._in_round else None
        if listed is None:
            try:
                listed = self._admin.list_groups()
            except OrderedKafkaError as exc:
                self._progress(f"sweep of {topic}: cannot list the groups, nothing trimmed: {exc}")
                return []
            if self._in_round:
                self._listed = listed
        interest = topic_interest(
            self._store,
            self._admin,
            topic,
            partitions,
            self._settings.interest,
            observe=True,
            listed=listed,
        )
        if interest.unreadable:
            self._progress(
                f"sweep of {topic}: offsets unreadable, nothing trimmed: "
                + "; ".join(f"{g}: {m}" for g, m in sorted(interest.unreadable.items()))
            )
            return []
        starts = self._admin.start_offsets(topic, partitions)
        ends = self._admin.end_offsets(topic, partitions)
        targets: dict[int, int] = {}
        finals: dict[int, RetiredPartition] = {}
        for p, r in sorted(retired.items()):
            if r.final_offset is None:
                continue
            rec = stored.get(p)
            if is_trimmed(r, rec, starts[p]):
                self._mark(topic, r, "trimmed", rec, now)
                continue
            self._mark(topic, r, "draining", rec, now)
            finals[p] = r
        cutoffs: Mapping[int, int] | None = None
        if retention is not None:
            cutoff_ms = retention_cutoff_ms(now, retention.consumed_ms)
            if cutoff_ms is None:
                # No record is that old: retention trims nothing (the drain still runs).
                cutoffs = dict(starts)
                message = (
                    f"sweep of {topic}: consumed retention {retention.consumed_ms} ms reaches "
                    "before 1970, so no record is old enough to trim"
                )
                if self._too_far.get(topic) != retention.consumed_ms:
                    self._progress(message)
                self._too_far[topic] = retention.consumed_ms
            else:
                cutoffs = self._admin.offsets_for_time(topic, partitions, cutoff_ms)
        self._say_held(topic, interest.holding, finals, cutoffs is not None)
        for p in partitions:
            draining = finals.get(p)
            target = trim_target(
                starts[p],
                interest.min_committed(p),
                ends[p],
                consumed=cutoffs is not None,
                cutoff=None if cutoffs is None else cutoffs.get(p, starts[p]),
                final=None if draining is None else draining.final_offset,
            )
            if target is not None:
                targets[p] = target
        if not targets:
            return []
        report = self._trimmer.trim(
            {(topic, p): o for p, o in targets.items()}, timeout=self._settings.trim_timeout
        )
        for result in report.results:
            p = result.partition
            final = finals[p].final_offset if p in finals else None
            reason = "drained" if final is not None and result.requested >= final else "retention"
            self._events.trim(topic, p, result.requested, reason, result.ok)
            if not result.ok:
                self._progress(f"sweep of {topic}: partition {p} not trimmed: {result.message}")
                continue
            drained = finals.get(p)
            if (
                drained is not None
                and drained.final_offset is not None
                and result.requested >= drained.final_offset
            ):
                self._mark(topic, drained, "trimmed", stored.get(p), now)
                self._progress(
                    f"retired partition {p} of {topic} trimmed to its final offset "
                    f"{drained.final_offset}"
                )
            else:
                self._progress(f"consumed retention: {topic}[{p}] trimmed to {result.requested}")
        return list(report.results)

    def _say_held(
        self,
        topic: str,
        holding: Sequence[GroupHold],
        finals: Mapping[int, RetiredPartition],
        retention: bool,
    ) -> None:
        """Name, once per change, the groups with interest but no commit holding trims."""
        idle = sorted(g.group for g in holding if not g.committed)
        message = ""
        if idle and (finals or retention):
            message = (
                f"sweep of {topic}: held at offset 0 by group(s) with interest but no "
                f"commit: {', '.join(idle)} (released by a commit, or once such a group has "
                "no member and registered longer ago than --stale-group-ms)"
            )
        if message and self._last_held.get(topic) != message:
            self._progress(message)
        self._last_held[topic] = message

    def _mark(
        self,
        topic: str,
        r: RetiredPartition,
        state: str,
        stored: RetiredRecord | None,
        now: float,
    ) -> None:
        assert r.final_offset is not None
        if records_retirement(stored, r, state):
            return
        self._store.put_retired(
            RetiredRecord(
                topic=topic,
                partition=r.partition,
                epoch=r.epoch,
                final_offset=r.final_offset,
                state="trimmed" if state == "trimmed" else "draining",
                updated_at=now,
                trimmed_at=now if state == "trimmed" else None,
            )
        )
