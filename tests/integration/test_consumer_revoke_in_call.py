"""A revocation inside a ``consume()`` call takes the revoked partitions' records out of it.

librdkafka runs the rebalance callbacks inside the wrapper's ``consume()``, which may
have judged records of the revoked partitions earlier in the same call. The
application's ``on_revoke`` commits what it has processed, without those records (it
does not have them yet), and the member assigned each partition next reads them again
from that commit. Returned after the revocation, they were processed twice: the chaos
run of seed 2029 found 14 input records written twice by its exactly-once stage (one
transaction on each side of the rebalance a partition-count change started).

Here one member sits in a long ``consume()`` call over a backlog while a second member
joins: no record may reach the group twice. Without the withdrawal
(``Fetcher.withdraw``) the first member's call returned the backlog it held at the
revocation, and the group delivered those records again after the rebalance.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from typing import Any

import pytest
from confluent_kafka import Producer, TopicPartition
from fixtures import consumer_config
from kit import Kit

from ordered.consumer import OrderedConsumer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

PER_PARTITION = 200


def test_records_of_a_partition_revoked_inside_consume_are_not_returned(kit: Kit) -> None:
    topic = kit.topic_factory(2)
    producer = Producer({"bootstrap.servers": kit.bootstrap, "linger.ms": 5})
    for partition in (0, 1):
        for i in range(PER_PARTITION):
            producer.produce(topic, key=f"k{i}", value=f"{partition}:{i}", partition=partition)
    assert producer.flush(30) == 0
    group = kit.group_factory()
    config = consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group)
    delivered: list[tuple[str, int, int]] = []  # (member, partition, offset)
    processed: dict[str, dict[int, int]] = {"a": {}, "b": {}}  # next offset, per partition
    revoked_in_call = threading.Event()
    in_call = threading.Event()

    def on_revoke(member: str, consumer: OrderedConsumer, partitions: list[Any]) -> None:
        # As the exactly-once pipeline: commit what was processed, at the revocation.
        if in_call.is_set():
            revoked_in_call.set()
        done = [
            TopicPartition(topic, tp.partition, processed[member][tp.partition])
            for tp in partitions
            if tp.partition in processed[member]
        ]
        if done:
            consumer.commit(offsets=done, asynchronous=False)

    def take(member: str, records: list[Any]) -> None:
        for m in records:
            assert m.error() is None, m.error()
            delivered.append((member, m.partition(), m.offset()))
            processed[member][m.partition()] = m.offset() + 1

    first = OrderedConsumer(config)
    second = OrderedConsumer(config)
    try:
        first.subscribe([topic], on_revoke=lambda c, p: on_revoke("a", c, p))
        deadline = time.monotonic() + 30
        while not first.assignment() and time.monotonic() < deadline:
            take("a", first.consume(1, 0.2))  # joins the group: one record
        assert first.assignment(), "the first member was never assigned"

        def join() -> None:
            time.sleep(2.0)  # the first member is inside its long call by now
            second.subscribe([topic], on_revoke=lambda c, p: on_revoke("b", c, p))
            end = time.monotonic() + 25
            while time.monotonic() < end:
                take("b", second.consume(500, 0.5))

        joiner = threading.Thread(target=join, daemon=True)
        joiner.start()
        # One long call: the backlog is judged at once, the second member joins while
        # the call waits for more, and the revocation runs in there.
        in_call.set()
        take("a", first.consume(100_000, 20.0))
        in_call.clear()
        end = time.monotonic() + 8
        while time.monotonic() < end:
            take("a", first.consume(500, 0.5))
        joiner.join(40)
    finally:
        for member in (first, second):
            member.close()  # its on_revoke commits in there
    assert revoked_in_call.is_set(), "the revocation did not come inside the long call"
    counts = Counter((partition, offset) for _member, partition, offset in delivered)
    twice = sorted(place for place, n in counts.items() if n > 1)
    assert not twice, f"{len(twice)} records delivered twice, e.g. {twice[:5]}"
    assert len(counts) == 2 * PER_PARTITION
