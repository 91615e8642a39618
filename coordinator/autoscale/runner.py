"""The autoscaler the leading coordinator runs: sample, decide, act, record.

Every ``interval`` seconds :meth:`Autoscaler.tick` reads the policies of the adopted
topics (:mod:`coordinator.kernel.store.autoscale`), samples each topic's end offsets (the sum
over every physical partition; no broker metrics needed) and, for a policy with
``max_lag``, the consumer lag of its interested groups (:mod:`coordinator.groups.interest`,
from the same end offsets), asks
:func:`coordinator.autoscale.decide.decide` and, unless the policy is a dry run, runs
the same controller transition a person would (``Controller.expand`` / ``shrink``).
A decision that acts, or whose reason differs from the last one recorded, is logged
through ``progress`` and kept in the topic's :class:`AutoscaleStatus` (shown by
``ordered describe``); holds that repeat are not written again, so an idle autoscaler
costs ZooKeeper one read per topic per tick.

A transition whose barrier outlasts ``transition_timeout`` stays pending: the daemon's
scan completes it, and the autoscaler holds while it is pending. Samples live in
memory; a new leader gathers a window's worth before it acts, and keeps the cooldown
from the stored status and the topic's latest epoch.
"""

from __future__ import annotations

import collections
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from confluent_kafka import Consumer, KafkaException, TopicPartition

from coordinator.autoscale.decide import Action, Decision, RateSample, Thresholds, decide
from coordinator.control.controller import BarrierTimeoutError, Controller
from coordinator.groups.interest import InterestSettings, topic_interest
from coordinator.kernel.errors import OrderedError
from coordinator.kernel.hooks import CoordinatorEvents
from coordinator.kernel.identity import random_token
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore, TopicRecord
from coordinator.kernel.store.autoscale_records import (
    DECISION_LOG_SIZE,
    AutoscalePolicy,
    AutoscaleStatus,
)

__all__ = ["DEFAULT_AUTOSCALE_INTERVAL_S", "Autoscaler", "RecordSizer"]

_log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger(f"{__name__}.librdkafka")

DEFAULT_AUTOSCALE_INTERVAL_S = 10.0
"""Seconds between autoscaler ticks (samples and decisions) in the daemon."""

_SIZE_SAMPLE_RECORDS = 64
_SIZE_REFRESH_S = 60.0
_GROUPS_REFRESH_S = 60.0
"""Seconds between full listings of the cluster's groups for a topic's consumer lag."""


class RecordSizer:
    """Estimates a topic's mean record size (key + value bytes) from its newest records.

    Used by ``bytes`` policies: Kafka's end offsets count records, not bytes, so the
    byte rate is the record rate times the mean size of up to 64 of the newest records
    of the busiest partition, re-measured at most once a minute per topic.
    """

    def __init__(self, bootstrap_servers: str) -> None:
        self._bootstrap = bootstrap_servers
        self._consumer: Consumer | None = None
        self._sizes: dict[str, tuple[float, float]] = {}

    def mean_size(self, topic: str, ends: dict[int, int], starts: dict[int, int]) -> float:
        """Mean bytes per record of ``topic`` (the last estimate while it is fresh)."""
        now = time.monotonic()
        cached = self._sizes.get(topic)
        if cached is not None and now - cached[1] < _SIZE_REFRESH_S:
            return cached[0]
        size = self._measure(topic, ends, starts)
        if size is None:
            return cached[0] if cached is not None else 0.0
        self._sizes[topic] = (size, now)
        return size

    def _measure(self, topic: str, ends: dict[int, int], starts: dict[int, int]) -> float | None:
        readable = {p: e for p, e in ends.items() if e > starts.get(p, 0)}
        if not readable:
            return None
        partition = max(readable, key=lambda p: readable[p] - starts.get(p, 0))
        first = max(starts.get(partition, 0), readable[partition] - _SIZE_SAMPLE_RECORDS)
        if self._consumer is None:
            self._consumer = Consumer(
                {
                    "bootstrap.servers": self._bootstrap,
                    "group.id": f"ordered-autoscaler-{random_token()}",
                    "enable.auto.commit": False,
                    "enable.partition.eof": True,
                    # Not librdkafka's stderr: the daemon's logging (and its throttle).
                    "logger": _rdkafka_log,
                }
            )
        try:
            self._consumer.assign([TopicPartition(topic, partition, first)])
            total = 0
            count = 0
            deadline = time.monotonic() + 2.0
            while count < readable[partition] - first and time.monotonic() < deadline:
                for message in self._consumer.consume(_SIZE_SAMPLE_RECORDS, 0.5):
                    if message.error() is not None:
                        continue
                    total += len(message.key() or b"") + len(message.value() or b"")
                    count += 1
            self._consumer.unassign()
        except KafkaException as exc:
            _log.warning("autoscaler: sizing records of %s failed: %s", topic, exc)
            return None
        return total / count if count else None

    def close(self) -> None:
        """Close the sampling consumer."""
        if self._consumer is not None:
            self._consumer.close()
            self._consumer = None


