"""The executor side: read one offset range of one partition into Arrow record batches.

A task reads exactly ``[start, end)`` with ``assign`` (no group membership, no commits):
records at or past ``end`` that librdkafka fetched ahead are dropped, never returned.
Batches of at most ``chunk`` records are yielded as they arrive, so memory stays bounded
whatever the range. The consumer is created on first use in the Python worker and kept
for the next task of the same source settings (Spark reuses its Python workers), as
Spark keeps its Kafka consumers in a per-executor pool.
"""

from __future__ import annotations

import logging
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator, Mapping
from functools import partial
from operator import is_, itemgetter
from typing import Any, cast

from confluent_kafka import Consumer, KafkaError, KafkaException, Message, TopicPartition

from coordinator.kernel import identity
from coordinator.kernel.errors import DataLossError, OrderedKafkaError
from spark_source.planner import OffsetRange

__all__ = ["consumer_settings", "read_range"]

_POOL_LOCK = threading.Lock()
_POOL: dict[tuple[tuple[str, str], ...], list[_Pooled]] = {}

_LOSS_CODES = frozenset({KafkaError._AUTO_OFFSET_RESET, KafkaError.OFFSET_OUT_OF_RANGE})
_UNKNOWN = frozenset(
    {
        KafkaError._UNKNOWN_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.LEADER_NOT_AVAILABLE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
    }
)


# librdkafka's log lines (``%3|...``) go to this logger (quiet unless configured), not
# to the task's stderr.
_rdkafka_log = logging.getLogger("spark_source.rdkafka")
_rdkafka_log.addHandler(logging.NullHandler())


def consumer_settings(kafka: Mapping[str, str], group_prefix: str = "") -> dict[str, str]:
    """librdkafka settings of an executor's consumer, from the ``kafka.*`` options.

    Spark's rules: offsets are never committed and never reset automatically (a missing
    offset is data loss, decided by ``failOnDataLoss``); the group id is generated unless
    ``kafka.group.id`` is given (it is only a name: ``assign`` never joins the group).
    """
    settings = dict(kafka)
    settings.setdefault(
        "group.id",
        f"{group_prefix or 'spark-kafka-source'}-ordered-{identity.random_token(32)}-executor",
    )
    settings["enable.auto.commit"] = "false"
    settings["enable.auto.offset.store"] = "false"
    settings["auto.offset.reset"] = "error"
    settings["enable.partition.eof"] = "true"
    settings.setdefault("isolation.level", "read_uncommitted")
    return settings


