"""The fetch path: records taken from librdkafka, and the layout check each batch needs.

Every batch taken from librdkafka waits here until the fetch check of
:mod:`ordered.consumer.layouts` (``sync``, then the topic znodes: one ZooKeeper round
trip) says the consumer's layouts are at least as new as the batch. The check is
pipelined: the batch returned now was usually fetched, and its check sent, during the
previous call; before waiting for that check, this call takes what librdkafka already
holds (never waiting for more) and sends its check. The round trip then overlaps the
application's work on the previous batch: it costs latency, not throughput. This
fetch ahead runs while there is a backlog (the last batch filled the request); a
consumer that has caught up waits for its batches as a plain one does and pays the
round trip once per batch.

Records taken from librdkafka but not yet judged (the batch fetched ahead, and what
``poll()`` serves one by one) belong to partitions librdkafka considers consumed up to
them, so a seek, a revocation or an application pause must find them here
(:meth:`Fetcher.take_partition`).
"""

from __future__ import annotations

import collections
import itertools
from collections.abc import Callable
from typing import Any

from ordered.consumer.layouts import FetchCheck, LayoutTracker, TopicView

__all__ = ["Fetcher"]


class Fetcher:
    """Batches from librdkafka, each released once its layout check has answered.

    Args:
        consumer: The wrapped ``confluent_kafka.Consumer``.
        layouts: The layouts the check compares.
        checked: Called once per layout check sent (the consumer's ``on_layout_check``).
        on_reload: Called with the views a check read again.
        on_stale: Called when a check failed (the layouts cannot be trusted).
        on_rewound: Called with the topics whose group rewind marker the check found
            changed (another member moved the group's progress back).

    Attributes:
        pipeline: Fetch ahead (default ``True``).
    """

    def __init__(
        self,
        consumer: Any,
        layouts: LayoutTracker,
        checked: Callable[[], None],
        on_reload: Callable[[list[TopicView]], None],
        on_stale: Callable[[], None],
        on_rewound: Callable[[set[str]], None] | None = None,
    ) -> None:
        self._consumer = consumer
        self._layouts = layouts
        self._checked = checked
        self._on_reload = on_reload
        self._on_stale = on_stale
        self._on_rewound = on_rewound
        self.ready: collections.deque[Any] = collections.deque()  # checked, not judged
        self._pending: tuple[list[Any], FetchCheck | None] | None = None
        self.pipeline = True

    def fetch(self, num: int, timeout: float, single: bool) -> None:
        """Move the next checked batch to :attr:`ready` (nothing on timeout).

        Args:
            num: The most records to take from librdkafka at once.
            timeout: How long librdkafka may wait for the first record.
            single: Fetch as ``poll`` does: wait for one message, then take only
                what is already there.
        """
        if self._pending is None:
            if single:
                first = self._consumer.poll(timeout)
                batch = [] if first is None else [first]
                if first is not None and first.error() is None and num > 1:
                    batch += self._consumer.consume(num - 1, 0)
            else:
                batch = self._consumer.consume(num, timeout)
            if not batch:
                return
            self._pending = (batch, self._begin(batch))
        pending = self._pending
        # Fetch ahead only from a backlog (the batch filled the request): then
        # librdkafka holds more, and taking it now hides the next check's round trip.
        # A consumer that has caught up waits for full batches instead, as a plain
        # one does, and pays the round trip once per batch.
        backlog = len(pending[0]) >= num
        # It stays in _pending while librdkafka runs: a rebalance callback in there
        # settles it into `ready` and drops the records of revoked partitions.
        ahead = self._consumer.consume(num, 0) if self.pipeline and backlog else []
        if self._pending is pending:
            self.settle()
        if ahead:
            self._pending = (ahead, self._begin(ahead))

    def take(self, num: int) -> list[Any]:
        """Remove and return up to ``num`` checked records, oldest first."""
        ready = self.ready
        return [ready.popleft() for _ in range(min(num, len(ready)))]

    def settle(self) -> None:
        """Wait for the check of the batch fetched ahead; move it to :attr:`ready`."""
        if self._pending is not None:
            batch, check = self._pending
            self._pending = None
            reloaded = self._layouts.finish_check(check)
            if reloaded is None:
                self._on_stale()
            elif reloaded:
                self._on_reload(reloaded)
            if self._on_rewound is not None:
                rewound = self._layouts.take_rewound()
                if rewound:
                    self._on_rewound(rewound)
            self.ready.extend(batch)

    def take_partition(self, key: tuple[str, int]) -> list[Any]:
        """Remove (and return) the records of ``key`` taken from librdkafka, not judged."""
        self.settle()
        if not self.ready:
            return []
        mine: list[Any] = []
        rest: collections.deque[Any] = collections.deque()
        for m in self.ready:
            ours = m.error() is None and (m.topic(), m.partition()) == key
            (mine if ours else rest).append(m)
        self.ready = rest
        return mine

    def first_offset(self, key: tuple[str, int]) -> int | None:
        """The offset of the first record of ``key`` taken and not judged, if any."""
        taken = itertools.chain(self.ready, self._pending[0] if self._pending else ())
        for m in taken:
            if m.error() is None and (m.topic(), m.partition()) == key:
                offset: int = m.offset()
                return offset
        return None

    def clear(self) -> None:
        """Forget everything taken (closing: nothing of it was delivered or stored)."""
        self.ready.clear()
        self._pending = None

    def _begin(self, batch: list[Any]) -> FetchCheck | None:
        if not any(m.error() is None for m in batch):
            return None  # events only: nothing to judge by a layout
        self._checked()
        return self._layouts.begin_check()
