"""Linear-hashing routing and the split tree: properties, known answers, bad input."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linear_hash import children, hash_key, parent, partition_for, route

H32 = st.integers(0, 2**32 - 1)


def naive_route(h: int, initial: int, active: int) -> int:
    """KIP-253's definition, spelled out literally."""
    level = 0
    while initial * 2 ** (level + 1) <= active:
        level += 1
    split = active - initial * 2**level
    r = h % (initial * 2**level)
    if r < split:
        r = h % (initial * 2 ** (level + 1))
    return int(r)


@st.composite
def counts(draw: st.DrawFn, max_initial: int = 16, max_factor: int = 40) -> tuple[int, int]:
    initial = draw(st.integers(1, max_initial))
    active = draw(st.integers(initial, initial * max_factor))
    return initial, active


# --- Known answers ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("h", "initial", "active", "expected"),
    [
        (0, 1, 1, 0),
        (12345, 1, 1, 0),
        (7, 4, 4, 3),
        (13, 4, 6, 5),  # 13 % 4 = 1 < S = 2, so 13 % 8 = 5
        (14, 4, 6, 2),  # 14 % 4 = 2 >= S, stays 2
        (6, 4, 6, 2),  # 6 % 8 = 6 is not active yet: folds to 2
        (4, 4, 6, 4),
        (2**32 - 1, 3, 7, 3),
        (1000, 3, 12, 4),
        (1001, 12, 40, 17),  # 1001 % 24 = 17 >= S = 16
        (4171401059, 32, 100, 99),
    ],
)
def test_route_known_answers(h: int, initial: int, active: int, expected: int) -> None:
    assert route(h, initial, active) == expected
    assert naive_route(h, initial, active) == expected


def test_parent_and_children_known_answers() -> None:
    # initial = 3: 3 <- 0, 4 <- 1, 5 <- 2, 6..11 <- 0..5, 12..23 <- 0..11
    assert [parent(p, 3) for p in range(13)] == [
        None, None, None, 0, 1, 2, 0, 1, 2, 3, 4, 5, 0
    ]  # fmt: skip
    assert children(0, 3, 25) == [3, 6, 12, 24]
    assert children(0, 3, 24) == [3, 6, 12]
    assert children(3, 3, 25) == [9, 15]
    assert children(5, 3, 12) == [11]
    assert children(11, 3, 24) == [23]
    assert children(2, 3, 3) == []
    assert children(0, 1, 16) == [1, 2, 4, 8]
    assert children(1, 1, 16) == [3, 5, 9]
    assert children(40, 1, 16) == []


# --- Properties ---------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(h=H32, c=counts())
def test_route_in_range_and_matches_definition(h: int, c: tuple[int, int]) -> None:
    initial, active = c
    r = route(h, initial, active)
    assert 0 <= r < active
    assert r == naive_route(h, initial, active)


@settings(max_examples=100, deadline=None)
@given(h=st.integers(0, 2**200), c=counts())
def test_route_takes_any_non_negative_int(h: int, c: tuple[int, int]) -> None:
    assert route(h, *c) == naive_route(h, *c)


