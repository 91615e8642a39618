"""``Layout``: validation, routing, JSON records, immutability."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from linear_hash import LAYOUT_VERSION, Layout, hash_key, key_flow, partition_for, route


@st.composite
def layouts(draw: st.DrawFn) -> Layout:
    initial = draw(st.integers(1, 64))
    active = draw(st.integers(initial, initial * 50))
    return Layout(initial, active, draw(st.integers(0, 10**6)))


def test_derived_values() -> None:
    layout = Layout(4, 6, 2)
    assert (layout.level, layout.split, layout.modulus_low, layout.modulus_high) == (0, 2, 4, 8)
    layout = Layout(3, 12)
    assert (layout.level, layout.split, layout.modulus_low, layout.modulus_high) == (2, 0, 12, 24)
    layout = Layout(12, 40)
    assert (layout.level, layout.split, layout.modulus_low, layout.modulus_high) == (1, 16, 24, 48)


@settings(max_examples=200, deadline=None)
@given(layout=layouts(), key=st.binary(max_size=24), h=st.integers(0, 2**40))
def test_layout_routes_like_the_functions(layout: Layout, key: bytes, h: int) -> None:
    assert (
        layout.initial * 2**layout.level <= layout.active < layout.initial * 2 ** (layout.level + 1)
    )
    assert layout.split == layout.active - layout.modulus_low
    assert layout.route(h) == route(h, layout.initial, layout.active)
    for algorithm in ("murmur3", "murmur2", "crc32"):
        assert layout.partition_for(key, algorithm) == partition_for(
            key, layout.initial, layout.active, algorithm
        )
    assert layout.partition_for(key) == route(hash_key(key), layout.initial, layout.active)


def test_with_active_and_key_flow_to() -> None:
    layout = Layout(3, 5, 7)
    grown = layout.with_active(12)
    assert grown == Layout(3, 12, 8)
    assert layout.with_active(4, epoch=20) == Layout(3, 4, 20)
    assert layout.key_flow_to(grown) == key_flow(3, 5, 12)
    with pytest.raises(ValueError, match=r"^other.initial \(4\) differs from initial \(3\)"):
        layout.key_flow_to(Layout(4, 5))
    with pytest.raises(ValueError, match=r"^active must be >= initial"):
        layout.with_active(2)


def test_frozen_slotted_hashable_and_picklable() -> None:
    layout = Layout(4, 6, 2)
    with pytest.raises(dataclasses.FrozenInstanceError):
        layout.active = 7  # type: ignore[misc]
    assert not hasattr(layout, "__dict__")
    assert layout == Layout(4, 6, 2)
    assert layout != Layout(4, 6, 3)
    assert len({layout, Layout(4, 6, 2), Layout(4, 7, 2)}) == 2
    assert repr(layout) == "Layout(initial=4, active=6, epoch=2)"
    clone = pickle.loads(pickle.dumps(layout))
    assert clone == layout
    assert clone.partition_for(b"x") == layout.partition_for(b"x")
    assert clone.modulus_high == 8
    assert dataclasses.replace(layout, active=9).modulus_high == 16


# --- JSON -----------------------------------------------------------------------------------


def test_to_json_is_sorted_and_versioned() -> None:
    text = Layout(4, 6, 2).to_json()
    assert text == '{"active":6,"epoch":2,"initial":4,"version":1}'
    assert json.loads(text)["version"] == LAYOUT_VERSION == 1
    assert list(json.loads(text)) == sorted(json.loads(text))


@settings(max_examples=100, deadline=None)
@given(layout=layouts())
def test_json_round_trip(layout: Layout) -> None:
    assert Layout.from_json(layout.to_json()) == layout
    assert Layout.from_json(layout.to_json().encode()) == layout


@pytest.mark.parametrize(
    ("record", "pattern"),
    [
        ("", r"not JSON"),
        ("{", r"not JSON"),
        (b"\xff", r"not JSON"),
        ("[1, 2]", r"expected an object, got list"),
        ("null", r"expected an object, got NoneType"),
        ('{"initial": 1, "active": 1, "epoch": 0}', r"unsupported version None"),
        ('{"version": 2, "initial": 1, "active": 1, "epoch": 0}', r"unsupported version 2"),
        ('{"version": "1", "initial": 1, "active": 1, "epoch": 0}', r"unsupported version '1'"),
        ('{"version": 1.0, "initial": 1, "active": 1, "epoch": 0}', r"unsupported version 1\.0"),
        ('{"version": true, "initial": 1, "active": 1, "epoch": 0}', r"unsupported version True"),
        ('{"version": 1, "initial": 1, "active": 1}', r"missing \['epoch'\]"),
        (
            '{"version": 1, "initial": 1, "active": 1, "epoch": 0, "retired": []}',
            r"unknown \['retired'\]",
        ),
        ('{"version": 1, "initial": "1", "active": 1, "epoch": 0}', r"initial must be an integer"),
        ('{"version": 1, "initial": 1, "active": 2.0, "epoch": 0}', r"active must be an integer"),
        ('{"version": 1, "initial": 1, "active": 1, "epoch": false}', r"epoch must be an integer"),
        ('{"version": 1, "initial": 0, "active": 1, "epoch": 0}', r"initial must be >= 1"),
        ('{"version": 1, "initial": 4, "active": 3, "epoch": 0}', r"active must be >= initial"),
        ('{"version": 1, "initial": 1, "active": 1, "epoch": -1}', r"epoch must be >= 0"),
    ],
)
def test_from_json_rejects_malformed_records(record: str | bytes, pattern: str) -> None:
    with pytest.raises(ValueError, match=r"^malformed layout record: .*" + pattern):
        Layout.from_json(record)


# --- Validation -------------------------------------------------------------------------------


def test_constructor_validation() -> None:
    with pytest.raises(ValueError, match=r"^initial must be >= 1, got 0"):
        Layout(0, 1)
    with pytest.raises(ValueError, match=r"^active must be >= initial \(3\), got 2"):
        Layout(3, 2)
    with pytest.raises(ValueError, match=r"^epoch must be >= 0, got -1"):
        Layout(1, 1, -1)
    with pytest.raises(TypeError, match=r"^initial must be an int, not float"):
        Layout(1.0, 2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"^active must be an int, not bool"):
        Layout(1, True)
    with pytest.raises(TypeError, match=r"^epoch must be an int, not str"):
        Layout(1, 1, "0")  # type: ignore[arg-type]


def test_route_validation() -> None:
    layout = Layout(2, 5)
    with pytest.raises(ValueError, match=r"^h must be >= 0, got -5"):
        layout.route(-5)
    with pytest.raises(TypeError, match=r"^h must be an int, not float"):
        layout.route(5.0)  # type: ignore[arg-type]
