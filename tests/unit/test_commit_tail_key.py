"""The commit tail's parser of ``__consumer_offsets`` keys (coordinator.relay.commit_tail)."""

from __future__ import annotations

import struct

import pytest

from coordinator.relay.commit_tail import parse_commit_key


def _key(version: int, group: str, topic: str, partition: int) -> bytes:
    g, t = group.encode(), topic.encode()
    return (
        struct.pack(">hh", version, len(g))
        + g
        + struct.pack(">h", len(t))
        + t
        + struct.pack(">i", partition)
    )


def test_offset_commit_keys() -> None:
    # A key as Kafka 4.3 wrote it for a plain consumer's commit (read from the topic).
    real = b"\x00\x01\x00\x07probe-x\x00\x16scale-coord-144-14a8ed\x00\x00\x00\x00"
    assert parse_commit_key(real) == ("probe-x", "scale-coord-144-14a8ed", 0)
    assert parse_commit_key(_key(0, "g", "t", 7)) == ("g", "t", 7)
    assert parse_commit_key(_key(1, "grüppe", "t.x_y-1", 2**31 - 1)) == (
        "grüppe",
        "t.x_y-1",
        2**31 - 1,
    )


@pytest.mark.parametrize(
    "key",
    [
        None,
        b"",
        b"\x00",
        _key(2, "g", "t", 0),  # a group metadata key
        _key(3, "g", "t", 0),
        _key(1, "g", "t", 0)[:-1],  # truncated
        _key(1, "g", "t", 0) + b"\x00",  # trailing bytes
        b"\x00\x01\x00\x09g",  # a length past the end
        b"\x00\x01\x00\x01\xff\x00\x01t\x00\x00\x00\x00",  # not UTF-8
    ],
)
def test_other_keys_are_skipped(key: bytes | None) -> None:
    assert parse_commit_key(key) is None