def _key(settings: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    # The generated group id differs per reader copy but changes nothing for assign.
    return tuple(sorted((k, v) for k, v in settings.items() if k != "group.id"))


class _Pooled:
    """A consumer and the partitions its metadata is known to hold."""

    def __init__(self, consumer: Any) -> None:
        self.consumer = consumer
        self.known: set[tuple[str, int]] = set()

    def learn(self, topic: str, partition: int, timeout_s: float) -> None:
        """Refresh the metadata of ``topic`` unless ``partition`` is known.

        librdkafka fetches from a partition only once its metadata lists it, and it
        refreshes metadata every 5 minutes by default: a partition created since the
        last refresh would be waited for that long.
        """
        if (topic, partition) in self.known:
            return
        deadline = time.monotonic() + timeout_s
        while True:
            metadata = self.consumer.list_topics(topic, timeout=min(10.0, timeout_s))
            info = metadata.topics.get(topic)
            if info is not None and info.error is None:
                self.known.update((topic, p) for p in info.partitions)
            if (topic, partition) in self.known:
                return
            if time.monotonic() > deadline:
                raise OrderedKafkaError(f"Kafka's metadata does not list {topic}-{partition}")
            time.sleep(0.1)


def _borrow(settings: Mapping[str, str]) -> _Pooled:
    key = _key(settings)
    with _POOL_LOCK:
        free = _POOL.get(key)
        if free:
            return free.pop()
    conf: dict[str, Any] = dict(settings)
    conf["logger"] = _rdkafka_log
    return _Pooled(Consumer(conf))


def _give_back(settings: Mapping[str, str], pooled: _Pooled) -> None:
    try:
        pooled.consumer.unassign()
    except Exception:
        pooled.consumer.close()
        return
    with _POOL_LOCK:
        _POOL.setdefault(_key(settings), []).append(pooled)


def _log_start(consumer: Any, topic: str, partition: int, timeout_s: float) -> int:
    """The partition's log start offset, asking again while its metadata is unknown.

    A pooled consumer learns of a partition created since its last metadata refresh
    only when asked (librdkafka refreshes every 5 minutes by default).
    """
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            low, _high = consumer.get_watermark_offsets(
                TopicPartition(topic, partition), timeout=timeout_s
            )
            return int(low)
        except KafkaException as exc:
            error = exc.args[0] if exc.args else None
            code = error.code() if isinstance(error, KafkaError) else None
            if code not in _UNKNOWN or time.monotonic() > deadline:
                raise OrderedKafkaError(
                    f"cannot read the log start offset of {topic}-{partition}: {exc}", error
                ) from exc
            consumer.list_topics(topic, timeout=min(10.0, timeout_s))
            time.sleep(0.05)


# Unbound C methods: ``map`` over them runs the per-record calls without Python bytecode.
_ERROR: Callable[[Any], Any] = Message.error
_KEY: Callable[[Any], Any] = Message.key
_VALUE: Callable[[Any], Any] = Message.value
_OFFSET = cast(Callable[[Any], int], Message.offset)
_TIMESTAMP: Callable[[Any], tuple[int, int]] = Message.timestamp
_IS_NONE = partial(is_, None)
_TYPE = itemgetter(0)
_MILLIS = itemgetter(1)


def _arrow_batch(
    messages: list[Any], offsets: list[int], topic: str, partition: int, schema: Any
) -> Any:
    """One Arrow batch of Spark's Kafka schema; every per-record step is a C-level map."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(messages)
    stamps = list(map(_TIMESTAMP, messages))
    millis = pa.array(list(map(_MILLIS, stamps)), pa.int64())
    kinds = pa.array(list(map(_TYPE, stamps)), pa.int32())
    arrays = [
        pa.array(list(map(_KEY, messages)), pa.binary()),
        pa.array(list(map(_VALUE, messages)), pa.binary()),
        pa.repeat(pa.scalar(topic, pa.string()), n),
        pa.repeat(pa.scalar(partition, pa.int32()), n),
        pa.array(offsets, pa.int64()),
        pc.multiply(millis, 1000).cast(pa.timestamp("us", tz="UTC")),
        # confluent: 1 CreateTime, 2 LogAppendTime, 0 none; Spark (Java's ids): 0, 1, -1.
        pc.subtract(kinds, pa.scalar(1, pa.int32())),
    ]
    if len(schema) == 8:
        headers = [m.headers() for m in messages]
        arrays.append(
            pa.array(
                [[{"key": k, "value": v} for k, v in h] if h else None for h in headers],
                schema.field("headers").type,
            )
        )
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


def _clean(messages: list[Any]) -> tuple[list[Any], Any] | None:
    """``(records, trailing EOF or None)`` when no other event is among ``messages``.

    The common case, checked without a Python-level loop; ``None`` sends the chunk to
    the per-message path.
    """
    errors = list(map(_ERROR, messages))
    # By identity: ``KafkaError == None`` raises, so ``errors.count(None)`` cannot be used.
    bad = len(errors) - sum(map(_IS_NONE, errors))
    if bad == 0:
        return messages, None
    last = errors[-1]
    if bad == 1 and last is not None and last.code() == KafkaError._PARTITION_EOF:
        return messages[:-1], messages[-1]
    return None


def read_range(
    kafka: Mapping[str, str],
    part: OffsetRange,
    *,
    fail_on_data_loss: bool,
    schema: Any,
    chunk: int = 10_000,
    poll_timeout_s: float = 120.0,
) -> Iterator[Any]:
    """Yield ``pyarrow.RecordBatch``es of the records of ``part``, in offset order.

    Args:
        kafka: The consumer settings (:func:`consumer_settings`).
        part: The range to read; records at or past ``part.end`` are never returned.
        fail_on_data_loss: Raise when records of the range are gone from Kafka;
            otherwise skip to the first record still there.
        schema: The Arrow schema to produce (:func:`spark_source.schema.arrow_schema`).
        chunk: Most records per batch.
        poll_timeout_s: How long to wait for the next record before failing
            (``kafkaConsumer.pollTimeoutMs``).

    Raises:
        DataLossError: Records of the range are gone and ``fail_on_data_loss``.
        OrderedKafkaError: Kafka reported an error, or no record came in time.
    """
    if part.end <= part.start:
        return
    topic, partition = part.topic, part.partition
    pooled = _borrow(kafka)
    consumer = pooled.consumer
    healthy = False
    try:
        pooled.learn(topic, partition, poll_timeout_s)
        pos = part.start
        # No up-front log start request: with ``auto.offset.reset=error`` a start below
        # the log start comes back as an error event, handled below like any loss.
        consumer.assign([TopicPartition(topic, partition, pos)])
        idle_since = time.monotonic()
        while pos < part.end:
            messages = consumer.consume(min(chunk, part.end - pos), timeout=1.0)
            if not messages:
                if time.monotonic() - idle_since > poll_timeout_s:
                    raise OrderedKafkaError(
                        f"no record of {topic}-{partition} at offset {pos} (the range ends at "
                        f"{part.end}) within {poll_timeout_s:g} s (kafkaConsumer.pollTimeoutMs)"
                    )
                continue
            idle_since = time.monotonic()
            clean = _clean(messages)
            if clean is not None:
                records, eof = clean
                offsets = list(map(_OFFSET, records))
                done = False
                if offsets and offsets[-1] >= part.end:
                    cut = bisect_left(offsets, part.end)
                    records, offsets, done = records[:cut], offsets[:cut], True
                if offsets:
                    pos = offsets[-1] + 1
                    yield _arrow_batch(records, offsets, topic, partition, schema)
                # At the end of the log: whatever is missing up to ``end`` is a gap
                # (transaction markers, compaction), not data to wait for.
                if done or (eof is not None and eof.offset() >= part.end):
                    break
                continue
            good: list[Any] = []
            done = False
            for m in messages:
                err = m.error()
                if err is not None:
                    code = err.code()
                    if code == KafkaError._PARTITION_EOF:
                        if m.offset() >= part.end:
                            done = True
                            break
                        continue
                    if code in _LOSS_CODES:
                        low = _log_start(consumer, topic, partition, poll_timeout_s)
                        if fail_on_data_loss:
                            raise DataLossError(
                                topic, partition, pos, f"the log now starts at {low}"
                            )
                        pos = max(pos, low)
                        consumer.assign([TopicPartition(topic, partition, pos)])
                        break
                    raise OrderedKafkaError(
                        f"reading {topic}-{partition} at offset {pos}: {err.str()}", err
                    )
                offset = m.offset()
                if offset >= part.end:
                    done = True
                    break
                good.append(m)
                pos = offset + 1
            if good:
                yield _arrow_batch(good, list(map(_OFFSET, good)), topic, partition, schema)
            if done:
                break
        healthy = True
    finally:
        if healthy:
            _give_back(kafka, pooled)
        else:
            consumer.close()
