"""The asyncio clients against the real cluster: order through 2 -> 3 -> 4 -> 2 -> 4 with a
group of two (one joining late), judged by the verify checker, with the event loop's lag
probed all along; the async serializing pair routed by the serialized key; the loop's
worst lag through an expansion (barrier switch and gate wait) beside confluent's own
asyncio clients on the same schedule."""

from __future__ import annotations

import asyncio
import json
import random
import statistics
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaException
from confluent_kafka.aio import AIOConsumer, AIOProducer
from confluent_kafka.serialization import (
    MessageField,
    SerializationContext,
    StringDeserializer,
    StringSerializer,
)
from fixtures import consumer_config
from kit import Kit

from ordered import (
    OrderedAIOConsumer,
    OrderedAIOProducer,
    OrderedAsyncDeserializingConsumer,
    OrderedAsyncSerializingProducer,
    OrderedProducer,
)
from ordered.verify import HistoryWriter, check, read_events
from ordered.verify.loop_lag import LoopLagProbe
from ordered.verify.producer import decode_value, encode_value

# The event loop's lag is bounded: it runs alone, not beside the parallel workers' load.
pytestmark = [pytest.mark.integration, pytest.mark.serial, pytest.mark.timeout(240)]

KEYS = [f"k{i}" for i in range(20)]
STAGE = 1000
"""Records per layout: 5 layouts (2, 3, 4, 2, 4 partitions), 5000 in all."""

LAG_BOUND_S = 0.5
"""The loop's longest lag the test accepts: a gate wait or a barrier switch on the loop
would hold it for seconds; a loaded 2-core CI machine, for tens of milliseconds."""

LAG_ROUNDS = 3
LAG_RECORDS = 40_000
LAG_FLOOR_S = 0.05
LAG_FACTOR = 1.5
"""Beside confluent's asyncio clients on the same schedule, ours may lag at most
``max(LAG_FLOOR_S, LAG_FACTOR * theirs)``, compared on the median of the rounds' worst
lags: one round's spike on a loaded 2-core machine (70 ms against 42 ms, seen once) is
the machine's, not a blocking call, which holds the loop for the whole wait in every
round and fails :data:`LAG_BOUND_S` in each."""


class Member:
    """One asyncio group member recording its deliveries and commits as a verify reader."""

    def __init__(self, config: dict[str, Any], group: str, name: str, history: Path) -> None:
        self.config, self.group, self.name = config, group, name
        self.history = HistoryWriter(history / f"{name}.jsonl")
        self.pass_no = 0
        self.delivered = 0
        self.key_calls: list[tuple[str, int]] = []  # (callback, loop thread?) in call order
        self.stop = False

    def _pass(self, why: str, partitions: list[Any]) -> None:
        self.pass_no += 1
        event: dict[str, Any] = {"ev": "pass", "g": self.group, "r": self.name}
        event.update(n=self.pass_no, why=why, parts=sorted(tp.partition for tp in partitions))
        self.history.write(event)

    async def run(self, topic: str) -> None:
        member = self
        loop_thread = threading.get_ident()

        class Listener:
            async def on_partition_key_maybe_revoked(self, partitions: list[Any]) -> None:
                await asyncio.sleep(0.01)  # a coroutine that really yields to the loop
                member.key_calls.append(("revoked", threading.get_ident() == loop_thread))

            async def on_partition_key_assigned(self, partitions: list[Any]) -> None:
                member.key_calls.append(("assigned", threading.get_ident() == loop_thread))

        async def on_assign(consumer: Any, partitions: list[Any]) -> None:
            assert consumer is aio
            member._pass("assign", partitions)

        async def on_revoke(consumer: Any, partitions: list[Any]) -> None:
            member._pass("revoke", partitions)

        aio = OrderedAIOConsumer(self.config)
        try:
            await aio.subscribe(
                [topic], on_assign=on_assign, on_revoke=on_revoke, key_listener=Listener()
            )
            while not self.stop:
                await self._one_batch(aio)
            committed = await aio.committed(await aio.assignment(), timeout=10)
            for tp in committed or ():
                if tp.error is None and tp.offset >= 0:
                    self._commit_event(tp.topic, tp.partition, tp.offset, "read")
        finally:
            await aio.close()
            self.history.close()

    async def _one_batch(self, aio: OrderedAIOConsumer) -> None:
        msgs = await aio.consume(500, 0.2)
        now = time.monotonic_ns()
        for msg in msgs:
            found = None if msg.error() is not None else decode_value(msg.value())
            if found is None:
                continue
            event: dict[str, Any] = {"ev": "dlv", "g": self.group, "r": self.name}
            event.update(n=self.pass_no, p=found[0], k=msg.key().decode(), s=found[1])
            event.update(tp=msg.partition(), o=msg.offset(), e=-1, ts=now)
            self.history.add(event)
            self.delivered += 1
        self.history.flush()  # recorded before committed, as the verify reader does
        if msgs:
            try:
                result = await aio.commit(asynchronous=False)
            except KafkaException:
                return  # a rebalance in between: the next batch commits it
            for tp in result or ():
                if tp.error is None:
                    self._commit_event(tp.topic, tp.partition, tp.offset, "commit")
            self.history.flush()

    def _commit_event(self, topic: str, partition: int, offset: int, why: str) -> None:
        event: dict[str, Any] = {"ev": "cmt", "g": self.group, "r": self.name, "t": topic}
        event.update(tp=partition, o=offset, why=why)
        self.history.add(event)


