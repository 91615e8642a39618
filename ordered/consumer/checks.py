"""The values the fetch check passes around (:mod:`ordered.consumer.layouts`)."""

from __future__ import annotations

from typing import Any, Final, NamedTuple

from linear_hash import Layout

__all__ = ["ANSWERED", "AuditSpan", "FetchCheck"]


class AuditSpan(NamedTuple):
    """The offsets of one partition around an offset where the same epochs may write.

    Attributes:
        first: The first offset of the span.
        end: The first offset past it (``inf``: open-ended).
        layouts: The layouts of the epochs that may have placed a record here.
        lo: The lowest such epoch.
        hi: The highest such epoch.
    """

    first: int
    end: float
    layouts: tuple[Layout, ...]
    lo: int
    hi: int


class FetchCheck(NamedTuple):
    """A fetch check in flight: the ZooKeeper requests and what they will cover.

    Attributes:
        sync: The async result of the ``sync``.
        reads: ``(topic, async result of an exists() on the topic znode)``.
        marks: ``((topic, partition), high watermark)`` noted before the ``sync`` was
            sent: every record below a mark was written before the check began.
        rewinds: ``(topic, async result of an exists() on the group's rewind marker)``.
        virtual: Sent no request: the consumer barrier vouched for the batch
            (:meth:`~ordered.consumer.barrier.BarrierClient.relies`).
    """

    sync: Any
    reads: tuple[tuple[str, Any], ...]
    marks: tuple[tuple[tuple[str, int], int], ...] = ()
    rewinds: tuple[tuple[str, Any], ...] = ()
    virtual: bool = False


class _Answered:
    """An asynchronous result that is already there (the virtual check's ``sync``)."""

    def ready(self) -> bool:
        return True

    def get(self, timeout: float | None = None) -> None:
        return None


ANSWERED: Final = _Answered()
"""The ``sync`` of a virtual check: answered, with nothing to wait for."""
