"""Histories of verifiable runs: one JSON object per line, appended by many processes.

Every process of a run (producers, readers, the fault driver) appends its own events to
its own file; the checker (:mod:`ordered.verify.checker`) reads them all. A line is
written with one ``write`` system call as soon as the event is final, so a process
killed with SIGKILL loses at most events it had not yet written, never half a line
(a torn last line, from a crash in the middle of a ``write``, is skipped on reading).

Event kinds (field ``ev``), all with ``ts``: nanoseconds of ``CLOCK_MONOTONIC``, which is
one clock for every process of the machine, so events of different processes compare:

* ``ack``: a record the producer wrote, as its delivery report confirmed it:
  ``p`` producer id, ``k`` key, ``s`` sequence, ``tp`` partition, ``o`` offset.
* ``nack``: a record whose delivery failed: ``p``, ``k``, ``s``, ``err``.
* ``dlv``: a record a reader delivered to its application: ``g`` group, ``r`` reader
  id, ``n`` the reader's pass number, ``p``, ``k``, ``s``, ``tp``, ``o``, ``e`` the
  epoch the record was routed under (its epoch header, ``-1`` without one).
* ``cmt``: a committed offset of group ``g`` as reader ``r`` learnt it: ``t`` topic,
  ``tp`` partition, ``o`` the offset committed (the next record to read), ``why``:
  ``commit`` (the reader's own commit), ``boundary`` (the consumer's boundary commit)
  or ``read`` (read back from Kafka); ``ts`` is never earlier than the commit.
* ``pass``: a reader starts a new pass (``why``: ``start``, ``assign``, ``revoke``,
  ``lost``, ``seek``): ``g``, ``r``, ``n``.
* ``reset``: a group's committed offsets were reset while none of its members ran: ``g``.
* ``pause`` / ``resume``: every member of group ``g`` was stopped / continued.
* ``low``: partition ``tp``'s log start offset ``o`` as sampled (trims move it up).
* ``fault``: the fault driver's log: ``kind``, ``target``, ``detail``.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

__all__ = ["HistoryWriter", "now_ns", "read_events"]


def now_ns() -> int:
    """The history clock: ``CLOCK_MONOTONIC`` in nanoseconds (one clock per machine)."""
    return time.monotonic_ns()


class HistoryWriter:
    """Appends events to one history file, each line in one ``write`` call.

    Events can be added one at a time (:meth:`write`) or gathered (:meth:`add`) and
    written together by :meth:`flush`, which is what a reader does before it commits.

    Args:
        path: The file, created if missing, appended to otherwise.
    """

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._pending: list[str] = []

    def add(self, event: dict[str, Any]) -> None:
        """Queue ``event`` (``ts`` added when missing) for the next :meth:`flush`."""
        if "ts" not in event:
            event["ts"] = now_ns()
        self._pending.append(json.dumps(event, separators=(",", ":")))

    def write(self, event: dict[str, Any]) -> None:
        """Write ``event`` at once (together with anything queued before it)."""
        self.add(event)
        self.flush()

    def flush(self) -> None:
        """Write every queued event; when this returns, a SIGKILL cannot lose them."""
        if not self._pending:
            return
        data = ("\n".join(self._pending) + "\n").encode()
        self._pending.clear()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]

    def close(self) -> None:
        """Flush and close the file; calling it again does nothing."""
        if self._fd < 0:
            return
        try:
            self.flush()
        finally:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> HistoryWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_events(paths: Iterable[str | Path]) -> Iterator[dict[str, Any]]:
    """Every event of the history files ``paths``, file by file, line by line.

    A line that is not a JSON object (the torn last line of a killed writer) is skipped.
    """
    for path in paths:
        with open(path, encoding="utf-8", errors="replace") as handle:
            for line in handle:
                if not line.endswith("\n"):
                    continue  # torn: the writer died in the middle of this line
                try:
                    event = json.loads(line)
                except ValueError:
                    continue
                if isinstance(event, dict):
                    yield event
