"""One router: the Python formula (``linear_hash.Router``) and its C twin agree.

The routing formula lives in ``Router.partition`` (Python) and ``route_hash`` (C, in
``ordered/_fastproduce.c``); everything else routes through one of them. Checked here
with generated keys and layouts, and against the known answers of
``vectors/linear_hash.json`` (which a port must reproduce too).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linear_hash import ALGORITHMS, Layout, Router, partition_for, route
from ordered.compiled import compiled_router

fast = pytest.importorskip("ordered._fastproduce")

VECTORS = Path(__file__).resolve().parents[2] / "vectors" / "linear_hash.json"

keys = st.one_of(st.binary(max_size=64), st.text(max_size=24))
counts = st.integers(1, 64).flatmap(
    lambda n: st.tuples(st.just(n), st.one_of(st.integers(n, 50 * n), st.integers(n, 10**6)))
)


def naive(h: int, initial: int, active: int) -> int:
    """KIP-253 as the module doc states it: two moduli, no folding trick."""
    level = 0
    while initial * 2 ** (level + 1) <= active:
        level += 1
    r = h % (initial * 2**level)
    return r if r >= active - initial * 2**level else h % (initial * 2 ** (level + 1))


@settings(max_examples=400, deadline=None)
@given(key=keys, layout=counts)
def test_compiled_and_python_routers_agree(key: bytes | str, layout: tuple[int, int]) -> None:
    initial, active = layout
    router = Router(initial, active)
    compiled = fast.Router(router)
    want = router.partition(key)
    assert compiled.partition(key) == want
    layout = Layout(initial, active)
    assert layout.partition_for(key) == want
    if isinstance(key, bytes) or key.isascii():
        moduli = (layout.modulus_high, layout.modulus_low, active)
        assert fast.partition(key, *moduli) == want
    assert partition_for(key, initial, active) == want
    assert (compiled.initial, compiled.active) == (initial, active)


@settings(max_examples=200, deadline=None)
@given(key=st.binary(max_size=32), layout=counts)
def test_the_compiled_send_path_routes_with_the_compiled_router(
    key: bytes, layout: tuple[int, int]
) -> None:
    sent: list[tuple[Any, ...]] = []
    router = Router(*layout)
    path = fast.SendPath()
    path._bind_send_path(lambda *a: sent.append(a), {"t": fast.Router(router)}, None)
    path.produce("t", b"v", key)
    assert sent == [("t", b"v", key, router.partition(key))]


@settings(max_examples=300, deadline=None)
@given(h=st.integers(0, 2**40), layout=counts, algorithm=st.sampled_from(ALGORITHMS))
def test_route_is_the_formula(h: int, layout: tuple[int, int], algorithm: str) -> None:
    initial, active = layout
    want = naive(h, initial, active)
    assert route(h, initial, active) == want
    assert Router(initial, active, algorithm).route(h) == want
    assert Layout(initial, active).route(h) == want


def test_known_answers_of_the_golden_vectors() -> None:
    routes = json.loads(VECTORS.read_text())["routes"]
    murmur3 = [r for r in routes if r["algorithm"] == "murmur3"]
    assert len(murmur3) > 500
    for r in murmur3:
        key = bytes.fromhex(r["key"])
        router = Router(r["initial"], r["active"])
        assert fast.Router(router).partition(key) == r["partition"], r
        assert router.partition(key) == r["partition"], r
        assert naive(r["hash"], r["initial"], r["active"]) == r["partition"], r
    for r in routes:
        router = Router(r["initial"], r["active"], r["algorithm"])
        assert compiled_router(router).partition(bytes.fromhex(r["key"])) == r["partition"], r


def test_known_answers_by_hand() -> None:
    # mmh3.hash(b"key", 0, False) == 3801901636 (in the golden vectors too): 3801901636
    # % 6 == 4 is active under (3, 5); % 48 == 4 under (12, 40); % 12288 == 6724 is
    # active under (3, 10000).
    assert fast.hash(b"key") == 3801901636
    for initial, active, want in ((1, 1, 0), (3, 5, 4), (12, 40, 4), (3, 10000, 6724)):
        assert Router(initial, active).partition(b"key") == want
        assert fast.Router(Router(initial, active)).partition(b"key") == want


def test_one_python_function_and_its_compiled_twin() -> None:
    assert Layout.partition_for is Router.partition
    layout = Layout(3, 7, 2)
    assert type(compiled_router(layout)) is fast.Router
    other = Router(3, 7, "murmur2")
    assert compiled_router(other) is other  # only murmur3 is compiled
    # Keys the C code does not hash go through the Python router: same answers, errors.
    compiled = compiled_router(layout)
    for key in ("ключ", bytearray(b"k"), memoryview(b"k")):
        assert compiled.partition(key) == layout.partition_for(key)
    with pytest.raises(TypeError, match="records without a key"):
        compiled.partition(None)
    with pytest.raises(ValueError, match="only a murmur3 router"):
        fast.Router(other)


def test_router_is_a_value() -> None:
    router = Router(3, 7, "crc32")
    assert router == Router(3, 7, "crc32") != Router(3, 7)
    assert len({router, Router(3, 7, "crc32")}) == 1
    assert pickle.loads(pickle.dumps(router)) == router
    assert repr(router) == "Router(initial=3, active=7, algorithm='crc32')"
    with pytest.raises(AttributeError, match="immutable"):
        router.active = 8  # type: ignore[misc]
    with pytest.raises(ValueError, match="algorithm must be one of"):
        Router(3, 7, "md5")
    with pytest.raises(ValueError, match="active must be >= initial"):
        Router(3, 2)
    with pytest.raises(ValueError, match="algorithm must be one of"):
        Layout(3, 7).partition_for(b"k", None)  # type: ignore[arg-type]
