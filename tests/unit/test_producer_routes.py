"""RouteTable: topic records -> states, routes, switches and the compiled path's table."""

from __future__ import annotations

from coordinator.kernel.store import TopicRecord
from linear_hash import Layout
from ordered.producer.routes import RouteTable, TopicState
from ordered.producer.tracking import DrainTracker


def record(active: int, epoch: int, pending: int | None = None, **extra: object) -> TopicRecord:
    fields: dict[str, object] = {
        "topic": "t",
        "initial": 2,
        "active": active,
        "epoch": epoch,
        "pending": pending,
        "physical": active,
        "algorithm": "murmur3",
        "ordered": True,
        "compacted": False,
        "adopted_at": 1.0,
    }
    fields.update(extra)
    return TopicRecord(**fields)  # type: ignore[arg-type]


def entry(active: int) -> tuple[int, int]:
    return (2, active)


def fast(table: RouteTable) -> dict[str, tuple[int, int] | None]:
    """The fast table with each router shown as its ``(initial, active)``."""
    return {t: None if r is None else (r.initial, r.active) for t, r in table.fast.items()}


def test_routing_publishes_a_fast_entry_and_a_switch_empties_the_table() -> None:
    tracker = DrainTracker()
    table = RouteTable(tracker, None)
    info = table.info("t")
    plain = table.info("p")
    assert table.apply(plain, None, usable=True) == []
    assert table.apply(info, record(2, 0), usable=True) == []
    assert info.state is TopicState.ROUTING
    assert fast(table) == {"t": entry(2), "p": None}

    acks = table.apply(info, record(3, 1, pending=1), usable=True)
    assert acks == [] and info.state is TopicState.SWITCHING and tracker.tracking
    assert table.fast == {}  # every send is tracked, so none may skip the lock
    assert table.routes["t"].layout == Layout(2, 3, 1)

    done = table.drained(queue_len=0, idle_only=True)
    assert [(a.topic, a.epoch) for a in done] == [("t", 1)]
    assert info.state is TopicState.ROUTING and 1 in info.acked
    assert table.fast == {}  # until the owner stops tracking and re-enables it
    tracker.stop()
    table.enable_fast(True)
    assert fast(table) == {"t": entry(3), "p": None}


def test_header_compaction_and_other_hashes_have_no_fast_entry() -> None:
    for header, extra in (("ordered.epoch", {}), (None, {"algorithm": "murmur2"})):
        table = RouteTable(DrainTracker(), header)
        table.apply(table.info("t"), record(2, 0, **extra), usable=True)
        assert table.fast == {}
    table = RouteTable(DrainTracker(), None)
    table.apply(table.info("t"), record(3, 1, compacted=True), usable=True)
    assert table.fast == {}


def test_first_use_during_a_pending_epoch_acks_at_once_and_suspension() -> None:
    table = RouteTable(DrainTracker(), None)
    info = table.info("t")
    acks = table.apply(info, record(3, 1, pending=1), usable=True)
    assert [(a.epoch, a.last_offsets) for a in acks] == [(1, {})]
    assert info.state is TopicState.ROUTING and not table.tracker.tracking
    table.enable_fast(False)
    table.suspend_all()
    assert info.state is TopicState.SUSPENDED and not table.routes["t"].routable
    assert table.fast == {}
    # Back: the re-read record routes again, the fast entry returns once allowed.
    table.apply(info, record(3, 1), usable=True)
    table.enable_fast(True)
    assert info.state is TopicState.ROUTING and fast(table) == {"t": entry(3)}


def test_a_late_older_record_is_stale() -> None:
    table = RouteTable(DrainTracker(), None)
    info = table.info("t")
    table.apply(info, record(3, 1), usable=True)
    assert table.is_stale(info, record(3, 1, pending=1))  # pending is older than sealed
    assert table.is_stale(info, record(2, 0))
    assert not table.is_stale(info, record(4, 2, pending=2))
