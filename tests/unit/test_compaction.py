"""KIP-253 section 9 helpers: ancestors (known answers, property), the copy marker, the memo."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linear_hash import partition_for
from ordered.compaction import TOMBSTONE_HEADER, TombstoneMemo, ancestors, is_tombstone_copy


@pytest.mark.parametrize(
    ("partition", "initial", "expected"),
    [
        (0, 2, ()),
        (1, 2, ()),
        (2, 2, (0,)),
        (3, 2, (1,)),
        (4, 2, (0,)),
        (6, 2, (2, 0)),
        (7, 2, (3, 1)),
        (13, 3, (1,)),
        (10, 3, (4, 1)),
        (5, 5, (0,)),
        (0, 1, ()),
        (7, 1, (3, 1, 0)),
    ],
)
def test_ancestors_known_answers(partition: int, initial: int, expected: tuple[int, ...]) -> None:
    assert ancestors(partition, initial) == expected


@settings(max_examples=300, deadline=None)
@given(
    key=st.binary(min_size=0, max_size=16),
    initial=st.integers(min_value=1, max_value=8),
    grow=st.integers(min_value=0, max_value=40),
)
def test_ancestors_are_where_the_key_lived_under_every_smaller_layout(
    key: bytes, initial: int, grow: int
) -> None:
    active = initial + grow
    now = partition_for(key, initial, active)
    earlier = {partition_for(key, initial, a) for a in range(initial, active + 1)}
    assert earlier == {now, *ancestors(now, initial)}
    # Nearest first: each ancestor is the parent of the one before.
    chain = (now, *ancestors(now, initial))
    assert list(chain) == sorted(chain, reverse=True)


def test_ancestors_bad_input() -> None:
    with pytest.raises(ValueError, match="initial"):
        ancestors(3, 0)
    with pytest.raises(ValueError, match="partition"):
        ancestors(-1, 2)


@dataclass
class _Message:
    """The two confluent ``Message`` accessors the marker check reads."""

    _value: bytes | None
    _headers: list[tuple[str, Any]] | None

    def value(self) -> bytes | None:
        return self._value

    def headers(self) -> list[tuple[str, Any]] | None:
        return self._headers


def test_is_tombstone_copy() -> None:
    assert is_tombstone_copy(_Message(None, [(TOMBSTONE_HEADER, b"2")]))
    assert is_tombstone_copy(_Message(None, [("ordered.epoch", b"1"), (TOMBSTONE_HEADER, b"2")]))
    assert not is_tombstone_copy(_Message(None, None))  # the user's own tombstone
    assert not is_tombstone_copy(_Message(None, [("ordered.epoch", b"1")]))
    assert not is_tombstone_copy(_Message(b"v", [(TOMBSTONE_HEADER, b"2")]))


def test_memo_remembers_and_restarts_when_full() -> None:
    memo = TombstoneMemo()
    assert memo.first(b"k") and not memo.first(b"k") and memo.first("k")
    for i in range(100_000):
        memo.first(i)
    assert memo.first(b"k")  # forgotten after the restart: one more copy, never fewer
