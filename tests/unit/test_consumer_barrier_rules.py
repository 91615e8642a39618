"""The consumer barrier's rules without servers: records, the controller's decision, the
consumer's state machine and when it may skip a fetch check (docs/consumer-barrier.md)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

import pytest

from coordinator.control.consumer_barrier import announcement_status
from coordinator.control.transition import NEXT_STEP, Step
from coordinator.kernel.errors import RecordCorruptError, StateTransitionError, UsageError
from coordinator.kernel.history import SessionState
from coordinator.kernel.store import (
    CONSUMER_BARRIER,
    AnnouncementRecord,
    BarrierAck,
    BarrierRegistration,
    FeatureRecord,
    RewindAck,
)
from ordered.cli.features import set_feature
from ordered.consumer.barrier import (
    BARRIER_TRANSITIONS,
    BarrierClient,
    BarrierState,
    check_barrier_transition,
)


def _announcement(**changes: Any) -> AnnouncementRecord:
    fields: dict[str, Any] = {
        "topic": "t",
        "id": "a1",
        "epoch": 3,
        "to_active": 5,
        "announced_at": 100.0,
        "evicted": {},
    }
    fields.update(changes)
    return AnnouncementRecord(**fields)


def test_records_round_trip_and_refuse_what_they_cannot_read() -> None:
    records = [
        FeatureRecord(feature=CONSUMER_BARRIER, enabled=True, changed_at=1.0, changed_by="h:1"),
        _announcement(evicted={"c-1": 5.0}),
        BarrierRegistration(id="c-1", group="", host="h", pid=1, lease_ms=5000, registered_at=1.0),
        BarrierAck(id="c-1", announcement="a1", epoch=3, acked_at=1.0),
        RewindAck(id="c-1", group="g", zxid=7, acked_at=1.0),
    ]
    for record in records:
        assert type(record).from_json(record.to_json(), "/p") == record
        newer = record.to_json().replace(b'"version":1', b'"version":2')
        with pytest.raises(RecordCorruptError, match="version 2"):
            type(record).from_json(newer, "/p")
    with pytest.raises(ValueError, match="unknown feature"):
        FeatureRecord(feature="x", enabled=True, changed_at=1.0, changed_by="h")


def test_the_announce_step_comes_before_the_publish() -> None:
    assert NEXT_STEP[Step.PARTITIONS] is Step.ANNOUNCE
    assert NEXT_STEP[Step.ANNOUNCE] is Step.PUBLISH


def test_announcement_status_waits_for_acks_sessions_and_leases() -> None:
    a = _announcement()  # announced at 100
    # Registered before the announcement, not acked: waited for, not yet evicted.
    status = announcement_status(a, {"c-1": 5.0, "c-2": 5.0}, {"c-2"}, 105.0, 10.0)
    assert status.waiting == ("c-1",) and status.evict == () and not status.passed
    # The bound counts from the announcement (a later run, or another controller, too).
    assert announcement_status(a, {"c-1": 5.0}, set(), 110.0, 10.0).evict == ("c-1",)
    # Evicted: its lease holds the publish until the recorded time, whatever else.
    evicted = _announcement(evicted={"c-1": 116.0})
    status = announcement_status(evicted, {"c-1": 5.0}, set(), 115.0, 10.0)
    assert status.waiting == ("c-1",) and status.lease_until == 116.0 and status.evict == ()
    assert announcement_status(evicted, {}, set(), 116.0, 10.0).passed
    # Gone (no longer registered) or acked: nothing to wait for.
    assert announcement_status(a, {}, set(), 100.0, 10.0).passed
    assert announcement_status(a, {"c-1": 5.0}, {"c-1"}, 100.0, 10.0).passed


def test_barrier_state_transitions() -> None:
    assert set(BARRIER_TRANSITIONS) == set(BarrierState)
    check_barrier_transition(BarrierState.OFF, BarrierState.REGISTERING)
    check_barrier_transition(BarrierState.IN_FORCE, BarrierState.LOST)
    with pytest.raises(StateTransitionError):
        check_barrier_transition(BarrierState.OFF, BarrierState.IN_FORCE)
    with pytest.raises(StateTransitionError):
        check_barrier_transition(BarrierState.LOST, BarrierState.IN_FORCE)


class _Store:
    """A feature store that counts writes."""

    def __init__(self, enabled: bool | None) -> None:
        self.record = (
            None
            if enabled is None
            else FeatureRecord(
                feature=CONSUMER_BARRIER, enabled=enabled, changed_at=1.0, changed_by="x"
            )
        )
        self.writes = 0

    def get_feature(self, feature: str) -> FeatureRecord | None:
        return self.record

    def set_feature(self, record: FeatureRecord) -> None:
        self.writes += 1
        self.record = record


def test_set_feature_is_validated_and_idempotent() -> None:
    store = _Store(None)
    with pytest.raises(UsageError, match="unknown feature"):
        set_feature(store, "nope", True)  # type: ignore[arg-type]
    assert store.writes == 0
    # Absent is off, but "off" is written: a new root's first adoption turns on only a
    # flag that was never written, so the operator's choice must be on record.
    assert set_feature(store, CONSUMER_BARRIER, False)["changed"] is True
    assert set_feature(store, CONSUMER_BARRIER, False)["changed"] is False
    assert set_feature(store, CONSUMER_BARRIER, True)["changed"] is True
    assert set_feature(store, CONSUMER_BARRIER, True)["changed"] is False
    assert store.writes == 2


# --- when the consumer may skip a check ------------------------------------------------


class _Async:
    def __init__(self, value: Any = None, ready: bool = True) -> None:
        self.value = value
        self.is_ready = ready

    def ready(self) -> bool:
        return self.is_ready

    def get(self, timeout: float | None = None) -> Any:
        return self.value

    def rawlink(self, callback: Any) -> None:
        pass


class _Client:
    """Enough of kazoo for the barrier's watches and its lease renewal."""

    def __init__(self) -> None:
        self.member = _Async(object())  # the member node's stat (None: evicted)
        self.sent = 0

    def add_listener(self, listener: Any) -> None:
        pass

    def remove_listener(self, listener: Any) -> None:
        pass

    def exists_async(self, path: str, watch: Any = None) -> _Async:
        if "/members/" in path:
            self.sent += 1
            return self.member
        return _Async(None)

    def get_async(self, path: str, watch: Any = None) -> _Async:
        return _Async(None)

    def sync_async(self, path: str) -> _Async:
        self.sent += 1
        return _Async()


