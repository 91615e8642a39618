"""The controller's side of the consumer barrier: announce an epoch, wait for the consumers.

``docs/consumer-barrier.md`` is the protocol. Before a transition publishes epoch ``e``
for producers, :meth:`ConsumerBarrier.announce_and_wait` writes ``e``'s announcement
(a node no producer reads), lists the consumers registered on the topic before it, and
waits until each has acked it, or its registration is gone (session ended, or it left),
or it was evicted after :attr:`ConsumerBarrier.ack_bound_s` and its lease ran out.
Only then does the publish step run. Nothing is announced when the feature is off and
no consumer is registered (a fleet of older consumers, or a barrier never enabled).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Final

from coordinator.kernel.errors import BarrierTimeoutError
from coordinator.kernel.identity import random_token
from coordinator.kernel.store import (
    CONSUMER_BARRIER,
    AnnouncementRecord,
    LayoutStore,
    TopicRecord,
)
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.store.watches import watch_children_node

__all__ = [
    "CONSUMER_ACK_BOUND_S",
    "EVICTION_GRACE_S",
    "AnnouncementStatus",
    "ConsumerBarrier",
    "announcement_status",
]

_log = logging.getLogger(__name__)

CONSUMER_ACK_BOUND_S: Final = 10.0
"""How long a registered consumer may take to ack an announcement before it is evicted.

A consumer acks from its ZooKeeper client's event thread, within milliseconds, whatever
its application does (``docs/consumer-barrier.md``, "A consumer that does not ack"):
only a consumer whose event thread is stuck, or whose ack write fails, reaches it.
"""

EVICTION_GRACE_S: Final = 1.0
"""Seconds added to an evicted consumer's lease before the publish may go on."""

_RECHECK_S: Final = 0.5


@dataclass(frozen=True)
class AnnouncementStatus:
    """Where an announcement's wait stands (see :func:`announcement_status`).

    Attributes:
        waiting: Consumers that must still ack (registered before the announcement).
        evict: Those of them past the ack bound: to evict now.
        lease_until: The latest unix time until which an evicted consumer's lease may
            still run (0: none).
    """

    waiting: tuple[str, ...]
    evict: tuple[str, ...]
    lease_until: float

    @property
    def passed(self) -> bool:
        """Nobody waited for, and every evicted consumer's lease ran out."""
        return not self.waiting


def announcement_status(
    announcement: AnnouncementRecord,
    registered: dict[str, float],
    acked: set[str],
    now: float,
    bound_s: float,
) -> AnnouncementStatus:
    """Decide the consumer barrier of an announcement: pure, no I/O.

    Args:
        announcement: The announcement (its ``evicted`` clocks).
        registered: Consumer id -> how many seconds its lease lasts, for the consumers
            registered *before* the announcement was written (a later one read it when
            it registered).
        acked: Ids with an ack of this announcement.
        now: The current unix time.
        bound_s: The ack bound, counted from ``announced_at``: every consumer waited
            for was registered then, and the clock survives a controller's failover
            and a run that timed out (a run shorter than the bound would otherwise
            never evict anyone).
    """
    waiting: list[str] = []
    evict: list[str] = []
    lease_until = 0.0
    for cid, until in announcement.evicted.items():
        if now < until:
            waiting.append(cid)
            lease_until = max(lease_until, until)
    for cid in sorted(registered):
        if cid in acked or cid in announcement.evicted:
            continue
        waiting.append(cid)
        if now - announcement.announced_at >= bound_s:
            evict.append(cid)
    return AnnouncementStatus(tuple(waiting), tuple(evict), lease_until)


