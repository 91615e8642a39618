"""Boundary announcements and stored offsets: ``maybe_revoked``, then a boundary commit.

A consumer whose position on a partition ``a`` reaches a boundary where keys of ``a``
moved elsewhere calls ``on_partition_key_maybe_revoked([a])`` at the start of its next
``poll``/``consume`` (the application has processed the records returned so far),
then commits ``a`` synchronously at that position, so the destination's consumer may
proceed. Until then the offset stored for ``a`` stays one below the boundary, so no
auto-commit (or ``commit()`` of stored offsets) can open the destination's gate first.

With ``ordered.commit.mode=application`` the consumer never commits: once
``maybe_revoked`` has run, the announcement is *released* (the stored offset may pass
the boundary) and the boundary counts as passed when the application's own commit (a
plain one, or the offsets its transaction committed) covers it; the gates of the
destination read that commit from Kafka as they read any other.

The lifecycle of one partition's announcement is the pure state machine of
:mod:`ordered.consumer.partition` (:class:`~ordered.consumer.partition.Announcement`);
this module is its shell: the callback, the commit, the stored offsets.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException, TopicPartition

from ordered.consumer.partition import AnnounceState
from ordered.consumer.state import Core

if TYPE_CHECKING:
    from coordinator.kernel.positions import PositionService

__all__ = ["Announcer"]

_log = logging.getLogger(__name__)

_I, _D, _T = AnnounceState.IDLE, AnnounceState.DUE, AnnounceState.TOLD


class Announcer:
    """Schedules and runs boundary announcements for the consumer's partitions."""

    def __init__(self, core: Core, positions: PositionService | None) -> None:
        self._core = core
        self._positions = positions
        self._published: dict[tuple[str, int], int] = {}  # the highest mark published

    def due(self) -> bool:
        """Whether some partition has an announcement to run."""
        # A loop, not any() over a generator: this runs at every call.
        for p in self._core.parts.values():  # noqa: SIM110
            if p.ann.state is not _I:
                return True
        return False

    def run(self, only: set[tuple[str, int]] | None = None) -> list[Any]:
        """Call ``on_partition_key_maybe_revoked``, then commit the boundary positions.

        A listener exception leaves the announcement due (the next call runs it again).
        A failed commit (a rebalance in progress, the coordinator moving) is logged and
        retried at the next call without calling the listener again.

        Returns:
            The boundary positions committed now.
        """
        core = self._core
        # A partition with records in the consume() call running now (its service step,
        # a rebalance callback inside it): the application does not have them yet, and
        # the position they took it to is not for a commit. Its announcement runs after
        # the call returns them (a revocation first takes them out: withdraw_call).
        held = core.call_stores or ()
        due = [
            part
            for key, part in sorted(core.parts.items())
            if part.ann.state is not _I and (only is None or key in only) and key not in held
        ]
        done: list[Any] = []
        if not due:
            return done
        fresh = [p for p in due if p.ann.state is _D]
        if core.listener is not None and fresh:
            core.listener.on_partition_key_maybe_revoked(
                [TopicPartition(p.topic, p.partition, p.ann.position) for p in fresh]
            )
        for part in fresh:
            part.ann.told()
        if core.config.ordered.commit_mode == "application":
            # Never commit on our own: the application's next commit covers the
            # boundary (and, within a transaction, only once its output is committed).
            released = [TopicPartition(p.topic, p.partition, p.ann.released()) for p in due]
            if core.config.store_offsets:
                core.consumer.store_offsets(offsets=released)
            return done
        tps = [TopicPartition(p.topic, p.partition, p.ann.position) for p in due]
        try:
            result = core.consumer.commit(offsets=tps, asynchronous=False)
        except KafkaException as exc:
            _log.warning("boundary commit failed, retrying at the next call: %s", exc)
            return done
        for tp in result or ():
            key = (tp.topic, tp.partition)
            if tp.error is not None:
                _log.warning("boundary commit of %s[%d] failed: %s", *key, tp.error)
                continue
            core.events.announcement(tp.topic, tp.partition, tp.offset)
            owner = core.parts.get(key)
            if owner is not None and owner.ann.state is _T:
                owner.ann.committed(tp.offset)
                if core.config.store_offsets:
                    core.consumer.store_offsets(offsets=[tp])
            core.remember_commit(tp.topic, tp.partition, tp.offset)
            if self._positions is not None:
                self._positions.publish_if_wanted(tp.topic, tp.partition, tp.offset)
            done.append(tp)
        return done

    def application_committed(self, offsets: list[Any]) -> None:
        """The application committed ``offsets``: publish those that pass a boundary.

        Only in application commit mode (the boundary commits publish otherwise), and
        once per boundary, so the waiting members re-check at once rather than at their
        next ``ordered.gate.poll.interval.ms``.
        """
        core = self._core
        if self._positions is None or core.config.ordered.commit_mode != "application":
            return
        for tp in offsets:
            view = core.layouts.topics.get(tp.topic)
            if view is None or view.gates is None or tp.error is not None:
                continue
            passed = [m for m in view.gates.source_marks(tp.partition) if m <= tp.offset]
            key = (tp.topic, tp.partition)
            if passed and max(passed) > self._published.get(key, -1):
                self._published[key] = max(passed)
                self._positions.publish_if_wanted(tp.topic, tp.partition, tp.offset)
