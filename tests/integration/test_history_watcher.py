"""HistoryWatcher against the real ZooKeeper: one-shot watches re-armed by the owner."""

from __future__ import annotations

import socket
import threading
import time

import pytest
from fixtures import producer_record
from helpers import wait_until
from kit import Kit

from coordinator.control.controller import BarrierTimeoutError
from coordinator.kernel.history import HistoryWatcher, load_history
from coordinator.kernel.store import AckRecord, LayoutStore

pytestmark = pytest.mark.integration


def test_every_change_marks_the_topic_and_reads_happen_on_the_owner_thread(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    pokes: list[str] = []
    watcher = HistoryWatcher(
        kit.store, on_change=lambda: pokes.append(threading.current_thread().name)
    )
    try:
        watcher.watch(topic)
        assert watcher.take_dirty() == {topic}  # starts out dirty
        assert watcher.take_dirty() == set()
        assert load_history(kit.store, topic).latest_epoch == 0
        kit.controller.expand(topic, 3)  # publish, then seal: two writes of the topic znode
        dirty: set[str] = set()
        wait_until(lambda: dirty.update(watcher.take_dirty()) or dirty, what="first change")
        assert dirty == {topic}
        assert load_history(kit.store, topic).latest_epoch == 1
        # Re-armed by take_dirty: the next change is seen too.
        kit.controller.shrink(topic, 2)
        dirty.clear()
        wait_until(lambda: dirty.update(watcher.take_dirty()) or dirty, what="second change")
        assert dirty == {topic}
        assert load_history(kit.store, topic).latest_epoch == 2
        assert pokes and threading.main_thread().name not in pokes  # kazoo's thread
    finally:
        watcher.stop()


class _CountedReads:
    """Counts the epoch znodes a store reads (``get_async`` under ``/epochs/``)."""

    def __init__(self, store: LayoutStore) -> None:
        self.paths: list[str] = []
        client = store.client
        real = client.get_async

        def get_async(path: str, *args: object, **kwargs: object) -> object:
            if "/epochs/" in path:
                self.paths.append(path)
            return real(path, *args, **kwargs)

        client.get_async = get_async  # type: ignore[method-assign]
        self._undo = lambda: setattr(client, "get_async", real)

    def close(self) -> None:
        self._undo()


def test_a_reload_reads_only_the_epochs_it_does_not_hold_sealed(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    kit.controller.expand(topic, 3)
    kit.controller.expand(topic, 4)
    kit.controller.shrink(topic, 3)
    before = load_history(kit.store, topic)
    assert before.latest_epoch == 3 and before.pending is None
    counted = _CountedReads(kit.store)
    try:
        kit.controller.expand(topic, 4)
        counted.paths.clear()
        after = load_history(kit.store, topic, previous=before)
        # Only the new epoch was read; the four sealed ones came from `before`.
        assert [p.rsplit("/", 1)[1] for p in counted.paths] == [f"{4:010d}"]
        assert after == load_history(kit.store, topic)  # the same as a full read
        # A re-adoption numbers its epochs after the old ones, which are gone: nothing
        # held is reused for them.
        kit.controller.adopt(topic, algorithm="murmur2", replace_existing=True)
        replaced = load_history(kit.store, topic, previous=after)
        assert replaced == load_history(kit.store, topic)
        assert [e.epoch for e in replaced.epochs] == [5]
    finally:
        counted.close()


def test_a_held_pending_epoch_is_read_again(kit: Kit) -> None:
    topic = kit.adopted_topic(2)
    producer_store = LayoutStore(kit.kazoo_factory(), kit.store.root)
    producer_store.register_producer(topic, producer_record("p-slow", host=socket.gethostname()))
    with pytest.raises(BarrierTimeoutError):
        kit.controller.expand(topic, 3, timeout=0.5)
    pending = load_history(kit.store, topic)
    assert pending.pending is not None and pending.pending.epoch == 1
    producer_store.ack(
        topic, 1, AckRecord(id="p-slow", epoch=1, last_offsets={0: 0}, acked_at=time.time())
    )
    assert kit.controller.resume(topic, timeout=10) is not None
    sealed = load_history(kit.store, topic, previous=pending)
    # The epoch held while pending changed (sealed, with its boundaries): read again.
    assert sealed.pending is None and sealed.epochs[-1].sealed
    assert sealed == load_history(kit.store, topic)
