"""The fast audit's bulk check where several epochs may have placed a partition's offsets."""

from __future__ import annotations

import pytest

from linear_hash import Layout
from ordered.compiled import compiled_module
from ordered.consumer.audit import RecordAudit

pytestmark = pytest.mark.skipif(compiled_module() is None, reason="the compiled router")

BEFORE = Layout(2, 2, 0)
AFTER = Layout(2, 3, 1)
KEYS = [f"key-{i}".encode() for i in range(400)]


def _moved() -> list[bytes]:
    return [k for k in KEYS if BEFORE.partition_for(k) != AFTER.partition_for(k)]


def test_a_key_placed_by_either_layout_is_confirmed() -> None:
    keys = _moved()[:20] + KEYS[:20]
    # Half of them where the old layout put them, the rest where the new one does.
    parts = [BEFORE.partition_for(k) for k in keys[:10]] + [
        AFTER.partition_for(k) for k in keys[10:]
    ]
    assert RecordAudit._sample_any(BEFORE, (AFTER,), "murmur3", keys, parts)


def test_a_key_placed_by_neither_layout_is_not_confirmed() -> None:
    keys = KEYS[:30]
    parts = [BEFORE.partition_for(k) for k in keys]
    stray = next(
        i
        for i, k in enumerate(keys)
        if {BEFORE.partition_for(k), AFTER.partition_for(k)} != {0, 1, 2}
    )
    used = {BEFORE.partition_for(keys[stray]), AFTER.partition_for(keys[stray])}
    parts[stray] = next(p for p in (0, 1, 2) if p not in used)
    assert not RecordAudit._sample_any(BEFORE, (AFTER,), "murmur3", keys, parts)


def test_an_unkeyed_record_goes_to_the_checked_path() -> None:
    keys: list[bytes | None] = [None, *KEYS[:3]]
    parts = [0, *(BEFORE.partition_for(k) for k in KEYS[:3])]
    assert not RecordAudit._sample_any(BEFORE, (AFTER,), "murmur3", keys, parts)