@dataclass
class _TopicSamples:
    samples: collections.deque[RateSample] = field(default_factory=collections.deque)
    bytes_total: float = 0.0
    last_records: int | None = None
    last_logged: str | None = None
    # The groups with commits on the topic at the last full listing, and their states.
    groups: dict[str, str] | None = None
    groups_at: float = 0.0


class Autoscaler:
    """Samples, decides and acts for every topic with an enabled policy.

    Args:
        store: The layout store.
        admin: Kafka admin helpers (end offsets).
        controller: Runs the expansions and shrinks.
        identifier: The daemon's name, written into each status.
        progress: Called with a line for every decision that acts or changes.
        events: Where every decision is reported (:mod:`coordinator.kernel.hooks`).
        transition_timeout: Seconds one expansion or shrink may wait in the barrier
            before the autoscaler returns to its other topics (the epoch stays pending
            and the daemon completes it).
        interest: Which groups count for the consumer lag (the daemon's sweep
            settings, so the groups that hold a trim back are the ones whose lag counts).
    """

    def __init__(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        controller: Controller,
        identifier: str,
        progress: Callable[[str], None] | None = None,
        events: CoordinatorEvents | None = None,
        transition_timeout: float = 10.0,
        interest: InterestSettings | None = None,
    ) -> None:
        self._store = store
        self._interest = interest
        self._admin = admin
        self._controller = controller
        self._identifier = identifier
        self._progress = progress or (lambda _line: None)
        self._timeout = transition_timeout
        self._events = events or CoordinatorEvents()
        self._topics: dict[str, _TopicSamples] = {}
        self._sizer = RecordSizer(admin.bootstrap_servers)

    def close(self) -> None:
        """Release the sampling consumer."""
        self._sizer.close()

    def tick(
        self, now: float | None = None, topics: Iterable[str] | None = None
    ) -> dict[str, Decision]:
        """Sample every topic with an enabled policy, decide, and act; return decisions.

        Args:
            now: The monotonic time (default now).
            topics: The topics that may have a policy (default every adopted topic; the
                daemon passes those whose node has a policy child, from its cache).
        """
        mono = time.monotonic() if now is None else now
        decisions: dict[str, Decision] = {}
        seen = set()
        for topic in self._store.list_topics() if topics is None else topics:
            policy = self._store.autoscale_policy(topic)
            if policy is None or not policy.enabled:
                continue
            record = self._store.get_topic(topic)
            if record is None or not record.ordered:
                continue
            seen.add(topic)
            try:
                decisions[topic] = self._tick_topic(topic, record, policy, mono)
            except OrderedError as exc:
                self._progress(f"autoscale {topic}: {exc}")
        for gone in set(self._topics) - seen:
            del self._topics[gone]
        return decisions

    def _sample(self, topic: str, record: TopicRecord, policy: AutoscalePolicy, now: float) -> None:
        state = self._topics.setdefault(topic, _TopicSamples())
        partitions = range(record.physical)
        ends = self._admin.end_offsets(topic, partitions)
        records = sum(ends.values())
        if policy.metric == "bytes":
            if state.last_records is not None and records > state.last_records:
                starts = self._admin.start_offsets(topic, partitions)
                size = self._sizer.mean_size(topic, ends, starts)
                state.bytes_total += (records - state.last_records) * size
            total = state.bytes_total
        else:
            total = float(records)
        state.last_records = records
        lag = None if policy.max_lag is None else self._lag(topic, state, ends, now)
        state.samples.append(RateSample(now, total, record.active, lag))
        keep = max(policy.up_window_s, policy.down_window_s) * 1.5
        while len(state.samples) > 2 and state.samples[1].at < now - keep:
            state.samples.popleft()

    def _lag(
        self, topic: str, state: _TopicSamples, ends: dict[int, int], now: float
    ) -> float | None:
        """The largest lag (records) of the topic's holding groups; ``None``: unknown.

        A group's lag is the sum over the physical partitions of how far its position
        (its commit, else 0) is behind the end offsets this tick sampled. No holding
        group at all is no lag. Asking every group of the cluster for its offsets costs
        one OffsetFetch per group, so that is done once a minute; the ticks between
        ask only the groups found then (and the registered ordered groups).
        """
        full = state.groups is None or now - state.groups_at >= _GROUPS_REFRESH_S
        try:
            interest = topic_interest(
                self._store,
                self._admin,
                topic,
                ends,
                self._interest,
                listed=None if full else state.groups,
            )
        except OrderedError as exc:
            _log.warning("autoscaler: reading the consumer lag of %s failed: %s", topic, exc)
            return None
        if interest.unreadable:
            return None
        if full:
            state.groups = {g.group: g.state for g in interest.groups}
            state.groups_at = now
        return float(
            max(
                (
                    sum(max(0, end - g.position(p)) for p, end in ends.items())
                    for g in interest.holding
                ),
                default=0,
            )
        )

    def _last_change(self, topic: str, record: TopicRecord, now: float) -> float | None:
        """Monotonic time of the latest layout change (the autoscaler's or a person's)."""
        wall = time.time()
        times = []
        status = self._store.autoscale_status(topic)
        if status is not None and status.last_change_at is not None:
            times.append(status.last_change_at)
        if record.epoch > 0:
            epoch = self._store.find_epoch(topic, record.epoch)
            if epoch is not None:
                times.append(epoch.sealed_at or epoch.created_at)
        if not times:
            return None
        return now - max(0.0, wall - max(times))

    def _tick_topic(
        self, topic: str, record: TopicRecord, policy: AutoscalePolicy, now: float
    ) -> Decision:
        self._sample(topic, record, policy, now)
        thresholds = Thresholds(
            target=policy.target_per_s,
            min_active=policy.min_active,
            max_active=policy.max_active,
            up_window_s=policy.up_window_s,
            down_window_s=policy.down_window_s,
            cooldown_s=policy.cooldown_s,
            max_step_factor=policy.max_step_factor,
            max_lag=None if policy.max_lag is None else float(policy.max_lag),
        )
        decision = decide(
            self._topics[topic].samples,
            now,
            thresholds=thresholds,
            initial=record.initial,
            active=record.active,
            pending=record.pending is not None,
            last_change_at=self._last_change(topic, record, now),
        )
        acted = False
        outcome = ""
        if decision.action is not Action.HOLD and not policy.dry_run:
            acted, outcome = self._act(topic, decision)
        if decision.lag is not None:
            self._events.autoscale_lag(topic, decision.lag)
        self._events.autoscale_decision(
            topic,
            decision.action.value,
            decision.active,
            decision.to,
            -1.0 if decision.rate_up is None else decision.rate_up,
            acted,
        )
        self._record(topic, policy, decision, acted, outcome)
        return decision

    def _act(self, topic: str, decision: Decision) -> tuple[bool, str]:
        run = self._controller.expand if decision.action is Action.GROW else self._controller.shrink
        try:
            result = run(topic, decision.to, timeout=self._timeout)
        except BarrierTimeoutError:
            return True, "published; the barrier is still waiting (the daemon completes it)"
        except OrderedError as exc:
            return False, f"not applied: {exc}"
        return True, f"sealed epoch {result.epoch} in {result.seconds:.2f} s"

    def _record(
        self, topic: str, policy: AutoscalePolicy, decision: Decision, acted: bool, outcome: str
    ) -> None:
        state = self._topics[topic]
        reason = decision.reason + (f"; {outcome}" if outcome else "")
        # A hold is written once per rule: a steady state costs no ZooKeeper writes.
        if decision.action is Action.HOLD and state.last_logged == decision.rule:
            return
        state.last_logged = decision.rule
        wall = time.time()
        verb = {Action.GROW: "grow", Action.SHRINK: "shrink", Action.HOLD: "hold"}[decision.action]
        mode = " (dry run)" if policy.dry_run and decision.action is not Action.HOLD else ""
        self._progress(
            f"autoscale {topic}: {verb} {decision.active} -> {decision.to}{mode}: {reason}"
        )
        previous = self._store.autoscale_status(topic)
        entry = {
            **decision.to_dict(),
            "reason": reason,
            "at": round(wall, 3),
            "acted": acted,
            "dry_run": policy.dry_run,
        }
        decisions = (*(previous.decisions if previous else ()), entry)[-DECISION_LOG_SIZE:]
        last_change = previous.last_change_at if previous else None
        if acted:
            last_change = wall
        self._store.put_autoscale_status(
            AutoscaleStatus(
                topic=topic,
                leader=self._identifier,
                last_change_at=last_change,
                decisions=decisions,
                updated_at=wall,
            ),
        )
