"""Sources first: while a source partition lags below a boundary, fetch only sources.

After an expansion, the new partitions' records wait at their gates until the group has
consumed each source partition up to its boundary. librdkafka fetches every unpaused
partition of a consumer alike, so a consumer that lags on a source and on other
partitions drains the source at a fraction of its rate while the new partitions sit
idle (the complaint of new shards waiting on lagging parents). :class:`SourceFavour`
pauses (librdkafka ``pause``) the consumer's other partitions while one of its
partitions is a *source below a boundary*: a partition of an ordered topic that gives
keys away in a sealed epoch at an offset its delivery has not reached yet (and that no
gate or application pause holds), whose log still reaches more than librdkafka's
pre-fetch window (``queued.min.messages`` records) beyond its delivery. When no
partition is one any more, it resumes what it paused.

Why the window: librdkafka keeps one fetch in flight per broker. Once every partition
it may fetch is at its log end, that fetch waits at the broker (up to
``fetch.wait.max.ms``) for records that may never come, and a partition resumed
meanwhile is fetched only after it returns. A source whose rest of the log fits in the
window is about to be fetched to its end (if it is not already): the others are resumed
then, while the source's fetch still has records to bring, and its records up to the
boundary are queued ahead of what the others fetch next. Reading a 100,000-record
backlog through an expansion, resuming at the boundary instead waited 0.3-0.4 s of a
0.7 s read.

A source whose delivery made no progress for :data:`STALL` seconds (and
:data:`STALL_CHECKS` evaluations) is not favoured until it moves again: its last
offsets below the boundary may never come (a transaction marker, records compacted
away), and the others must not wait for them.

Order is not at stake: a pause only changes which partition librdkafka fetches next;
records already taken are judged as usual, and a paused partition resumes from its
position. The favour only states its wish (owner ``FAVOUR``) to the consumer's
:class:`~ordered.consumer.pauses.PauseArbiter`: a partition a gate or the application
also wants paused stays paused when the favour lets go.
"""

from __future__ import annotations

import contextlib
import math
import time
from typing import TYPE_CHECKING, Any

from confluent_kafka import KafkaException

from ordered.consumer.pauses import PauseArbiter, PauseOwner

if TYPE_CHECKING:
    from ordered.consumer.state import Core, PartState

__all__ = ["FAVOUR_INTERVAL", "STALL", "STALL_CHECKS", "SourceFavour"]

FAVOUR_INTERVAL = 0.01
"""Seconds between two evaluations while nothing is favoured (they run at the start of
``poll``/``consume``); while something is, every call evaluates, so the others resume as
soon as the sources are through."""

STALL = 1.0
"""Seconds without progress after which a source below its boundary is not favoured."""

STALL_CHECKS = 5
"""...and evaluations without progress (a starved process is not a stalled source)."""


class SourceFavour:
    """Pauses the non-sources while a source lags below a boundary (see the module doc).

    Args:
        consumer: The wrapped ``confluent_kafka.Consumer``.
        core: The shared state (partitions, their gates and positions; the layouts).
        enabled: ``ordered.fetch.favour.sources``.
        window: Records librdkafka pre-fetches of every partition
            (``queued.min.messages``): a source whose log ends within it of its
            delivery is not favoured.
        pauses: The consumer's pause arbiter (default: one of its own over
            ``consumer``, for a favour used alone).

    Attributes:
        paused: The partitions this wants paused (and will let go).
    """

    def __init__(
        self,
        consumer: Any,
        core: Core,
        enabled: bool,
        window: int = 100_000,
        pauses: PauseArbiter[PartState] | None = None,
    ) -> None:
        self._pauses: PauseArbiter[PartState] = (
            pauses if pauses is not None else PauseArbiter(consumer)
        )
        self._core = core
        self._enabled = enabled
        self._window = window
        self.paused: set[tuple[str, int]] = set()
        self._next = 0.0
        # What the last pause call covered, and the core's version then: re-paused only
        # when either changed (a gate that opened meanwhile resumed its partition, and
        # every gate change bumps the version).
        self._paused_for: tuple[frozenset[tuple[str, int]], int] | None = None
        # position, since when, evaluations since
        self._moved: dict[tuple[str, int], tuple[int, float, int]] = {}

    def lagging_sources(self) -> set[tuple[str, int]]:
        """The assigned partitions that are sources below a boundary, fetchable now,
        whose log reaches beyond the pre-fetch window (see the module doc)."""
        out = set()
        topics = self._core.layouts.topics
        for key, part in self._core.parts.items():
            if part.gate.paused or part.gate.user_paused or part.position is None:
                continue
            view = topics.get(part.topic)
            gates = view.gates if view is not None else None
            if gates is None:
                continue
            below = False
            for mark in gates.source_marks(part.partition):
                if mark > part.position:
                    below = True
                    break
            if (
                below
                and self._core.log_end(*key) - part.position > self._window
                and self._progressing(key, part.position)
            ):
                out.add(key)
        return out

    def _progressing(self, key: tuple[str, int], position: int) -> bool:
        now = time.monotonic()
        last = self._moved.get(key)
        if last is None or last[0] != position:
            self._moved[key] = (position, now, 0)
            return True
        checks = last[2] + 1
        self._moved[key] = (position, last[1], checks)
        return now - last[1] < STALL or checks < STALL_CHECKS

    def quiet_until(self) -> float:
        """Until when :meth:`service` has nothing to do (0.0: it pauses partitions now)."""
        if not self._enabled:
            return math.inf
        return 0.0 if self.paused else self._next

    def service(self) -> None:
        """Pause or resume so that only lagging sources are fetched while there are any."""
        if not self._enabled:
            return
        now = time.monotonic()
        if now < self._next and not self.paused:
            return
        self._next = now + FAVOUR_INTERVAL
        parts = self._core.parts
        sources = self.lagging_sources()
        wanted = set() if not sources else {k for k in parts if k not in sources}
        release = [k for k in self.paused if k not in wanted]
        covered = (frozenset(wanted), self._core.version)
        if wanted and covered != self._paused_for:
            pause = [k for k in wanted if self._free(parts[k])]
            # Told again after each change of the core's state, as before the arbiter:
            # librdkafka's pause flag cannot be read back, and one call per change
            # while favouring is cheap insurance.
            with contextlib.suppress(KafkaException, RuntimeError):
                self._pauses.wish(PauseOwner.FAVOUR, [parts[k] for k in pause], again=True)
            self.paused.update(pause)
            self._paused_for = covered
        elif not wanted:
            self._paused_for = None
        if release:
            self.paused.difference_update(release)
            mine = [parts[k] for k in release if k in parts]
            with contextlib.suppress(KafkaException, RuntimeError):
                self._pauses.unwish(PauseOwner.FAVOUR, mine)

    def forget(self, key: tuple[str, int]) -> None:
        """``key`` leaves the assignment (the arbiter lifts the favour's pause of it)."""
        self._moved.pop(key, None)
        self.paused.discard(key)

    @staticmethod
    def _free(part: PartState) -> bool:
        return not part.gate.paused and not part.gate.user_paused