async def _produce_stage(
    producer: OrderedAIOProducer, topic: str, first: int, rng: random.Random
) -> list[tuple[int, str, asyncio.Future[Any]]]:
    sent = []
    for seq in range(first, first + STAGE):
        key = rng.choice(KEYS)
        future = await producer.produce(topic, value=encode_value("p1", seq), key=key.encode())
        sent.append((seq, key, future))
        if seq % 100 == 0:
            await asyncio.sleep(0.005)  # a paced producer: the members read as it writes
    return sent


def test_aio_group_keeps_order_through_2_3_4_2_4_with_a_late_member(
    kit: Kit, tmp_path: Path
) -> None:
    topic = kit.adopted_topic(2)
    group = "aio-" + topic
    history = tmp_path / "history"
    config = consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group)
    changes = [("expand", 3), ("expand", 4), ("shrink", 2), ("expand", 4)]

    async def scenario() -> tuple[list[Member], float, int]:
        probe = LoopLagProbe()
        probe.start()
        loop = asyncio.get_running_loop()
        producer = OrderedAIOProducer(
            {
                "bootstrap.servers": kit.bootstrap,
                "ordered.zookeeper.connect": kit.zk_hosts,
                "ordered.zookeeper.root": kit.zk_root,
                "linger.ms": 2,
            }
        )
        acks = HistoryWriter(history / "p1.jsonl")
        first, second = Member(config, group, "r1", history), Member(config, group, "r2", history)
        members = [first, second]
        tasks = [loop.create_task(first.run(topic))]
        rng = random.Random(7)
        sent = await _produce_stage(producer, topic, 0, rng)
        for i, (change, to) in enumerate(changes):
            await loop.run_in_executor(None, getattr(kit.controller, change), topic, to)
            if change == "shrink":  # the second member joins late, in mid-stream
                tasks.append(loop.create_task(second.run(topic)))
            sent += await _produce_stage(producer, topic, (i + 1) * STAGE, rng)
        await producer.flush()
        for seq, key, future in sent:
            msg = await future
            event: dict[str, Any] = {"ev": "ack", "p": "p1", "k": key, "s": seq}
            acks.add(event | {"tp": msg.partition(), "o": msg.offset()})
        acks.close()
        await producer.close()
        deadline = time.monotonic() + 120
        while sum(m.delivered for m in members) < len(sent) and time.monotonic() < deadline:
            await asyncio.sleep(0.2)
        await asyncio.sleep(1.0)  # redeliveries of a rebalance, if any, come now
        for member in members:
            member.stop = True
        await asyncio.gather(*tasks)
        await probe.stop()
        return members, probe.worst, probe.samples

    members, worst, samples = asyncio.run(scenario())
    events = list(read_events(sorted(history.iterdir())))
    verdict = check(events)
    dlv = [e for e in events if e["ev"] == "dlv"]
    assert verdict.records == 5 * STAGE
    assert verdict.lost_count == 0, verdict.to_dict()["lost"][:5]
    assert verdict.violation_count == 0, [str(v) for v in verdict.violations[:5]]
    assert verdict.holds, verdict.to_dict()
    assert {e["tp"] for e in dlv} == {0, 1, 2, 3}
    assert {e["r"] for e in dlv} == {"r1", "r2"}  # the late member took part
    calls = [c for m in members for c in m.key_calls]
    assert {name for name, _ in calls} == {"revoked", "assigned"}
    assert all(on_loop for _, on_loop in calls)  # the coroutines ran on the loop
    assert samples > 100
    assert worst < LAG_BOUND_S, f"the event loop was held {worst * 1000:.0f} ms"


