"""The stand-ins a conformance scenario runs the real ``OrderedConsumer`` against.

(The run's clock and its ZooKeeper are in :mod:`conformance.fakezk`.)

* :class:`FakeKafka`: the group's broker side (partition logs, log starts, the
  group's committed offsets);
* :class:`FakeClient`: a ``confluent_kafka.Consumer`` stand-in over it (scripted
  fetches, positions, watermarks, ``pause``/``resume``, ``commit``, ``store_offsets``,
  ``assign``, rebalance callbacks run inside the next ``poll``/``consume``).

Records are real ``confluent_kafka.Message`` objects (the consumer's compiled scan reads
their struct). Nothing here knows the consumer's internals.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from confluent_kafka import (
    OFFSET_BEGINNING,
    OFFSET_INVALID,
    KafkaError,
    KafkaException,
    Message,
    TopicPartition,
)

from conformance.fakezk import Clock

Key = tuple[str, int]


@dataclass
class FakeKafka:
    """The broker side: each partition's records, log start and high watermark; the
    group's committed offsets.
    """

    logs: dict[Key, dict[int, Message]] = field(default_factory=dict)
    log_start: dict[Key, int] = field(default_factory=dict)
    high: dict[Key, int] = field(default_factory=dict)
    committed: dict[Key, int] = field(default_factory=dict)

    def add(self, key: Key, offset: int, msg: Message) -> None:
        self.logs.setdefault(key, {})[offset] = msg
        self.high[key] = max(self.high.get(key, 0), offset + 1)

    def watermarks(self, key: Key) -> tuple[int, int]:
        return self.log_start.get(key, 0), self.high.get(key, self.log_start.get(key, 0))


def _error(code: int, text: str) -> KafkaException:
    return KafkaException(KafkaError(code, text))


class FakeClient:
    """A ``confluent_kafka.Consumer`` over :class:`FakeKafka`, recording what it is told.

    Records reach the application's side in the order they were fetched (the
    scenario's ``fetched`` steps), per partition from its fetch position; a paused
    partition's records wait; a seek refetches from the new offset.

    Args:
        kafka: The broker side.
        config: The librdkafka configuration the wrapper passed.
        events: The run's event list (commits are appended to it).
        clock: The run's clock (a ``consume`` with nothing to return waits its timeout).
    """

    def __init__(
        self, kafka: FakeKafka, config: dict[str, Any], events: list[Any], clock: Clock
    ) -> None:
        self.kafka = kafka
        self.config = config
        self.events = events
        self.clock = clock
        self.assigned: list[Key] = []
        self.paused: set[Key] = set()
        self.fetch_pos: dict[Key, int] = {}
        self.app_pos: dict[Key, int] = {}
        self.stored: dict[Key, int] = {}
        self.arrivals: list[tuple[Key, int]] = []
        self.callbacks: dict[str, Any] = {}
        self.rebalances: list[dict[str, Any]] = []
        self.fail_commits = 0
        self.calls = 0  # fetch calls (poll/consume) so far
        self.later: list[tuple[int, Callable[[], None]]] = []  # (at call, what happens)
        self.closed = False
        self.auto_commit = str(config.get("enable.auto.commit", True)).lower() != "false"

    # --- records ---

    def fetched(self, key: Key, offsets: list[int], msgs: list[Message]) -> None:
        """The broker has ``msgs``; an assigned partition fetches them next."""
        for o, m in zip(offsets, msgs, strict=True):
            self.kafka.add(key, o, m)
        if key in self.assigned:
            for o in offsets:
                if o >= self.fetch_pos.get(key, 0):
                    self.arrivals.append((key, o))

    def _refetch(self, key: Key, start: int) -> None:
        self.fetch_pos[key] = start
        self.arrivals = [(k, o) for k, o in self.arrivals if k != key]
        for o in sorted(self.kafka.logs.get(key, {})):
            if o >= start:
                self.arrivals.append((key, o))

    def _start(self, tp: TopicPartition) -> None:
        key = (tp.topic, tp.partition)
        if tp.offset >= 0:
            start = tp.offset
        elif tp.offset == OFFSET_BEGINNING or key not in self.kafka.committed:
            start = self.kafka.log_start.get(key, 0)
        else:
            start = self.kafka.committed[key]
        self.app_pos.pop(key, None)
        self._refetch(key, start)

    def _take(self, num: int) -> list[Message]:
        out: list[Message] = []
        rest: list[tuple[Key, int]] = []
        for i, (key, o) in enumerate(self.arrivals):
            if len(out) >= num:
                rest += self.arrivals[i:]
                break
            if key not in self.assigned or o < self.fetch_pos.get(key, 0):
                continue  # gone (unassigned) or already handed out
            if key in self.paused:
                rest.append((key, o))
                continue
            out.append(self.kafka.logs[key][o])
            self.fetch_pos[key] = o + 1
            self.app_pos[key] = o + 1
        self.arrivals = rest
        return out

    def _rebalance(self) -> None:
        while self.rebalances:
            r = self.rebalances.pop(0)
            kind = r["kind"]
            tps = [TopicPartition(t, p) for t, p in r["partitions"]]
            if kind == "assign":
                cb = self.callbacks.get("on_assign")
                self._incremental_add(tps)
                if cb is not None:
                    cb(self, tps)
            elif kind in ("revoke", "lost"):
                cb = self.callbacks.get("on_revoke" if kind == "revoke" else "on_lost")
                if cb is not None:
                    cb(self, tps)
                if kind == "revoke" and self.auto_commit:
                    self._auto_commit([(tp.topic, tp.partition) for tp in tps])
                self._remove([(tp.topic, tp.partition) for tp in tps])

    def at_call(self, after: int, what: Callable[[], None]) -> None:
        """Run ``what`` inside the fetch call ``after`` calls from now (1: the next)."""
        self.later.append((self.calls + after, what))

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Message]:
        self.calls += 1
        due = [w for at, w in self.later if at <= self.calls]
        self.later = [(at, w) for at, w in self.later if at > self.calls]
        for what in due:
            what()
        self._rebalance()
        out = self._take(num_messages)
        if not out and timeout and timeout > 0:
            self.clock.sleep(min(timeout, 1.0))
        return out

    def poll(self, timeout: float | None = None) -> Message | None:
        got = self.consume(1, -1 if timeout is None else timeout)
        return got[0] if got else None

    # --- positions and offsets ---

    def assignment(self) -> list[TopicPartition]:
        return [TopicPartition(t, p) for t, p in self.assigned]

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        return [
            TopicPartition(
                tp.topic, tp.partition, self.app_pos.get((tp.topic, tp.partition), OFFSET_INVALID)
            )
            for tp in partitions
        ]

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> tuple[int, int]:
        return self.kafka.watermarks((partition.topic, partition.partition))

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> Any:
        return [
            TopicPartition(
                tp.topic,
                tp.partition,
                self.kafka.committed.get((tp.topic, tp.partition), OFFSET_INVALID),
            )
            for tp in partitions
        ]

    def _commit_map(self, offsets: dict[Key, int], how: str) -> list[TopicPartition]:
        if self.fail_commits and how != "auto":
            self.fail_commits -= 1
            self.events.append({"event": "commit_failed", "of": how, "offsets": _triples(offsets)})
            raise _error(KafkaError.REBALANCE_IN_PROGRESS, "rebalance in progress")
        for key, o in offsets.items():
            self.kafka.committed[key] = o
        self.events.append({"event": "commit", "of": how, "offsets": _triples(offsets)})
        return [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]

    def commit(
        self,
        message: Message | None = None,
        offsets: list[TopicPartition] | None = None,
        asynchronous: bool = True,
    ) -> Any:
        how = "offsets"
        chosen: dict[Key, int]
        if message is not None:
            chosen = {_key_of(message): _offset_of(message) + 1}
        elif offsets is not None:
            chosen = {(tp.topic, tp.partition): tp.offset for tp in offsets}
        else:
            how = "stored"
            chosen = {
                k: o
                for k, o in self.stored.items()
                if k in self.assigned and self.kafka.committed.get(k) != o
            }
            if not chosen:
                raise _error(KafkaError._NO_OFFSET, "no offset to commit")
        result = self._commit_map(chosen, how)
        return None if asynchronous else result

    def _auto_commit(self, keys: list[Key] | None = None) -> None:
        chosen = {
            k: o
            for k, o in self.stored.items()
            if (keys is None or k in keys) and self.kafka.committed.get(k) != o
        }
        if chosen:
            self._commit_map(chosen, "auto")

    def auto_commit_now(self) -> None:
        """librdkafka's auto-commit timer firing (commits the stored offsets)."""
        if self.auto_commit:
            self._auto_commit([k for k in self.assigned])

    def store_offsets(
        self, message: Message | None = None, offsets: list[TopicPartition] | None = None
    ) -> None:
        if message is not None:
            topic, partition = _key_of(message)
            offsets = [TopicPartition(topic, partition, _offset_of(message) + 1)]
        for tp in offsets or ():
            key = (tp.topic, tp.partition)
            if key not in self.assigned:
                raise _error(KafkaError._STATE, "store_offsets of an unassigned partition")
            self.stored[key] = tp.offset

    # --- assignment ---

    def subscribe(
        self, topics: list[str], on_assign: Any = None, on_revoke: Any = None, on_lost: Any = None
    ) -> None:
        self.callbacks = {"on_assign": on_assign, "on_revoke": on_revoke, "on_lost": on_lost}

    def unsubscribe(self) -> None:
        self.callbacks = {}

    def _incremental_add(self, tps: list[TopicPartition]) -> None:
        for tp in tps:
            key = (tp.topic, tp.partition)
            if key not in self.assigned:
                self.assigned.append(key)
            self._start(tp)

    def _remove(self, keys: list[Key]) -> None:
        for key in keys:
            if key in self.assigned:
                self.assigned.remove(key)
            self.stored.pop(key, None)
            self.app_pos.pop(key, None)

    def assign(self, partitions: list[TopicPartition]) -> None:
        self._remove(list(self.assigned))
        self._incremental_add(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        self._incremental_add(partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        self._remove([(tp.topic, tp.partition) for tp in partitions])

    def unassign(self) -> None:
        self._remove(list(self.assigned))

    def seek(self, partition: TopicPartition) -> None:
        key = (partition.topic, partition.partition)
        if key not in self.assigned:
            raise _error(KafkaError._STATE, "seek of an unassigned partition")
        offset = partition.offset
        if offset == OFFSET_BEGINNING:
            offset = self.kafka.log_start.get(key, 0)
        self._refetch(key, offset)
        self.app_pos[key] = offset

    def pause(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            self.paused.add((tp.topic, tp.partition))

    def resume(self, partitions: list[TopicPartition]) -> None:
        for tp in partitions:
            key = (tp.topic, tp.partition)
            if key in self.paused:
                self.paused.discard(key)
                # librdkafka drops what it pre-fetched at a pause: refetch from the
                # position (records already handed out are not handed out again).
                self._refetch(key, self.fetch_pos.get(key, 0))

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if self.assigned and self.callbacks.get("on_revoke") is not None:
            self.callbacks["on_revoke"](self, self.assignment())
        if self.auto_commit:
            self._auto_commit(list(self.assigned))
        self._remove(list(self.assigned))

    def memberid(self) -> str:
        return "member-1"


def _key_of(message: Message) -> Key:
    topic, partition = message.topic(), message.partition()
    assert topic is not None and partition is not None
    return topic, partition


def _offset_of(message: Message) -> int:
    offset = message.offset()
    assert offset is not None
    return offset


def _triples(offsets: dict[Key, int]) -> list[list[Any]]:
    return [[t, p, o] for (t, p), o in sorted(offsets.items())]