@settings(max_examples=200, deadline=None)
@given(h=H32, c=counts())
def test_growing_by_one_moves_keys_only_from_split_to_new(h: int, c: tuple[int, int]) -> None:
    initial, active = c
    level = (active // initial).bit_length() - 1
    split = active - initial * 2**level
    before, after = route(h, initial, active), route(h, initial, active + 1)
    if before != after:
        assert (before, after) == (split, active)


@settings(max_examples=50, deadline=None)
@given(c=counts(max_initial=8, max_factor=16))
def test_growing_by_one_exhaustively(c: tuple[int, int]) -> None:
    """Routes depend on h mod the larger high modulus only; scan every residue."""
    initial, active = c
    level = (active // initial).bit_length() - 1
    split = active - initial * 2**level
    modulus = initial * 2 ** (level + 2)
    moved = {
        (route(h, initial, active), route(h, initial, active + 1))
        for h in range(modulus)
        if route(h, initial, active) != route(h, initial, active + 1)
    }
    assert moved == {(split, active)}


@settings(max_examples=200, deadline=None)
@given(h=H32, c=counts())
def test_shrinking_by_one_moves_keys_only_from_last_to_its_parent(
    h: int, c: tuple[int, int]
) -> None:
    initial, active = c
    if active == initial:
        active += 1
    before, after = route(h, initial, active), route(h, initial, active - 1)
    if before != after:
        assert before == active - 1
        assert after == parent(active - 1, initial)


@settings(max_examples=200, deadline=None)
@given(h=H32, c=counts(), k=st.integers(0, 200))
def test_grow_by_k_then_shrink_by_k_puts_every_key_back(h: int, c: tuple[int, int], k: int) -> None:
    initial, active = c
    start = route(h, initial, active)
    grown = route(h, initial, active + k)
    # grown is start or one of its descendants: walking up from grown reaches start.
    node: int | None = grown
    while node is not None and node != start:
        node = parent(node, initial)
    assert node == start
    assert route(h, initial, (active + k) - k) == start


@settings(max_examples=200, deadline=None)
@given(h=H32, c=counts())
def test_route_is_the_deepest_active_ancestor_of_any_deeper_route(
    h: int, c: tuple[int, int]
) -> None:
    """route(p, N, U) is where partition p's keys live under U."""
    initial, active = c
    deep = route(h, initial, active * 8)
    assert route(deep, initial, active) == route(h, initial, active)


@settings(max_examples=200, deadline=None)
@given(p=st.integers(0, 5000), initial=st.integers(1, 20), extra=st.integers(0, 5000))
def test_parent_children_are_inverse(p: int, initial: int, extra: int) -> None:
    active = max(initial, p + 1) + extra
    kids = children(p, initial, active)
    assert kids == sorted(kids)
    assert all(parent(c, initial) == p for c in kids)
    assert all(c < active for c in kids)
    brute = [c for c in range(p + 1, active) if parent(c, initial) == p]
    assert kids == brute
    q = parent(p, initial)
    if p < initial:
        assert q is None
    else:
        assert q is not None
        assert 0 <= q < p
        assert p in children(q, initial, p + 1)


def test_partition_for_is_route_of_hash_key() -> None:
    for i in range(500):
        key = f"key-{i}"
        for initial, active in [(1, 1), (1, 7), (5, 5), (5, 23), (16, 100)]:
            for algorithm in ("murmur3", "murmur2", "crc32"):
                assert partition_for(key, initial, active, algorithm) == route(
                    hash_key(key, algorithm), initial, active
                )


@settings(max_examples=200, deadline=None)
@given(
    key=st.binary(max_size=16),
    layouts=st.lists(counts(max_initial=300, max_factor=4), min_size=1, max_size=6),
)
def test_partition_for_memo_never_leaks_between_layouts(
    key: bytes, layouts: list[tuple[int, int]]
) -> None:
    """The module function caches the last layout; alternating layouts stay exact."""
    h = hash_key(key)
    for initial, active in layouts + layouts[::-1]:
        # Fresh int objects for large values: the memo must not rely on identity luck.
        initial, active = int(str(initial)), int(str(active))
        assert partition_for(key, initial, active) == naive_route(h, initial, active)


# --- Bad input ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "fn", [lambda n, u: route(5, n, u), lambda n, u: partition_for(b"k", n, u)]
)
def test_bad_counts(fn: Callable[..., int]) -> None:
    call = fn
    with pytest.raises(ValueError, match=r"^initial must be >= 1, got 0"):
        call(0, 4)
    with pytest.raises(ValueError, match=r"^initial must be >= 1, got -3"):
        call(-3, 4)
    with pytest.raises(ValueError, match=r"^active must be >= initial \(4\), got 3"):
        call(4, 3)
    with pytest.raises(TypeError, match=r"^initial must be an int, not float"):
        call(1.0, 4)
    with pytest.raises(TypeError, match=r"^active must be an int, not str"):
        call(1, "4")
    with pytest.raises(TypeError, match=r"^initial must be an int, not bool"):
        call(True, 4)


def test_partition_for_rejects_int_lookalikes_even_after_caching_the_int() -> None:
    assert partition_for(b"k", 1, 3) == route(hash_key(b"k"), 1, 3)
    with pytest.raises(TypeError, match=r"^initial must be an int, not float"):
        partition_for(b"k", 1.0, 3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^initial must be an int, not bool"):
        partition_for(b"k", True, 3)
    with pytest.raises(TypeError, match=r"^active must be an int, not float"):
        partition_for(b"k", 1, 3.0)  # type: ignore[arg-type]


def test_route_bad_hash() -> None:
    with pytest.raises(ValueError, match=r"^h must be >= 0, got -1"):
        route(-1, 1, 1)
    with pytest.raises(TypeError, match=r"^h must be an int, not float"):
        route(1.5, 1, 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^h must be an int, not NoneType"):
        route(None, 1, 1)  # type: ignore[arg-type]


def test_parent_children_bad_input() -> None:
    with pytest.raises(TypeError, match=r"^partition must be an int, not str"):
        parent("3", 1)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^partition must be an int, not float"):
        children(3.0, 1, 8)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"^partition must be >= 0, got -1"):
        parent(-1, 1)
    with pytest.raises(ValueError, match=r"^partition must be >= 0, got -2"):
        children(-2, 1, 4)
    with pytest.raises(ValueError, match=r"^initial must be >= 1, got 0"):
        parent(3, 0)
    with pytest.raises(ValueError, match=r"^active must be >= initial \(4\), got 2"):
        children(0, 4, 2)
