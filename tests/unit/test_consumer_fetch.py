"""The consumer's fetch path with fake librdkafka and layouts: checks come before release."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ordered.consumer.fetch import Fetcher


class Msg:
    def __init__(self, partition: int, offset: int) -> None:
        self._p, self._o = partition, offset

    def error(self) -> None:
        return None

    def topic(self) -> str:
        return "t"

    def partition(self) -> int:
        return self._p

    def offset(self) -> int:
        return self._o


class FakeConsumer:
    """Hands out prepared batches; ``during`` runs inside the next consume call."""

    def __init__(self, batches: list[list[Msg]], log: list[str]) -> None:
        self.batches = batches
        self.log = log
        self.during: Callable[[], object] | None = None

    def consume(self, num: int, timeout: float) -> list[Msg]:
        if self.during is not None:
            during, self.during = self.during, None
            during()
        batch = self.batches.pop(0) if self.batches else []
        self.log.append(f"fetch {[m.offset() for m in batch]}")
        return batch

    def poll(self, timeout: float) -> Msg | None:
        batch = self.consume(1, timeout)
        return batch[0] if batch else None


class FakeLayouts:
    def __init__(self, log: list[str]) -> None:
        self.log = log
        self.sent = 0

    def begin_check(self) -> Any:
        self.sent += 1
        self.log.append(f"send {self.sent}")
        return self.sent

    def finish_check(self, check: Any) -> list[Any]:
        self.log.append(f"wait {check}")
        return []


def make(batches: list[list[Msg]]) -> tuple[Fetcher, FakeConsumer, list[str]]:
    log: list[str] = []
    consumer = FakeConsumer(batches, log)
    fetcher = Fetcher(consumer, FakeLayouts(log), lambda: None, lambda _v: None, lambda: None)  # type: ignore[arg-type]
    return fetcher, consumer, log


def test_a_batch_is_released_only_after_its_check_and_the_next_check_is_already_sent() -> None:
    b1, b2, b3 = [Msg(0, 0), Msg(0, 1)], [Msg(0, 2), Msg(0, 3)], [Msg(0, 4)]
    fetcher, _consumer, log = make([b1, b2, b3, []])
    fetcher.fetch(2, 1.0, single=False)
    assert list(fetcher.ready) == b1
    # b1 was checked before release; b2 was taken ahead and its check sent before
    # the wait for b1's: the round trip overlaps.
    assert log == ["fetch [0, 1]", "send 1", "fetch [2, 3]", "wait 1", "send 2"]
    assert fetcher.take(10) == b1
    log.clear()
    fetcher.fetch(2, 1.0, single=False)
    assert list(fetcher.ready) == b2
    assert log == ["fetch [4]", "wait 2", "send 3"]
    fetcher.take(10)
    log.clear()
    # b3 did not fill the request (caught up): no fetch ahead of the next batch.
    fetcher.fetch(2, 1.0, single=False)
    assert log == ["wait 3"]


def test_without_the_pipeline_each_batch_waits_for_its_own_check() -> None:
    b1, b2 = [Msg(0, 0)], [Msg(0, 1)]
    fetcher, _consumer, log = make([b1, b2])
    fetcher.pipeline = False
    fetcher.fetch(10, 1.0, single=False)
    assert log == ["fetch [0]", "send 1", "wait 1"]
    assert fetcher.take(1) == b1


def test_taking_a_partition_settles_the_batch_fetched_ahead() -> None:
    fetcher, _consumer, log = make([[Msg(0, 0), Msg(1, 0)], [Msg(0, 1), Msg(1, 1)]])
    fetcher.fetch(2, 1.0, single=False)
    assert fetcher.first_offset(("t", 1)) == 0
    mine = fetcher.take_partition(("t", 0))
    assert [(m.partition(), m.offset()) for m in mine] == [(0, 0), (0, 1)]
    assert "wait 2" in log  # the ahead batch's check was waited for first
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == [(1, 0), (1, 1)]
    assert fetcher.first_offset(("t", 0)) is None


def test_a_rebalance_inside_the_fetch_ahead_does_not_deliver_twice() -> None:
    b1, b2 = [Msg(0, 0), Msg(1, 0)], [Msg(1, 1)]
    fetcher, consumer, _log = make([b1, b2])
    fetcher.pipeline = False
    fetcher.fetch(10, 1.0, single=False)  # b1 ready
    fetcher.take(10)
    fetcher.pipeline = True
    consumer.batches = [[Msg(0, 1), Msg(1, 2)], [Msg(1, 3), Msg(1, 4)]]
    fetcher.fetch(2, 1.0, single=False)  # [0@1, 1@2] ready, [1@3, 1@4] ahead
    fetcher.take(10)
    revoked: list[Any] = []
    consumer.during = lambda: revoked.extend(fetcher.take_partition(("t", 1)))
    consumer.batches = [[Msg(0, 2)]]
    fetcher.fetch(2, 1.0, single=False)
    # The revocation (inside librdkafka's consume) took the pending 1@3 away.
    assert [(m.partition(), m.offset()) for m in revoked] == [(1, 3), (1, 4)]
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == []
    fetcher.fetch(2, 1.0, single=False)
    assert [(m.partition(), m.offset()) for m in fetcher.ready] == [(0, 2)]