class ConsumerBarrier:
    """Announces epochs and waits for the registered consumers (one per controller).

    Args:
        store: The layout store.
        progress: Called with one line of progress at a time.
        cancel: Set when the controller stops (the wait ends as on a timeout).
        ack_bound_s: :data:`CONSUMER_ACK_BOUND_S` unless given.
    """

    def __init__(
        self,
        store: LayoutStore,
        progress: Callable[[str], None],
        cancel: threading.Event,
        ack_bound_s: float = CONSUMER_ACK_BOUND_S,
    ) -> None:
        self._store = store
        self._progress = progress
        self._cancel = cancel
        self.ack_bound_s = ack_bound_s

    def needed(self, topic: str) -> bool:
        """Whether a transition of ``topic`` announces: the flag is on, or consumers registered.

        Consumers that registered while the flag was on may still rely on the barrier
        after it was turned off (until they saw that): they are waited for all the same.

        Raises:
            StoreError: ZooKeeper is unreachable or a record fails its check.
        """
        if self._store.feature_enabled(CONSUMER_BARRIER):
            return True
        return bool(self._store.barrier_consumers(topic))

    def announce_and_wait(self, record: TopicRecord, target: int, deadline: float) -> None:
        """Announce epoch ``record.epoch + 1`` (to ``target``) and wait for the consumers.

        Idempotent: an announcement of the same epoch and target left by an earlier run
        is kept (its id and eviction clocks), so acks already written count.

        Raises:
            BarrierTimeoutError: ``deadline`` (monotonic) passed or the controller was
                stopped; the announcement stays, the next run resumes it.
            StoreError: ZooKeeper failed.
        """
        topic = record.topic
        if not self.needed(topic):
            return
        number = record.epoch + 1
        current, _ = self._store.get_announcement(topic)
        if current is not None and current.epoch == number and current.to_active == target:
            announcement = current
        elif current is not None and current.epoch == number:
            # Another target for the same epoch: acks must name the new id, but the ack
            # bound and the eviction clocks go on (a consumer stuck since the first
            # announcement is not given a fresh bound by every retry of an autoscaler).
            announcement = replace(current, id=random_token(32), to_active=target)
        else:
            announcement = AnnouncementRecord(
                topic=topic,
                id=random_token(32),
                epoch=number,
                to_active=target,
                announced_at=time.time(),
                evicted={},
            )
        zxid = self._store.announce(announcement)
        self._progress(
            f"epoch {number} of {topic} announced to consumers ({record.active} -> {target})"
        )
        self._wait(announcement, zxid, deadline)

    def _wait(self, announcement: AnnouncementRecord, zxid: int, deadline: float) -> None:
        topic = announcement.topic
        changed = threading.Event()
        root = self._store.root
        client = self._store.client
        watches = [
            watch_children_node(client, path, lambda _children: changed.set())
            for path in (
                store_paths.barrier_acks_path(root, topic),
                store_paths.barrier_consumers_path(root, topic),
            )
        ]
        # Read once per consumer (a registration's creation and lease never change, an
        # ack of this announcement stays one): a round costs two listings plus what is
        # new, not a read of every registration and ack (N^2 reads over N consumers).
        leases: dict[str, float | None] = {}  # id -> lease in s (None: registered after)
        acked: set[str] = set()
        try:
            while True:
                changed.clear()
                names = self._store.barrier_consumer_ids(topic)
                for cid in names - set(leases):
                    got = self._store.barrier_registration(topic, cid)
                    if got is not None:
                        reg, czxid = got
                        # Registered before the announcement: waited for. After it: its
                        # registration came first, then its read, which saw it.
                        leases[cid] = reg.lease_ms / 1000.0 if czxid < zxid else None
                registered = {
                    cid: lease
                    for cid, lease in leases.items()
                    if cid in names and lease is not None
                }
                for cid in (self._store.barrier_ack_ids(topic) & set(registered)) - acked:
                    ack = self._store.barrier_ack(topic, cid)
                    if ack is not None and ack.announcement == announcement.id:
                        acked.add(cid)
                now = time.time()
                status = announcement_status(announcement, registered, acked, now, self.ack_bound_s)
                if status.evict:
                    announcement = self._evict(announcement, status.evict, registered)
                    continue
                if status.passed:
                    return
                self._progress(
                    f"epoch {announcement.epoch} of {topic}: waiting for "
                    f"{len(status.waiting)} consumer(s) ({', '.join(status.waiting)})"
                )
                if self._cancel.is_set() or time.monotonic() >= deadline:
                    raise BarrierTimeoutError(
                        f"epoch {announcement.epoch} of {topic} is announced, not published: "
                        f"consumer(s) {', '.join(status.waiting)} did not ack in time; it "
                        "completes when the transition runs again"
                    )
                wait = min(_RECHECK_S, max(0.0, deadline - time.monotonic()))
                if status.lease_until:
                    wait = min(wait, max(0.0, status.lease_until - now))
                changed.wait(wait)
        finally:
            for watch in watches:
                watch.stop()

    def _evict(
        self, announcement: AnnouncementRecord, evict: tuple[str, ...], leases: dict[str, float]
    ) -> AnnouncementRecord:
        """Record the evictions (with their lease clocks), then delete the consumers' nodes.

        Recorded first: a controller that takes over after the deletion still waits out
        the leases.
        """
        now = time.time()
        evicted = dict(announcement.evicted)
        for cid in evict:
            evicted[cid] = now + leases[cid] + EVICTION_GRACE_S
        announcement = replace(announcement, evicted=evicted)
        self._store.announce(announcement)
        for cid in evict:
            _log.warning(
                "consumer %s did not ack epoch %d of %s within %.1f s: evicted (it checks "
                "its fetches until it registers again)",
                cid,
                announcement.epoch,
                announcement.topic,
                self.ack_bound_s,
            )
            # A failure raises: a consumer whose member node stays would keep renewing
            # its lease, so the run fails and a later one evicts again.
            self._store.evict_consumer(announcement.topic, cid)
        return announcement
