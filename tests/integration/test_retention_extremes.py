"""A consumed retention beyond what Kafka's timestamps reach never stops the sweep.

Issue 29: ``ordered retention T --consumed-ms 99999999999999999999999`` was accepted and
the daemon's sweeper thread died with ``OverflowError`` (no retention and no drain trim
ran again for any topic); ``1e16`` logged ``invalid offset`` on every sweep. The command
line refuses both now; a value already stored (written by an older version, or straight
into ZooKeeper) must still leave the sweeper trimming what it can.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore, RetentionRecord
from coordinator.trims.retention import Sweeper


@pytest.mark.parametrize("consumed_ms", [10**23, 10**16, 2**63 - 1])
def test_a_retention_past_1970_trims_nothing_but_the_drain_still_runs(
    topic_factory: Callable[..., str],
    group_factory: Callable[[], str],
    controller: Controller,
    store: LayoutStore,
    bootstrap: str,
    consumed_ms: int,
) -> None:
    topic = topic_factory(1)
    controller.adopt(topic)
    controller.expand(topic, 2, timeout=30)
    plain = Producer({"bootstrap.servers": bootstrap})
    for partition in (0, 1):
        for i in range(4):
            plain.produce(topic, value=b"v", key=f"k{i}", partition=partition)
    assert plain.flush(30) == 0
    controller.shrink(topic, 1, timeout=30)  # retires partition 1 at its end: 4
    group = group_factory()
    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    committer.commit(
        offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 4)], asynchronous=False
    )
    committer.close()
    store.set_retention(
        RetentionRecord(topic=topic, consumed_ms=consumed_ms, updated_at=time.time())
    )

    lines: list[str] = []
    sweeper = Sweeper(store, KafkaAdmin(bootstrap, timeout=10.0), progress=lines.append)
    trims = sweeper.sweep_topic(topic)
    # The drained partition is trimmed to its final offset; retention trims nothing
    # (no record is older than a cut-off before 1970), partition 0 stays at 0.
    assert sorted((t.partition, t.requested) for t in trims) == [(1, 4)]
    assert any("reaches before 1970" in line for line in lines), lines
    assert sweeper.sweep_topic(topic) == []
    assert sum("reaches before 1970" in line for line in lines) == 1  # said once