def _json(obj: Any, ctx: SerializationContext) -> bytes:
    return json.dumps(obj).encode()


def _unjson(data: bytes, ctx: SerializationContext) -> Any:
    return json.loads(data)


def test_async_serializing_pair_routes_by_serialized_key_through_an_expansion(
    kit: Kit,
) -> None:
    topic = kit.adopted_topic(2)
    group = "aio-serde-" + topic
    settings = {
        "bootstrap.servers": kit.bootstrap,
        "ordered.zookeeper.connect": kit.zk_hosts,
        "ordered.zookeeper.root": kit.zk_root,
        "linger.ms": 2,
    }
    keys = [f"customer-{i}" for i in range(30)]
    per_stage = 600

    async def scenario() -> tuple[list[Any], list[Any]]:
        loop = asyncio.get_running_loop()
        producer = await OrderedAsyncSerializingProducer(
            {**settings, "key.serializer": StringSerializer("utf_16"), "value.serializer": _json}
        )
        futures = []
        for stage in range(2):
            for i in range(per_stage):
                n = stage * per_stage + i
                futures.append(
                    await producer.produce(topic, key=keys[n % 30], value={"n": n // 30})
                )
            if stage == 0:
                await loop.run_in_executor(None, kit.controller.expand, topic, 3)
        await producer.flush()
        acked = [await f for f in futures]
        await producer.close()
        consumer = await OrderedAsyncDeserializingConsumer(
            {
                **consumer_config(kit.bootstrap, kit.zk_hosts, kit.zk_root, group),
                "key.deserializer": StringDeserializer("utf_16"),
                "value.deserializer": _unjson,
            }
        )
        got: list[Any] = []
        try:
            await consumer.subscribe([topic])
            deadline = time.monotonic() + 60
            while len(got) < len(acked) and time.monotonic() < deadline:
                got += [m for m in await consumer.consume(500, 0.5) if m.error() is None]
        finally:
            await consumer.close()
        return acked, got

    acked, got = asyncio.run(scenario())
    with OrderedProducer(dict(settings)) as plain:
        plain.produce(topic, b"warm", b"warm")  # its first use of the topic loads the layout
        plain.flush(30)
        route = plain.layout(topic)
    assert route is not None and route.active == 3
    raw = {
        k: StringSerializer("utf_16")(k, SerializationContext(topic, MessageField.KEY))
        for k in keys
    }
    late = acked[per_stage:]  # written under the 3-partition layout
    assert {m.key(): m.partition() for m in late} == {
        raw[k]: route.partition_for(raw[k]) for k in keys
    }
    assert len({m.partition() for m in late}) == 3
    assert len(got) == len(acked)
    last: dict[str, int] = {}
    for msg in got:
        key, n = msg.key(), msg.value()["n"]
        assert isinstance(key, str) and n > last.get(key, -1), (key, n, last.get(key))
        last[key] = n
    assert last == {k: 2 * per_stage // 30 - 1 for k in keys}


async def _lag_round(kit: Kit, ours: bool) -> tuple[float, int, dict[str, Any]]:
    """One producer and one consumer through an expansion 2 -> 3, the loop probed.

    The producer writes half the records, goes on writing while the topic is expanded
    (ours: through the barrier's switch) and after it; the consumer joins once the new
    partition has records and the old ones a backlog, so the new one waits at its gate
    until their tails are read (ours), while the producer writes the rest. Returns the
    worst lag (s), the probe's samples and, for ours, what the sync clients saw.
    """
    loop = asyncio.get_running_loop()
    topic = await loop.run_in_executor(None, kit.adopted_topic, 2)
    settings: dict[str, Any] = {"bootstrap.servers": kit.bootstrap}
    if ours:
        settings["ordered.zookeeper.connect"] = kit.zk_hosts
        settings["ordered.zookeeper.root"] = kit.zk_root
    group = {"group.id": f"lag-{ours}-{topic}", "auto.offset.reset": "earliest"}
    probe = LoopLagProbe()
    probe.start()
    producer: Any = (OrderedAIOProducer if ours else AIOProducer)({**settings, "linger.ms": 5})
    consumer: Any = (OrderedAIOConsumer if ours else AIOConsumer)({**settings, **group})
    got = 0

    async def write(first: int, count: int) -> None:
        for i in range(first, first + count):
            await producer.produce(topic, value=b"v" * 100, key=KEYS[i % len(KEYS)].encode())

    async def read() -> None:
        nonlocal got
        await consumer.subscribe([topic])
        deadline = time.monotonic() + 60
        while got < LAG_RECORDS and time.monotonic() < deadline:
            got += sum(1 for m in await consumer.consume(500, 0.2) if m.error() is None)

    half, eighth = LAG_RECORDS // 2, LAG_RECORDS // 8
    await write(0, half)
    await producer.flush()
    expanding = loop.run_in_executor(None, kit.controller.expand, topic, 3)
    await write(half, eighth)
    await expanding
    await write(half + eighth, eighth)
    await producer.flush()
    reading = loop.create_task(read())
    await write(half + 2 * eighth, LAG_RECORDS - half - 2 * eighth)
    await producer.flush()
    await reading
    seen: dict[str, Any] = {"read": got}
    if ours:
        seen["blocks"] = consumer.consumer.metrics["blocks"]
        route = await loop.run_in_executor(None, producer.producer.layout, topic)
        seen["producer_partitions"] = None if route is None else route.active
    await consumer.close()
    await producer.close()
    await probe.stop()
    return probe.worst, probe.samples, seen


def test_loop_lag_beside_confluents_async_clients(
    kit: Kit, record_property: Any, capsys: pytest.CaptureFixture[str]
) -> None:
    worst: dict[bool, list[float]] = {True: [], False: []}
    seen: list[dict[str, Any]] = []

    async def rounds() -> None:
        for r in range(LAG_ROUNDS):
            for ours in (True, False) if r % 2 == 0 else (False, True):
                lag, samples, facts = await _lag_round(kit, ours)
                assert samples >= 10 and facts["read"] == LAG_RECORDS, (ours, samples, facts)
                worst[ours].append(lag)
                if ours:
                    seen.append(facts)

    asyncio.run(rounds())
    ours_ms, theirs_ms = max(worst[True]) * 1000, max(worst[False]) * 1000
    typical_ours_ms = statistics.median(worst[True]) * 1000
    bound_ms = max(LAG_FLOOR_S * 1000, LAG_FACTOR * statistics.median(worst[False]) * 1000)
    record_property("loop_lag_max_ms_ours", round(ours_ms, 1))
    record_property("loop_lag_max_ms_confluent", round(theirs_ms, 1))
    with capsys.disabled():
        print(
            f"\nevent loop's worst lag: ours {ours_ms:.1f} ms "
            f"{[round(x * 1000, 1) for x in worst[True]]}, confluent's {theirs_ms:.1f} ms "
            f"{[round(x * 1000, 1) for x in worst[False]]}; ours' median "
            f"{typical_ours_ms:.1f} ms, bound {bound_ms:.1f} ms"
        )
    # The schedule went through what could block the loop: the producer's switch to the
    # new layout, and the new partition's gate.
    assert all(f["producer_partitions"] == 3 for f in seen), seen
    assert sum(f["blocks"] for f in seen) >= 1, seen
    assert max(worst[True]) < LAG_BOUND_S, worst  # no round blocked the loop on a wait
    assert typical_ours_ms <= bound_ms, (worst, bound_ms)
