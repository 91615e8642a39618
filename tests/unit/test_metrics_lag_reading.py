"""A ``/metrics`` scrape never waits for the lag reading, which asks Kafka about every group.

On a cluster of 1,500 groups that reading took longer than a scraper's timeout, and a
scrape that waited for it timed out with it. Here Kafka's group listing blocks until the
test lets it go: scrapes must answer meanwhile, start one reading only, and serve its
result once it is done.
"""

from __future__ import annotations

import threading
from types import SimpleNamespace
from typing import Any

from coordinator.metrics.daemon_metrics import StateCollector


class _BlockedAdmin:
    """Kafka's group listing answers only when ``release`` is set."""

    def __init__(self) -> None:
        self.release = threading.Event()
        self.listings = 0

    def list_groups(self) -> list[Any]:
        self.listings += 1
        assert self.release.wait(10), "never released"
        return []


def _scrape(state: StateCollector) -> bool:
    """Collect once in a thread; whether it answered within 2 s."""
    done = threading.Event()

    def collect() -> None:
        list(state.collect())
        done.set()

    threading.Thread(target=collect, daemon=True).start()
    return done.wait(2.0)


def test_a_scrape_serves_the_last_lag_reading_and_reads_the_next_in_the_background() -> None:
    admin = _BlockedAdmin()
    store = SimpleNamespace(client=SimpleNamespace(connected=False))  # no topic state read
    state = StateCollector(store, admin, lambda: True)  # type: ignore[arg-type]
    assert _scrape(state), "the scrape waited for Kafka's group listing"
    assert _scrape(state), "the second scrape waited for Kafka's group listing"
    assert admin.listings == 1, "each scrape started its own reading"
    reader = state._lag_reader
    assert reader is not None
    admin.release.set()
    reader.join(5)
    assert not reader.is_alive()
    assert state._lag_at > 0, "the finished reading was not kept"
