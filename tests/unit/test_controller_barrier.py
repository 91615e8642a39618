"""The barrier decision of the controller (pure logic; the waiting is tested for real)."""

from __future__ import annotations

from typing import Any

from coordinator.control.controller import (
    EXPIRY_GRACE_S,
    UNKNOWN_DELIVERY_TIMEOUT_MS,
    barrier_status,
)
from coordinator.kernel.store import EpochRecord


def epoch(**over: Any) -> EpochRecord:
    base: dict[str, Any] = {
        "topic": "t",
        "epoch": 1,
        "initial": 2,
        "from_active": 2,
        "to_active": 3,
        "state": "pending",
        "edges": [[0, 2]],
        "boundaries": {2: 0},
        "producers": ["a", "b", "c"],
        "expired": {},
        "created_at": 100.0,
        "sealed_at": None,
        "delivery_timeouts_ms": {"a": 1000, "b": 2000, "c": 3000},
    }
    base.update(over)
    return EpochRecord(**base)


def test_live_producers_without_ack_hold_the_barrier() -> None:
    status = barrier_status(epoch(), acked={"b"}, live={"a", "b", "c"}, now=200.0)
    assert status.waiting == ("a", "c") and not status.passed
    assert status.expired == {} and status.grace_ends == ()


def test_every_ack_passes() -> None:
    assert barrier_status(epoch(), {"a", "b", "c"}, set(), 200.0).passed
    assert barrier_status(epoch(producers=[]), set(), set(), 200.0).passed


def test_a_gone_producer_waits_its_delivery_timeout_plus_grace() -> None:
    first = barrier_status(epoch(), acked={"b", "c"}, live=set(), now=200.0)
    assert first.waiting == ("a",) and first.expired == {"a": 200.0}
    assert first.grace_ends == (200.0 + 1.0 + EXPIRY_GRACE_S,)
    held = epoch(expired=first.expired)
    assert barrier_status(held, {"b", "c"}, set(), 201.9).waiting == ("a",)
    assert barrier_status(held, {"b", "c"}, set(), 202.0).passed


def test_the_clock_survives_a_failover_and_a_reregistration() -> None:
    # Recorded by an earlier controller; the same id registered again since.
    held = epoch(expired={"c": 150.0})
    assert barrier_status(held, {"a", "b"}, live={"c"}, now=153.9).waiting == ("c",)
    assert barrier_status(held, {"a", "b"}, live={"c"}, now=154.0).passed


def test_an_ack_wins_over_expiry() -> None:
    status = barrier_status(epoch(expired={"a": 199.0}), {"a", "b", "c"}, set(), 199.5)
    assert status.passed and status.expired == {"a": 199.0}


def test_unknown_delivery_timeout_assumes_librdkafka_default() -> None:
    status = barrier_status(epoch(producers=["x"], delivery_timeouts_ms={}), set(), set(), now=10.0)
    assert status.grace_ends == (10.0 + UNKNOWN_DELIVERY_TIMEOUT_MS / 1000 + EXPIRY_GRACE_S,)
