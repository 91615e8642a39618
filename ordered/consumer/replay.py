"""Rewinds: what a seek, an explicit start offset or a new assignment does to the gates.

The gate rule reads the group's committed offsets, and caches the gates it found open
because, while the group runs forward, committed offsets only grow. A replay breaks
that premise (``docs/consumer.md``, "Replays"), so the consumer keeps three rules:

1. **Nothing learned before a rewind is trusted after it.** When partitions of a topic
   are assigned (a rebalance, ``assign``, ``incremental_assign``) or sought, the
   topic's satisfied gates and this consumer's memory of its own commits are dropped
   (:meth:`Rewinds.forget`); every gate is decided again from the committed offsets
   as they stand then. The same happens when another member signals a rewind through
   the group's rewind marker (read in the fetch check).
2. **The group's progress on a partition this consumer owns is at most its own
   position** (:func:`~ordered.consumer.judge.cap_to_positions`, applied where the
   gate decision shapes its view of the group's progress; re-exported here): an
   offset committed before a rewind is not progress of the replay.
3. **A rewind of a source is made visible to the group before the replay starts**
   (:meth:`Rewinds.positioned`): with ``ordered.commit.mode=auto`` the consumer commits
   the new position of each partition that gives keys away and whose committed offset
   lay past it, and then writes the group's rewind marker; the other members' next
   fetch check sees it.
   With ``ordered.commit.mode=application`` the consumer never commits: it writes the
   marker when the application's own commit (plain or transactional) has moved the
   committed offset (:meth:`Rewinds.service` watches for it).
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Iterable
from typing import TYPE_CHECKING

from confluent_kafka import OFFSET_BEGINNING, KafkaException, TopicPartition

from coordinator.kernel.errors import StoreError
from ordered.consumer.judge import cap_to_positions
from ordered.consumer.partition import Announcement, GateEvent

if TYPE_CHECKING:
    from ordered.consumer.probe import LogStartProbe
    from ordered.consumer.state import Core

__all__ = ["Rewinds", "cap_to_positions"]

_log = logging.getLogger("ordered.consumer")


class Rewinds:
    """Applies the replay rules of the module doc.

    Args:
        core: The shared state (``core.replay_guard`` switches the rules off; only the
            tests that show the rules are what keeps a replay in order do that).
        probe: The log-start probe (resolves ``OFFSET_BEGINNING``).
    """

    def __init__(self, core: Core, probe: LogStartProbe) -> None:
        self._core = core
        self._probe = probe
        # Application commit mode: rewound source -> its committed offset at the rewind.
        self._pending: dict[tuple[str, int], int] = {}
        self._next = 0.0

    def forget(self, topics: Iterable[str]) -> None:
        """Rule 1: drop what ``topics``' gates learned, and relimit their partitions."""
        core = self._core
        if not core.replay_guard:
            return
        names = set(topics)
        for name in names:
            view = core.layouts.topics.get(name)
            if view is not None and view.gates is not None:
                view.gates.forget()
            for key in [k for k in core.known_commits if k[0] == name]:
                del core.known_commits[key]
        for part in core.parts.values():
            if part.topic in names:
                core.fire(part, GateEvent.HISTORY, reason="rewind")

    def explicit(self, tp: TopicPartition) -> int | None:
        """The offset ``tp`` asks to start at: its own, the log start, or ``None``."""
        if tp.offset >= 0:
            return int(tp.offset)
        if tp.offset == OFFSET_BEGINNING:
            # A lower bound of where the replay starts: caps more, never less.
            return self._probe.log_start(tp.topic, tp.partition)
        return None

    def positioned(self, partitions: Iterable[TopicPartition]) -> None:
        """The application set where ``partitions`` start (seek, ``assign`` with offsets).

        Applies rules 1 and 3, and starts each partition's bookkeeping afresh: its
        position, its stored offset (so a commit of stored offsets, or an auto-commit,
        does not write the old one back), its announcements and its
        ``on_partition_key_assigned`` crossings.
        """
        core = self._core
        if not core.replay_guard:
            return
        placed: list[tuple[TopicPartition, int]] = []
        for tp in partitions:
            offset = self.explicit(tp)
            part = core.parts.get((tp.topic, tp.partition))
            if offset is None or part is None:
                continue
            part.position = offset
            part.start = None
            part.ann = Announcement()
            part.assigned_upto = -1
            placed.append((tp, offset))
        if not placed:
            return
        if core.config.store_offsets:
            # The offset to commit is where delivery now stands: without this, a commit
            # of stored offsets would write the old one back over a rewind.
            stored = [TopicPartition(tp.topic, tp.partition, o) for tp, o in placed]
            try:
                core.consumer.store_offsets(offsets=stored)
            except KafkaException as exc:
                _log.warning("cannot store the new positions: %s", exc)
            for tp, offset in placed:
                core.parts[(tp.topic, tp.partition)].ann.stored = offset
        self.forget({tp.topic for tp, _offset in placed})
        sources = []
        for tp, offset in placed:
            view = core.layouts.topics.get(tp.topic)
            if view is not None and view.gates is not None and view.gates.is_source(tp.partition):
                sources.append(TopicPartition(tp.topic, tp.partition, offset))
        if sources and core.config.group_id:
            self._announce_rewind(sources)

    def _announce_rewind(self, sources: list[TopicPartition]) -> None:
        """Rule 3 for source partitions moved to ``sources``' offsets."""
        core = self._core
        try:
            now = core.consumer.committed(
                [TopicPartition(tp.topic, tp.partition) for tp in sources],
                timeout=core.request_timeout,
            )
        except KafkaException as exc:
            # Unknown: every source counts as rewound (committing a position the
            # application chose is what its own next commit would do too).
            _log.warning("cannot read the committed offsets of a rewind: %s", exc)
            now = None
        committed = {(tp.topic, tp.partition): tp.offset for tp in now or () if tp.error is None}
        rewound = [
            tp
            for tp in sources
            if now is None or committed.get((tp.topic, tp.partition), -1) > tp.offset
        ]
        if not rewound:
            return
        if core.config.ordered.commit_mode == "auto":
            try:
                core.consumer.commit(offsets=rewound, asynchronous=False)
            except KafkaException as exc:
                # The group still shows the old offsets: other members may run ahead of
                # this replay until its first commit; this consumer's own gates do not.
                _log.warning("rewind commit failed: %s", exc)
        else:
            # The application will commit the rewind: signal it again once it has.
            for tp in rewound:
                key = (tp.topic, tp.partition)
                if key in committed:
                    self._pending[key] = committed[key]
            core.unquiet()
            return
        self._mark({tp.topic for tp in rewound})

    def committed(self, offsets: Iterable[TopicPartition]) -> None:
        """The application committed ``offsets`` through the consumer: signal its rewinds."""
        moved = set()
        for tp in offsets:
            key = (tp.topic, tp.partition)
            if key in self._pending and tp.error is None and tp.offset != self._pending[key]:
                del self._pending[key]
                moved.add(tp.topic)
        self._mark(moved)

    def quiet_until(self) -> float:
        """Until when :meth:`service` has nothing to do (0.0: a rewind waits for a commit)."""
        return 0.0 if self._pending else math.inf

    def service(self) -> None:
        """Application commit mode: signal a rewind again once the application committed it.

        Called at every ``poll``/``consume``; reads the committed offsets of rewound
        sources every ``ordered.gate.poll.interval.ms`` until each differs from the one
        seen at the rewind (or the partition is no longer assigned here).
        """
        if not self._pending or time.monotonic() < self._next:
            return
        core = self._core
        self._next = time.monotonic() + core.config.ordered.gate_poll_interval_ms / 1000.0
        for key in [k for k in self._pending if k not in core.parts]:
            del self._pending[key]
        if not self._pending:
            return
        try:
            now = core.consumer.committed(
                [TopicPartition(t, p) for t, p in self._pending], timeout=core.request_timeout
            )
        except KafkaException as exc:
            _log.debug("committed offsets unreadable, retrying: %s", exc)
            return
        moved = set()
        for tp in now:
            key = (tp.topic, tp.partition)
            if tp.error is None and tp.offset != self._pending.get(key, tp.offset):
                del self._pending[key]
                moved.add(tp.topic)
        self._mark(moved)

    def _mark(self, topics: Iterable[str]) -> None:
        for topic in sorted(topics):
            try:
                self._core.layouts.mark_rewound(topic)
            except StoreError as exc:
                _log.warning("cannot signal the rewind of %s to the group: %s", topic, exc)
