"""The leader daemon's part of the position service: relay committed offsets to waiters.

Consumers publish the boundary commits they make themselves (:mod:`coordinator.positions`),
but a gate may wait on progress that no ordered consumer publishes: a commit by a plain
consumer or by user code, a consumer that died between its commit and its publish, a
group that commits with ``enable.auto.commit``. The relay closes that gap. Every
``interval`` it reads the declared interest of every group (``{root}/groups/*/interest``),
asks Kafka for the group's committed offsets of exactly the partitions someone waits on,
and publishes a progress record when a committed offset reached a declared wait and grew
past the recorded one; the waiters' watches fire and they re-check their gates from
Kafka.

Like the rest of the service it is never in the data path: a relay that is down, slow or
wrong only delays a gate until the consumer's own ``ordered.gate.poll.interval.ms``
check. It keeps no state of its own: a new leader starts from what ZooKeeper holds.
"""

from __future__ import annotations

import logging
import threading
import time
import urllib.parse
from collections.abc import Callable, Sequence

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException, NoNodeError
from kazoo.handlers.threading import KazooTimeoutError

from coordinator.errors import OrderedError
from coordinator.hooks import CoordinatorEvents
from coordinator.kafka_admin import KafkaAdmin
from coordinator.positions import PositionService
from coordinator.store import paths

__all__ = ["PositionRelay"]

_log = logging.getLogger(__name__)


class PositionRelay:
    """Publish the committed offsets that declared waits need, for every group.

    Args:
        client: A started kazoo client.
        admin: Kafka admin helpers (committed offsets are read through it).
        root: The store root.
        interval: Seconds between rounds.
        progress: Called with one line when a round fails in a new way.
        hooks: Objects that receive an ``on_relay_round`` event per completed round
            (:mod:`coordinator.hooks`).
    """

    def __init__(
        self,
        client: KazooClient,
        admin: KafkaAdmin,
        root: str = paths.DEFAULT_ROOT,
        interval: float = 0.1,
        progress: Callable[[str], None] | None = None,
        hooks: Sequence[object] = (),
    ) -> None:
        self._client = client
        self._admin = admin
        self._root = paths.check_root(root)
        self._interval = interval
        self._progress = progress or (lambda _message: None)
        self._services: dict[str, PositionService] = {}
        self._last_error = ""
        self._events = CoordinatorEvents(hooks)
        self.relayed = 0
        """Progress records this relay published (for tests and metrics)."""

    def run(self, stop: Callable[[], bool], wake: threading.Event | None = None) -> None:
        """Relay rounds every ``interval`` until ``stop()`` is true."""
        pause = wake or threading.Event()
        while not stop():
            self.round()
            pause.wait(self._interval)

    def round(self) -> int:
        """Run one round; return how many progress records it published.

        The waits of every group are read first, then the committed offsets of just
        the partitions someone waits on; a group whose read fails is reported and the
        others are still relayed.
        """
        published = 0
        started = time.monotonic()
        try:
            waits = {group: self._needed(group) for group in self._groups()}
            waits = {group: needed for group, needed in waits.items() if needed}
            committed = {group: self._committed(group, needed) for group, needed in waits.items()}
            failures = []
            for group, needed in sorted(waits.items()):
                got = committed.get(group, {})
                if isinstance(got, OrderedError):
                    failures.append(str(got))
                    continue
                published += self._publish(group, needed, got)
            if failures:
                raise OrderedError("; ".join(failures))
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

    def _groups(self) -> list[str]:
        try:
            names = self._client.get_children(paths.groups_path(self._root))
        except NoNodeError:
            return []
        return sorted(urllib.parse.unquote(name) for name in names)

    def _committed(
        self, group: str, needed: dict[str, dict[int, int]]
    ) -> dict[str, dict[int, int]] | OrderedError:
        """``group``'s committed offsets of the waited-on partitions, or the error.

        Read through the admin helpers' per-group clients (an OffsetFetch each), not
        the admin API's ``list_consumer_group_offsets``: librdkafka 2.16 aborts the
        process when one of those times out while a broker restarts, and the relay
        runs ten times a second.
        """
        try:
            return {
                topic: self._admin.committed_offsets(group, topic, waits)
                for topic, waits in sorted(needed.items())
            }
        except OrderedError as exc:
            return exc

    def _service(self, group: str) -> PositionService:
        service = self._services.get(group)
        if service is None:
            service = self._services[group] = PositionService(self._client, self._root, group)
        return service

    def _needed(self, group: str) -> dict[str, dict[int, int]]:
        """topic -> partition -> the lowest offset any member of ``group`` waits for.

        Progress below it wakes nobody, so it is not published.
        """
        service = self._service(group)
        base = paths.interest_topics_path(self._root, group)
        try:
            topics = self._client.get_children(base)
        except NoNodeError:
            return {}
        out: dict[str, dict[int, int]] = {}
        for topic in sorted(topics):
            needed: dict[int, int] = {}
            for interest in service.interest(topic).values():
                for partition, offset in interest.waits.items():
                    needed[partition] = min(needed.get(partition, offset), offset)
            if needed:
                out[topic] = needed
        return out

    def _publish(
        self, group: str, needed: dict[str, dict[int, int]], committed: dict[str, dict[int, int]]
    ) -> int:
        service = self._service(group)
        published = 0
        for topic, waits in needed.items():
            recorded = service.progress(topic)
            for partition, offset in sorted(committed.get(topic, {}).items()):
                if partition not in waits:
                    continue
                known = recorded.get(partition)
                if offset >= waits[partition] and (known is None or offset > known.offset):
                    service.publish(topic, partition, offset)
                    published += 1
        return published
