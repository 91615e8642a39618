"""OrderedProducer against the real Kafka and ZooKeeper: the switch barrier (acks, tracking,
only-error reports, pause mode, first use mid-transition).
"""

from __future__ import annotations

import time
from typing import Any

import pytest
from confluent_kafka import KafkaError
from fixtures import consume_all, producer_record, run_in_background
from helpers import wait_until
from kit import Kit
from producer_helpers import header, produce_keys, writing_meanwhile

from coordinator.kernel.store import LayoutStore
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.zk import close_client
from linear_hash import Layout, partition_for
from ordered import (
    SwitchDrainingError,
    TopicState,
)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_switch_acks_and_tracks(kit: Kit) -> None:
    """A producer that keeps writing acks each epoch; an idle one acks from the watcher."""
    topic = kit.adopted_topic(4)
    busy = kit.make_producer()
    idle = kit.make_producer()
    idle.produce(topic, b"once", key="x")
    assert idle.flush(10) == 0

    def write(i: int) -> None:
        busy.produce(topic, b"v", key=f"k{i % 500}")

    with writing_meanwhile(busy, write, backoff=0.01):
        time.sleep(0.3)
        result = kit.controller.expand(topic, 8, timeout=20)
        assert set(result.producers) == {busy.producer_id, idle.producer_id}
        assert result.expired == {}
        acks = kit.store.acks(topic, result.epoch)
        assert set(acks) == {busy.producer_id, idle.producer_id}
        # Where known (a new-epoch record was delivered before the drain ended), the
        # last old-epoch offsets lie below the sealed boundaries.
        assert all(o < result.boundaries[p] for p, o in acks[busy.producer_id].last_offsets.items())
        assert busy.layout(topic) is not None and busy.layout(topic).active == 8
    assert busy.flush(10) == 0
    wait_until(lambda: busy.topic_state(topic) is TopicState.ROUTING, timeout=5)


def test_close_acks_at_once(kit: Kit) -> None:
    """A producer registered but closed before a transition does not hold the barrier."""
    topic = kit.adopted_topic(2)
    producer = kit.make_producer()
    producer.produce(topic, b"v", key="k")
    assert producer.close() is True
    assert producer.close() is True  # idempotent
    node = store_paths.producer_path(kit.zk_root, topic, producer.producer_id)
    assert kit.store.client.exists(node) is None
    started = time.monotonic()
    kit.controller.expand(topic, 3, timeout=20)
    assert time.monotonic() - started < 5


def test_only_error_reports_are_emulated_and_do_not_stall_the_barrier(kit: Kit) -> None:
    """librdkafka would hide successful reports from the tracking callbacks too."""
    topic = kit.adopted_topic(2)
    global_reports: list[Any] = []
    own_reports: list[Any] = []
    producer = kit.make_producer(
        **{
            "delivery.report.only.error": True,
            "on_delivery": lambda err, msg: global_reports.append(err),
        }
    )

    def write(i: int) -> None:
        producer.produce(topic, b"v", key=f"k{i % 50}")
        producer.produce(
            topic, b"w", key=f"k{i % 50}", on_delivery=lambda e, m: own_reports.append(e)
        )

    with writing_meanwhile(producer, write, pause=0.0005):
        time.sleep(0.2)
        result = kit.controller.expand(topic, 3, timeout=20)
        assert result.expired == {}
        assert producer.producer_id in result.producers
    assert producer.flush(10) == 0
    # Only failures would have been reported: there were none.
    assert global_reports == [] and own_reports == []
    # ... while every tracked record's report reached the barrier's bookkeeping (with
    # librdkafka filtering, successes would never be counted and the drain would be
    # judged on wrong counts).
    assert producer._tracker.total == 0
    # A failure is still reported, to the per-record callback.
    producer.produce(
        topic, b"x", key="k", partition=1, on_delivery=lambda e, m: own_reports.append(e)
    )
    producer.purge()
    producer.flush(10)
    assert len(own_reports) == 1 and own_reports[0] is not None


