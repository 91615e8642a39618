"""HistoryWatcher against the real ZooKeeper: one-shot watches re-armed by the owner."""

from __future__ import annotations

import threading
from collections.abc import Callable

import pytest
from helpers import wait_until

from coordinator.controller import Controller
from coordinator.history import HistoryWatcher, load_history
from coordinator.store import LayoutStore

pytestmark = pytest.mark.integration


def test_every_change_marks_the_topic_and_reads_happen_on_the_owner_thread(
    topic_factory: Callable[..., str], controller: Controller, store: LayoutStore
) -> None:
    topic = topic_factory(2)
    controller.adopt(topic)
    pokes: list[str] = []
    watcher = HistoryWatcher(store, on_change=lambda: pokes.append(threading.current_thread().name))
    try:
        watcher.watch(topic)
        assert watcher.take_dirty() == {topic}  # starts out dirty
        assert watcher.take_dirty() == set()
        assert load_history(store, topic).latest_epoch == 0
        controller.expand(topic, 3)  # publish, then seal: two writes of the topic znode
        dirty: set[str] = set()
        wait_until(lambda: dirty.update(watcher.take_dirty()) or dirty, what="first change")
        assert dirty == {topic}
        assert load_history(store, topic).latest_epoch == 1
        # Re-armed by take_dirty: the next change is seen too.
        controller.shrink(topic, 2)
        dirty.clear()
        wait_until(lambda: dirty.update(watcher.take_dirty()) or dirty, what="second change")
        assert dirty == {topic}
        assert load_history(store, topic).latest_epoch == 2
        assert pokes and threading.main_thread().name not in pokes  # kazoo's thread
    finally:
        watcher.stop()
