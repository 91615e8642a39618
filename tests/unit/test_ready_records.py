"""ReadyRecords: batches kept whole, records taken in order (against a deque model)."""

from __future__ import annotations

import collections
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from ordered.consumer.fetch import ReadyRecords


def test_a_whole_batch_is_handed_back_as_the_same_list() -> None:
    ready = ReadyRecords()
    batch = [1, 2, 3]
    ready.extend(batch)
    assert ready.take(3) is batch
    assert len(ready) == 0 and not ready


def test_poll_takes_one_record_at_a_time_from_the_first_batch() -> None:
    ready = ReadyRecords([1, 2, 3])
    ready.extend([4, 5])
    assert [ready.take(1) for _ in range(5)] == [[1], [2], [3], [4], [5]]
    assert ready.take(1) == []


ops = st.lists(
    st.one_of(
        st.tuples(st.just("extend"), st.integers(min_value=0, max_value=7)),
        st.tuples(st.just("take"), st.integers(min_value=1, max_value=9)),
    ),
    max_size=40,
)


@given(ops)
def test_records_come_out_in_order_whatever_the_batches_and_takes(
    steps: list[tuple[str, int]],
) -> None:
    ready = ReadyRecords()
    model: collections.deque[Any] = collections.deque()
    serial = 0
    for op, n in steps:
        if op == "extend":
            batch = list(range(serial, serial + n))
            serial += n
            ready.extend(batch)
            model.extend(batch)
        else:
            expected = [model.popleft() for _ in range(min(n, len(model)))]
            assert ready.take(n) == expected
        assert len(ready) == len(model)
        assert list(ready) == list(model)
