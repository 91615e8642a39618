"""The consumer's upkeep on the poll thread: partitions tracked, layouts kept fresh.

:class:`ConsumerUpkeep` is a base of :class:`~ordered.consumer.OrderedConsumer`: it
tracks assigned partitions, reloads layouts, and keeps the layout state
(:class:`~ordered.consumer.layouts.LayoutState`: ``TRUSTED`` or ``HELD``) through its
one checked writer. :meth:`ConsumerUpkeep._service` is the step at the start of every
``poll``/``consume``.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable
from typing import Any

from confluent_kafka import KafkaException, TopicPartition

from coordinator.client.errors import StoreError
from coordinator.client.history import SessionState
from ordered.consumer.announce import Announcer
from ordered.consumer.batch import BatchFilter
from ordered.consumer.favour import SourceFavour
from ordered.consumer.fetch import Fetcher
from ordered.consumer.gate import (
    GateEvent,
    GateState,
    PartitionGate,
)
from ordered.consumer.layouts import (
    LayoutState,
    LayoutTracker,
    TopicView,
    check_layout_transition,
)
from ordered.consumer.recheck import GateChecker
from ordered.consumer.replay import Rewinds
from ordered.consumer.state import Core, PartState

__all__ = ["ConsumerUpkeep"]

_log = logging.getLogger(__name__)


class ConsumerUpkeep:
    """Partition tracking and layout upkeep (methods of :class:`OrderedConsumer`)."""

    # Set by OrderedConsumer.__init__ (declared here for the type checker).
    _consumer: Any
    _core: Core
    _layouts: LayoutTracker
    _layout_state: LayoutState
    _filter: BatchFilter
    _fetcher: Fetcher
    _favour: SourceFavour
    _announcer: Announcer
    _checker: GateChecker
    _rewinds: Rewinds
    _closed: bool

    # --- per-partition bookkeeping (poll thread) ---------------------------------------

    def _track(self, partitions: Iterable[TopicPartition]) -> None:
        core = self._core
        fresh = [tp for tp in partitions if (tp.topic, tp.partition) not in core.parts]
        for tp in fresh:
            self._layouts.topic(tp.topic)
        # A new assignment may start below what the gates learned (an offset reset,
        # explicit offsets): they are decided again from the group's progress now.
        self._rewinds.forget({tp.topic for tp in fresh})
        for tp in fresh:
            key = (tp.topic, tp.partition)
            limit = core.open_limit(tp.topic, tp.partition)
            core.parts[key] = PartState(tp.topic, tp.partition, PartitionGate(*key, limit))
            if self._layout_state is LayoutState.HELD and self._layouts.topics[tp.topic].ordered:
                core.fire(core.parts[key], GateEvent.LAYOUT_LOST)
        self._rewinds.positioned(fresh)
        self._filter.update_single()
        self._fetcher.assignment_changed()

    def _drop(self, key: tuple[str, int]) -> None:
        part = self._core.parts.pop(key, None)
        if part is not None:
            self._core.dropped(part)
        self._filter.update_single()
        self._fetcher.take_partition(key)
        self._favour.forget(key)
        if part is not None and part.gate.paused and not part.gate.user_paused:
            # librdkafka keeps an application pause across a reassignment: a partition
            # that comes back must not stay paused by a gate we no longer track.
            with contextlib.suppress(KafkaException, RuntimeError):
                self._consumer.resume([TopicPartition(part.topic, part.partition)])

    def _take_stash(self, limit: int) -> list[Any]:
        """Stashed records of partitions whose gate is open, oldest first, up to ``limit``."""
        out: list[Any] = []
        for part in self._core.parts.values():
            if len(out) >= limit:
                break
            out += part.gate.take(limit - len(out))
        return out

    def _announce_only(self, keys: set[tuple[str, int]]) -> object:
        return self._announcer.run(only=keys)

    # --- layouts ------------------------------------------------------------------------

    def _reload_one(self, topic: str) -> None:
        try:
            self._after_reload(self._layouts.reload([topic]))
        except StoreError as exc:
            _log.warning("layout reload of %s failed: %s", topic, exc)

    def _after_reload(self, views: list[TopicView]) -> None:
        self._filter.forget_spans()
        names = {view.name for view in views}
        core = self._core
        for part in core.parts.values():
            if part.topic not in names:
                continue
            if part.gate.state is GateState.BLOCKED:
                core.check_gates_at(0.0)  # re-check it at once against the new history
            core.fire(part, GateEvent.HISTORY)
            if self._layouts.topics[part.topic].ordered:
                self._announcer.check_marks(part)

    def _apply_stale(self) -> None:
        """The layouts cannot be trusted: hold every record of ordered topics from now."""
        if self._layout_state is LayoutState.HELD:
            return
        self._set_layout_state(LayoutState.HELD)
        core = self._core
        for part in core.parts.values():
            view = self._layouts.topics.get(part.topic)
            if view is not None and view.ordered and part.gate.state is not GateState.BLOCKED:
                core.fire(part, GateEvent.LAYOUT_LOST)
        self._filter.update_single()

    def _service(self) -> None:
        """The step at the start of every poll/consume: layouts, announcements, gates."""
        layouts = self._layouts
        if not layouts.usable:
            self._apply_stale()
        if self._layout_state is LayoutState.HELD:
            if layouts.watcher.state is SessionState.CONNECTED:
                views = layouts.recover()
                if views is not None:
                    self._set_layout_state(LayoutState.TRUSTED)
                    self._after_reload(views)
                    for part in self._core.parts.values():
                        if part.gate.state is not GateState.BLOCKED:
                            self._core.fire(part, GateEvent.LAYOUT_BACK)
                    self._filter.update_single()
                    self._core.check_gates_at(0.0)
        else:
            try:
                views = layouts.reload_dirty()
            except StoreError as exc:
                _log.warning("layout reload failed (held until it succeeds): %s", exc)
                self._apply_stale()
            else:
                if views:
                    self._after_reload(views)
        if self._announcer.due():
            self._announcer.run()
        self._rewinds.service()
        self._checker.service()
        self._favour.service()

    def _slice(self, deadline: float | None) -> float:
        return self._checker.slice(deadline, self._layout_state is LayoutState.HELD)

    def _set_layout_state(self, new: LayoutState) -> None:
        """The one writer of the layout state (checked against its transition table)."""
        check_layout_transition(self._layout_state, new)
        self._layout_state = new

    def _check_open(self) -> None:
        if self._closed:
            raise RuntimeError("Consumer closed")
