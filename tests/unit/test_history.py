"""TopicHistory from records, and the watcher's session state machine (no servers)."""

from __future__ import annotations

import pytest

from coordinator.kernel.history import _TRANSITIONS, SessionState, TopicHistory
from coordinator.kernel.store import EpochRecord, TopicRecord
from linear_hash import Layout, key_flow


def _topic(**over: object) -> TopicRecord:
    base: dict[str, object] = dict(
        topic="t", initial=2, active=3, epoch=1, pending=1, physical=3,
        algorithm="murmur3", ordered=True, compacted=False, adopted_at=1.0,
    )  # fmt: skip
    base.update(over)
    return TopicRecord(**base)  # type: ignore[arg-type]


def _epoch(epoch: int, frm: int, to: int, sealed: bool, bounds: dict[int, int]) -> EpochRecord:
    return EpochRecord(
        topic="t", epoch=epoch, initial=2, from_active=frm, to_active=to,
        state="sealed" if sealed else "pending", edges=tuple(key_flow(2, frm, to)),
        boundaries=bounds, producers=(), expired={}, created_at=1.0,
        sealed_at=2.0 if sealed else None,
    )  # fmt: skip


def test_history_from_records_orders_epochs_and_builds_layouts() -> None:
    e0 = _epoch(0, 2, 2, True, {})
    e1 = _epoch(1, 2, 3, False, {2: 0})
    h = TopicHistory.from_records(_topic(), [e1, e0])
    assert [e.epoch for e in h.epochs] == [0, 1]
    assert h.layouts == {0: Layout(2, 2, 0), 1: Layout(2, 3, 1)}
    assert h.layout == Layout(2, 3, 1)
    assert h.pending is not None and h.pending.epoch == 1
    assert h.pending_givers == frozenset({0})
    assert h.adopted and h.latest_epoch == 1
    # The pending epoch closes partition 2's gate at its boundary.
    assert h.gates().limit(2) == 0


def test_history_of_unordered_or_unadopted_topic_has_no_epochs() -> None:
    h = TopicHistory.from_records(_topic(ordered=False), [_epoch(0, 2, 2, True, {})])
    assert h.epochs == () and not h.adopted and h.layout is None
    missing = TopicHistory("t", None)
    assert not missing.adopted and missing.latest_epoch == -1
    with pytest.raises(Exception, match="not adopted"):
        missing.require_adopted()


def test_session_transitions_are_listed_and_stopped_is_terminal() -> None:
    assert _TRANSITIONS[SessionState.STOPPED] == frozenset()
    assert SessionState.CONNECTED not in _TRANSITIONS[SessionState.CONNECTED]
    assert _TRANSITIONS[SessionState.LOST] == frozenset(
        {SessionState.CONNECTED, SessionState.STOPPED}
    )