def test_pause_mode_refuses_records_until_the_switch_drains_and_tracks_none(kit: Kit) -> None:
    """``ordered.switch.mode=pause``: a BufferError until the older records are delivered.

    confluent's own ``delivery.report.only.error`` drops every success report, tracked
    ones too: a tracked record would never be counted done and the switch never acked
    (the expansion below would time out).
    """
    topic = kit.adopted_topic(2)
    reports: list[Any] = []
    producer = kit.make_producer(
        **{
            "delivery.report.only.error": True,
            "ordered.switch.mode": "pause",
            "on_delivery": lambda err, msg: reports.append(err),
            # The records wait 5 s in librdkafka's queue, so the expansion surely finds
            # them pending: delivered before it came, the switch would close at once.
            "linger.ms": 5000,
        }
    )
    for i in range(200):
        producer.produce(topic, b"old", key=f"k{i}")
    # A topic's first records are held while its topic id is checked in the background;
    # the producer registers (and so takes part in the barrier) once that is done.
    wait_until(
        lambda: producer.topic_state(topic) is TopicState.ROUTING,
        what="the producer to register for the topic",
    )
    # Not polled: the reports of these records stay unserved, so they are pending
    # (len > 0) when the producer switches.
    assert len(producer) > 0
    expansion = run_in_background(kit.controller.expand, topic, 3, timeout=30)
    wait_until(
        lambda: producer.topic_state(topic) is TopicState.SWITCHING,
        what="the producer to switch to the pending epoch",
    )
    with pytest.raises(SwitchDrainingError, match="poll\\(\\) and retry") as raised:
        producer.produce(topic, b"new", key="k1")
    assert isinstance(raised.value, BufferError)
    assert len(producer) > 0 and producer._tracker.total == 0

    # The usual retry loop: poll serves the reports, the drain ends, the record goes.
    def produced() -> bool:
        try:
            producer.produce(topic, b"new", key="k1")
        except BufferError:
            producer.poll(0.05)
            return False
        return True

    wait_until(produced, 20, what="the switch to drain", interval=0)
    result = expansion.join(30)
    assert result.expired == {} and producer.producer_id in result.producers
    assert producer.flush(10) == 0
    assert producer._tracker.total == 0 and not producer._tracker.tracking
    assert reports == []  # only failures are reported: there were none
    layout = producer.layout(topic)
    assert layout is not None and layout.active == 3


@pytest.mark.parametrize(
    ("compiled", "mode"),
    [(True, "track"), (False, "track"), (True, "pause")],
    ids=["compiled", "python", "pause"],
)
def test_only_error_default_callback_gets_every_failure_and_no_success(
    kit: Kit, monkeypatch: pytest.MonkeyPatch, compiled: bool, mode: str
) -> None:
    """Untracked records: the default callback sees each failure once, never a success.

    Track mode emulates the setting (the compiled or the Python filter); pause mode
    leaves it to confluent.
    """
    import ordered.producer.send as producer_module
    from ordered.producer.tracking import OnlyError

    if compiled and not producer_module.COMPILED:
        pytest.skip("the compiled send path is not built")
    if compiled:
        assert producer_module._ONLY_ERROR is not OnlyError
    else:
        monkeypatch.setattr(producer_module, "_ONLY_ERROR", OnlyError)
    topic = kit.adopted_topic(2)
    reports: list[Any] = []
    producer = kit.make_producer(
        **{
            "delivery.report.only.error": True,
            # The two records purged below must still be queued when purge() runs: with
            # the default 5 ms a descheduled test thread lets them go out first.
            "linger.ms": 2000,
            "ordered.switch.mode": mode,
            "on_delivery": lambda err, msg: reports.append((err, msg.value())),
        }
    )
    assert producer._emulate is (mode == "track")
    for i in range(500):
        producer.produce(topic, b"ok", f"k{i}")
    assert producer.flush(20) == 0
    assert reports == []
    assert not producer._tracker.tracking  # untracked: the default callback alone reports
    producer.produce(topic, b"purged-1", "k1")
    producer.produce(topic, b"purged-2", "k2")
    producer.purge()
    producer.flush(10)
    assert sorted(value for _, value in reports) == [b"purged-1", b"purged-2"]
    assert all(err.code() == KafkaError._PURGE_QUEUE for err, _ in reports)


def test_first_use_during_a_pending_epoch(kit: Kit) -> None:
    """A producer that first sees a topic mid-transition routes by the pending epoch and
    acks it at once (it has nothing older in flight)."""
    topic = kit.adopted_topic(2)
    # Another process's producer that never acks: the barrier waits for it.
    other = kit.kazoo_factory()
    try:
        LayoutStore(other, kit.zk_root).register_producer(
            topic, producer_record("stuck", 1000, host="h", client_id="")
        )
        expand = run_in_background(kit.controller.expand, topic, 3, timeout=30)
        wait_until(lambda: (t := kit.store.get_topic(topic)) is not None and t.pending == 1)
        producer = kit.make_producer(**{"ordered.epoch.header": True})
        produce_keys(producer, topic, "mid")
        assert producer.layout(topic) == Layout(2, 3, 1)
        assert producer.topic_state(topic) is TopicState.ROUTING
        wait_until(lambda: producer.producer_id in kit.store.acks(topic, 1), timeout=10)
    finally:
        close_client(other)
    expand.join(30)
    assert kit.store.get_epoch(topic, 1).sealed
    for msg in consume_all(kit.bootstrap, topic, timeout=20):
        assert header(msg) == b"1"
        assert msg.partition() == partition_for(msg.key(), 2, 3)
