"""The leader daemon's part of the position service: relay committed offsets to waiters.

Consumers publish the boundary commits they make themselves (:mod:`coordinator.kernel.positions`),
but a gate may wait on progress that no ordered consumer publishes: a commit by a plain
consumer or by user code, a consumer that died between its commit and its publish, a
group that commits with ``enable.auto.commit``. The relay closes that gap. In each
round it takes the declared interest of every group (``{root}/groups/*/interest``),
asks Kafka for the group's committed offsets of exactly the partitions someone waits on
(one OffsetFetch per group, the groups in parallel), and publishes a progress record
when a committed offset reached a declared wait and grew past the recorded one; the
waiters' watches fire and they re-check their gates from Kafka. A tail of Kafka's
``__consumer_offsets`` (:mod:`coordinator.relay.commit_tail`) sees each commit as it is made:
a commit on a topic a group waits in starts a round of just that group at once, and so
does a change of the group's waits. A full round of every group runs every ``interval``
as a safety net (every second while the tail reads the commits; at ``interval``
without it).

The interest comes from a :class:`~coordinator.relay.wait_cache.WaitCache` that ZooKeeper's
watches keep current, so a round reads nothing from ZooKeeper while nothing changes;
every ``check_interval`` a round reads the interest directly instead and rebuilds the
cache if the two disagree. The recorded progress is read only for a partition whose
committed offset reached its wait and is not yet known to be recorded.

Like the rest of the service it is never in the data path, and its output is advisory
and monotone: a progress record is a committed offset Kafka reported, written only when
it grew, and it only tells a waiter to look again (the gate opens on the committed
offsets the waiter reads from Kafka itself). So a lagging cache, a missed round or a
stale recorded value can delay a gate (back to the consumer's own
``ordered.gate.poll.interval.ms`` check), never open one early: a wait the cache has not
seen yet is relayed at the first round after its watch reports, a wait already cleared
costs at most one needless record. It keeps no state that matters: a new leader starts
from what ZooKeeper holds.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Collection, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from coordinator.kernel.errors import OrderedError, StoreError
from coordinator.kernel.hooks import CoordinatorEvents
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.positions import PositionService
from coordinator.kernel.store import paths
from coordinator.kernel.store.records import Progress
from coordinator.kernel.supervise import SupervisionSettings, Supervisor
from coordinator.relay.commit_tail import CommitTail
from coordinator.relay.wait_cache import WaitCache, Waits, read_waits

__all__ = ["DEFAULT_CHECK_INTERVAL_S", "PositionRelay"]

_log = logging.getLogger(__name__)

DEFAULT_CHECK_INTERVAL_S: Final = 30.0
"""Seconds between the rounds that read the interest from ZooKeeper, not the cache."""

_TAILED_INTERVAL_S: Final = 1.0
"""Seconds between full rounds while the commit tail reads every commit."""

_MAX_READERS: Final = 8
"""Groups whose committed offsets are read at once."""


class PositionRelay:
    """Publish the committed offsets that declared waits need, for every group.

    Args:
        client: A started kazoo client.
        admin: Kafka admin helpers (committed offsets are read through it).
        root: The store root.
        interval: Seconds between rounds.
        progress: Called with one line when a round fails in a new way.
        hooks: Objects that receive an ``on_relay_round`` event per completed round
            (:mod:`coordinator.kernel.hooks`).
        check_interval: Seconds between the rounds that read the interest from
            ZooKeeper itself (the safety check of the cache).
        tail_commits: Tail ``__consumer_offsets`` (:mod:`coordinator.relay.commit_tail`) to
            relay a waited-on commit at once, not only at the next round.
        supervision: How the commit tail's supervisor restarts it.
    """

    def __init__(
        self,
        client: KazooClient,
        admin: KafkaAdmin,
        root: str = paths.DEFAULT_ROOT,
        interval: float = 0.1,
        progress: Callable[[str], None] | None = None,
        hooks: Sequence[object] = (),
        check_interval: float = DEFAULT_CHECK_INTERVAL_S,
        tail_commits: bool = True,
        supervision: SupervisionSettings | None = None,
    ) -> None:
        self._client = client
        self._admin = admin
        self._root = paths.check_root(root)
        self._interval = interval
        self._check_interval = check_interval
        self._progress = progress or (lambda _message: None)
        self._services: dict[str, PositionService] = {}
        self._last_error = ""
        self._events = CoordinatorEvents(hooks)
        self._hooks = tuple(hooks)
        self._supervision = supervision
        self.tail: Supervisor | None = None
        """The commit tail's supervisor while :meth:`run` runs (its health)."""
        self._poke = threading.Event()  # a cached wait changed, or a waited-on commit
        self._tail_commits = tail_commits
        self._urgent: set[str] = set()  # groups whose commits the tail just saw
        self._urgent_lock = threading.Lock()
        self._targets: frozenset[tuple[str, str]] = frozenset()  # waited (group, topic)
        self._cache: WaitCache | None = None
        self._next_check = 0.0
        self._pool: ThreadPoolExecutor | None = None
        # (group, topic, partition) -> (the wait, an offset known to be recorded at it)
        self._known: dict[tuple[str, str, int], tuple[int, int]] = {}
        self.relayed = 0
        """Progress records this relay published (for tests and metrics)."""

    def run(self, stop: Callable[[], bool], wake: threading.Event | None = None) -> None:
        """Relay until ``stop()`` is true (or ``wake`` is set).

        A full round every ``interval`` (every second at most while the commit tail
        reads every commit); a round of just the groups concerned as soon as one of
        their waits changes or the tail sees a commit on a topic they wait in. The
        interest cache and the tail live while this runs (one leadership term).
        """

        def stopping() -> bool:
            return stop() or (wake is not None and wake.is_set())

        self._cache = WaitCache(self._client, self._root, self._interest_changed)
        tail: Supervisor | None = None
        commits: CommitTail | None = None
        if self._tail_commits:
            tailer = commits = CommitTail(
                self._admin.client_config(), self._on_commit, self._progress
            )
            # Supervised: an unexpected error restarts the tail after a backoff (the
            # periodic rounds go on meanwhile), instead of ending it for the term.
            tail = Supervisor(
                "commit-tail",
                lambda beat: tailer.run(stopping, beat),
                1.0,
                self._supervision,
                hooks=self._hooks,
            )
        self.tail = tail
        try:
            self._cache.start()
            if tail is not None:
                tail.start()
            next_full = 0.0
            while not stopping():
                self._poke.clear()
                with self._urgent_lock:
                    urgent, self._urgent = self._urgent, set()
                now = time.monotonic()
                if now >= next_full:
                    # While the tail reads every commit, the periodic round is only a
                    # safety net: it runs ten times less often.
                    healthy = commits is not None and commits.healthy
                    slow = max(self._interval, _TAILED_INTERVAL_S) if healthy else self._interval
                    next_full = now + slow
                    self.round()
                elif urgent:
                    self.round(urgent)
                self._poke.wait(max(0.0, next_full - time.monotonic()))
        finally:
            self._cache.stop()
            self._cache = None
            if tail is not None:
                # Within 0.2 s unless a metadata request is in flight (Kafka away): not
                # worth holding up a stop or a leadership change for; it ends alone.
                tail.stop()
                tail.join(1.0)
                self.tail = None
            self.close()

    def wake(self) -> None:
        """Make :meth:`run` check its stop condition now (safe from any thread)."""
        self._poke.set()

    @property
    def targets(self) -> frozenset[tuple[str, str]]:
        """The ``(group, topic)`` pairs with a wait, as of the last round."""
        return self._targets

    def _interest_changed(self, group: str) -> None:
        # kazoo's thread: a round of the group (a new wait may already be committed).
        with self._urgent_lock:
            self._urgent.add(group)
        self._poke.set()

    def _on_commit(self, group: str, topic: str, _partition: int) -> None:
        # The tail's thread: only a set lookup and a flag.
        if (group, topic) in self._targets:
            with self._urgent_lock:
                self._urgent.add(group)
            self._poke.set()

    def close(self) -> None:
        """Stop the reader threads (a later round starts them again)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

    def round(self, groups: Collection[str] | None = None) -> int:
        """Run one round; return how many progress records it published.

        The waits of every group (or of ``groups``) are taken first, then the committed
        offsets of just the partitions someone waits on; a group whose read fails is
        reported and the others are still relayed.
        """
        published = 0
        started = time.monotonic()
        try:
            waits = self._waits()
            self._targets = frozenset((g, t) for g, topics in waits.items() for t in topics)
            if groups is not None:
                waits = {g: w for g, w in waits.items() if g in groups}
            committed = self._committed(waits)
            failures = [str(got) for got in committed.values() if isinstance(got, OrderedError)]
            ready = {g: got for g, got in committed.items() if not isinstance(got, OrderedError)}
            published = self._publish(waits, ready, partial=groups is not None)
            if failures:
                raise OrderedError("; ".join(sorted(failures)))
        except (OrderedError, KazooException, KazooTimeoutError) as exc:
            # kazoo's ConnectionLoss and SessionExpiredError carry no text.
            message = f"position relay: {str(exc) or type(exc).__name__}"
            if message != self._last_error:
                self._progress(message)
            self._last_error = message
            self.relayed += published
            return published
        self._last_error = ""
        self.relayed += published
        self._events.relay_round(time.monotonic() - started, published)
        return published

    def _waits(self) -> Waits:
        """The cached waits; read from ZooKeeper without a cache and every check interval."""
        cache = self._cache
        now = time.monotonic()
        if cache is not None and now < self._next_check:
            return cache.waits()
        self._next_check = now + self._check_interval
        fresh = read_waits(self._client, self._root)
        if cache is not None and cache.waits() != fresh:
            # A change may just be on its way (the cache lags by a round trip): rebuilding
            # costs one asynchronous re-read, so no need to tell the two cases apart.
            _log.info("position relay: interest cache disagreed with ZooKeeper: rebuilt")
            cache.stop()
            cache.start()
        return fresh

    def _committed(self, waits: Waits) -> dict[str, dict[str, dict[int, int]] | OrderedError]:
        """Each group's committed offsets of the waited-on partitions, or its error.

        Read through the admin helpers' per-group clients (an OffsetFetch each, the
        groups in parallel), not the admin API's ``list_consumer_group_offsets``:
        librdkafka 2.16 aborts the process when one of those times out while a broker
        restarts, and the relay reads often.
        """

        def read(group: str) -> dict[str, dict[int, int]] | OrderedError:
            try:
                return self._admin.committed_offsets_of(group, waits[group])
            except OrderedError as exc:
                return exc

        groups = sorted(waits)
        if len(groups) <= 1:
            return {group: read(group) for group in groups}
        if self._pool is None:
            self._pool = ThreadPoolExecutor(_MAX_READERS, thread_name_prefix="relay-read")
        return dict(zip(groups, self._pool.map(read, groups), strict=True))

    def _service(self, group: str) -> PositionService:
        service = self._services.get(group)
        if service is None:
            service = self._services[group] = PositionService(self._client, self._root, group)
        return service

    def _publish(
        self, waits: Waits, committed: dict[str, dict[str, dict[int, int]]], partial: bool
    ) -> int:
        """Publish every committed offset that reached its wait and grew past the record."""
        candidates: list[tuple[str, str, int, int, int]] = []
        # Only current waits are remembered: a round of some groups keeps the others'.
        known = {k: v for k, v in self._known.items() if partial and k[0] not in waits}
        for group, topics in sorted(waits.items()):
            for topic, needed in sorted(topics.items()):
                for partition, wait in sorted(needed.items()):
                    key = (group, topic, partition)
                    if key in self._known and self._known[key][0] == wait:
                        known[key] = self._known[key]
                    offset = committed.get(group, {}).get(topic, {}).get(partition)
                    if offset is None or offset < wait:
                        continue
                    if key in known and offset <= known[key][1]:
                        continue  # already recorded (by this relay or by a consumer)
                    candidates.append((group, topic, partition, wait, offset))
        # A wait that changed is checked afresh.
        self._known = known
        published = 0
        for (group, topic, partition, wait, offset), recorded in zip(
            candidates, self._recorded(candidates), strict=True
        ):
            if recorded is not None and offset <= recorded:
                self._known[(group, topic, partition)] = (wait, recorded)
                continue
            self._service(group).publish(topic, partition, offset)
            self._known[(group, topic, partition)] = (wait, offset)
            published += 1
        return published

    def _recorded(self, candidates: list[tuple[str, str, int, int, int]]) -> list[int | None]:
        """The recorded progress of each candidate partition (``None``: none), read at once."""
        reads: list[tuple[str, Any]] = []
        for group, topic, partition, _wait, _offset in candidates:
            path = self._service(group).progress_path(topic, partition)
            reads.append((path, self._client.get_async(path)))
        out: list[int | None] = []
        for path, result in reads:
            try:
                data, _stat = result.get(timeout=10.0)
            except NoNodeError:
                out.append(None)
                continue
            try:
                out.append(Progress.from_json(data, path).offset)
            except StoreError as exc:
                _log.warning("position relay: %s", exc)
                out.append(None)  # overwritten by a valid record
        return out