class _FakeStore:
    root = "/r"

    def __init__(self) -> None:
        self.client = _Client()


class _Watcher:
    state = SessionState.CONNECTED
    generation = 1
    marked = False


@dataclass
class _Record:
    epoch: int


@dataclass
class _View:
    record: Any
    ordered: bool = True


def _in_force() -> tuple[BarrierClient, _Watcher, _FakeStore]:
    store, watcher = _FakeStore(), _Watcher()
    barrier = BarrierClient(store, watcher, "g", 10.0, lambda topic, zxid: None)  # type: ignore[arg-type]
    barrier.flag = True
    barrier._set(BarrierState.REGISTERING)
    barrier._generation = watcher.generation
    barrier._registered = {"t"}
    barrier.registered(time.monotonic())
    assert barrier.state is BarrierState.IN_FORCE
    return barrier, watcher, store


def test_relies_only_while_every_condition_holds() -> None:
    views = {"t": _View(_Record(2))}
    barrier, watcher, _store = _in_force()
    assert barrier.relies(views)
    barrier.flag = False
    assert not barrier.relies(views)  # the flag turned off
    barrier.flag = True
    watcher.marked = True
    assert not barrier.relies(views)  # a topic waits to be read again
    watcher.marked = False
    watcher.state = SessionState.SUSPENDED
    assert not barrier.relies(views)
    watcher.state = SessionState.CONNECTED
    watcher.generation = 2
    assert not barrier.relies(views)  # registered in another session
    watcher.generation = 1
    assert not barrier.relies({**views, "u": _View(None)})  # a topic not registered
    assert barrier.relies(views)


def test_an_announced_epoch_stops_the_reliance_until_it_is_in_the_copy() -> None:
    barrier, _watcher, _store = _in_force()
    barrier._note_announcement("t", _announcement(topic="t", epoch=3))
    assert not barrier.relies({"t": _View(_Record(2))})
    assert barrier.relies({"t": _View(_Record(3))})
    assert barrier._announced == {}  # resolved, so forgotten


def test_the_lease_runs_out_and_an_eviction_is_found() -> None:
    views = {"t": _View(_Record(2))}
    barrier, _watcher, store = _in_force()
    barrier._lease_until = time.monotonic() - 0.1  # ran out
    assert not barrier.relies(views)
    assert store.client.sent == 2  # sync + exists of the member node
    assert barrier.relies(views)  # the answer found it: renewed
    barrier._lease_until = time.monotonic() - 0.1
    store.client.member = _Async(None)  # evicted meanwhile
    assert not barrier.relies(views)
    assert not barrier.relies(views)
    assert barrier.state is BarrierState.LOST
