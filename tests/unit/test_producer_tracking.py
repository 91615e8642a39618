"""Unit tests of the producer barrier's pure bookkeeping and the topic state machine."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ordered.producer.routes import TRANSITIONS as _TRANSITIONS
from ordered.producer.routes import TopicState, check_transition
from ordered.producer.tracking import DrainTracker, Switch


def test_untracked_records_block_the_drain() -> None:
    tracker = DrainTracker()
    gen = tracker.begin()
    assert tracker.tracking
    # Three untracked records pending, nothing tracked yet.
    assert not tracker.drained(gen, queue_len=3)
    tracker.sent(gen)
    tracker.sent(gen)
    # Queue holds 3 untracked + 2 tracked.
    assert not tracker.drained(gen, queue_len=5)
    # The untracked ones are delivered; tracked ones of this generation do not block.
    assert tracker.untracked(2) == 0
    assert tracker.drained(gen, queue_len=2)


def test_older_generation_blocks_a_newer_switch() -> None:
    tracker = DrainTracker()
    first = tracker.begin()
    tracker.sent(first)  # produced after switch 1, before switch 2
    second = tracker.begin()
    tracker.sent(second)
    assert tracker.drained(first, queue_len=2)
    assert not tracker.drained(second, queue_len=2)
    tracker.done(first)
    assert tracker.drained(second, queue_len=1)
    assert tracker.outstanding(second) == 1


def test_counts_above_the_queue_length_are_not_drained() -> None:
    tracker = DrainTracker()
    gen = tracker.begin()
    tracker.sent(gen)
    tracker.sent(gen)
    # One report popped by another thread but not yet counted: do not conclude.
    assert not tracker.drained(gen, queue_len=1)
    assert tracker.drained(gen, queue_len=2)


def test_done_without_sent_is_a_bug() -> None:
    tracker = DrainTracker()
    with pytest.raises(ValueError, match="generation 1"):
        tracker.done(1)


def test_stop_keeps_counts() -> None:
    tracker = DrainTracker()
    gen = tracker.begin()
    tracker.sent(gen)
    tracker.stop()
    assert not tracker.tracking
    assert tracker.total == 1
    # A later switch still knows the earlier tracked record is pending.
    later = tracker.begin()
    assert later == gen + 1
    assert not tracker.drained(later, queue_len=1)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["untracked", "begin", "sent", "done"]), max_size=60))
def test_drained_matches_a_brute_force_model(ops: list[str]) -> None:
    """Against an explicit list of pending records with their generations."""
    tracker = DrainTracker()
    pending: list[int | None] = []  # None: untracked
    switches: list[int] = []
    for op in ops:
        if op == "untracked" and not tracker.tracking:
            pending.append(None)
        elif op == "begin":
            switches.append(tracker.begin())
        elif op == "sent" and tracker.tracking:
            tracker.sent(tracker.generation)
            pending.append(tracker.generation)
        elif op == "done" and pending:
            record = pending.pop(0)
            if record is not None:
                tracker.done(record)
        for gen in switches:
            expected = all(g is not None and g >= gen for g in pending)
            assert tracker.drained(gen, len(pending)) == expected


def test_switch_first_offsets() -> None:
    switch = Switch("t", epoch=3, generation=5)
    switch.delivered(4, 0, 10)  # an older generation: may be an old-epoch record
    switch.delivered(5, 0, 20)
    switch.delivered(6, 0, 25)  # later: the first one stays
    switch.delivered(5, 1, 0)  # first record at 0: nothing older there
    switch.delivered(5, 2, -1001)  # no offset known
    assert switch.first_offsets == {0: 20, 1: 0}
    assert switch.last_offsets() == {0: 19}


def test_state_machine_table() -> None:
    assert set(_TRANSITIONS) == set(TopicState)
    check_transition(TopicState.ROUTING, TopicState.SWITCHING)
    check_transition(TopicState.SWITCHING, TopicState.ROUTING)
    check_transition(TopicState.SUSPENDED, TopicState.ROUTING)
    for state in TopicState:
        assert TopicState.UNKNOWN not in _TRANSITIONS[state]
    with pytest.raises(RuntimeError, match="PLAIN -> SUSPENDED"):
        check_transition(TopicState.PLAIN, TopicState.SUSPENDED)


def test_route_places_keys_like_partition_for() -> None:
    from linear_hash import Layout, partition_for
    from ordered.producer.routes import Route as _Route

    for algorithm in ("murmur3", "murmur2", "crc32"):
        layout = Layout(3, 7, 2)
        route = _Route(TopicState.ROUTING, layout, algorithm, [("ordered.epoch", b"2")])
        assert route.routable and not route.plain
        assert route.place is not None
        for key in ("a", b"b", "ключ", b""):
            assert route.place(key) == partition_for(key, 3, 7, algorithm)
        with pytest.raises(ValueError, match="UTF-8"):
            route.place("\ud800")  # a lone surrogate: an error, never a crash
        assert route.round_robin is not None
        assert [next(route.round_robin) for _ in range(8)] == [0, 1, 2, 3, 4, 5, 6, 0]
    suspended = _Route(TopicState.SUSPENDED, Layout(3, 7, 2))
    assert not suspended.routable and suspended.place is not None
    plain = _Route(TopicState.PLAIN)
    assert plain.plain and plain.place is None and not plain.routable


def test_merge_headers_appends_ours_without_mutating() -> None:
    from ordered.producer.routes import merge_headers as _merge_headers

    ours = [("ordered.epoch", b"4")]
    user = [("a", b"1")]
    assert _merge_headers(user, ours) == [("a", b"1"), ("ordered.epoch", b"4")]
    assert user == [("a", b"1")] and ours == [("ordered.epoch", b"4")]
    assert _merge_headers({"a": b"1"}, ours) == [("a", b"1"), ("ordered.epoch", b"4")]
    weird = ("not", "a list")
    assert _merge_headers(weird, ours) is weird
