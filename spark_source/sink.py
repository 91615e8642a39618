"""The ``ordered-kafka`` sink: Spark's Kafka sink columns, written through ``OrderedProducer``.

Spark's own Kafka sink routes keys with murmur2 over the current partition count, which
scatters a key over several partitions when the topic grows. This sink writes through
:class:`ordered.producer.OrderedProducer`, so an adopted topic gets its layout's
partition for every key; a plain topic is written as confluent-kafka writes it.

Columns, as Spark's Kafka sink takes them: ``value`` (required, binary or string),
``key`` (binary or string), ``topic`` (string; the ``topic`` option overrides it),
``partition`` (int, explicit partition) and ``headers`` (array of ``key``/``value``
structs). Each task flushes before it reports success; the first delivery error fails
the task with the Kafka error named. A Python worker keeps its producer for its next
task (as Spark's Kafka sink caches its producers per executor).
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from itertools import repeat
from operator import length_hint
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from coordinator.kernel.errors import ConfigError, OrderedKafkaError
from ordered.producer import OrderedProducer
from spark_source.options import SinkOptions

__all__ = ["OrderedKafkaBatchWriter", "OrderedKafkaStreamWriter", "SinkCommit", "write_batches"]


@dataclass
class SinkCommit(WriterCommitMessage):
    """What one task wrote."""

    records: int


def _check_schema(options: SinkOptions, schema: Any) -> None:
    """Spark's checks of the sink's input columns, on the driver before any task runs."""
    from pyspark.sql.types import ArrayType, BinaryType, IntegerType, StringType, StructType

    fields = {f.name.lower(): f.dataType for f in schema.fields}
    if "value" not in fields:
        raise ConfigError("Required attribute 'value' not found")
    for name in ("key", "value"):
        if name in fields and not isinstance(fields[name], StringType | BinaryType):
            raise ConfigError(
                f"{name} attribute type must be a string or binary, got "
                f"{fields[name].simpleString()}"
            )
    if options.topic is None:
        if "topic" not in fields:
            raise ConfigError(
                "topic option required when no 'topic' attribute is present. Use the topic "
                "option for setting a topic."
            )
        if not isinstance(fields["topic"], StringType):
            raise ConfigError(f"Topic type must be a string, got {fields['topic'].simpleString()}")
    if "partition" in fields and not isinstance(fields["partition"], IntegerType):
        raise ConfigError(
            f"partition attribute type must be an int, got {fields['partition'].simpleString()}"
        )
    if "headers" in fields:
        kind = fields["headers"]
        ok = (
            isinstance(kind, ArrayType)
            and isinstance(kind.elementType, StructType)
            and [f.name for f in kind.elementType.fields] == ["key", "value"]
        )
        if not ok:
            raise ConfigError(
                "headers attribute type must be array<struct<key:string,value:binary>>, got "
                f"{kind.simpleString()}"
            )


def _column(batch: Any, name: str, as_bytes: bool = False) -> list[Any] | None:
    """The values of column ``name`` (any case) of an Arrow batch, or ``None`` without it.

    With ``as_bytes`` a string column comes as ``bytes`` (a zero-copy view of the
    same buffers: the UTF-8 bytes Kafka gets either way, as Spark's Kafka sink casts a
    string key or value to binary): no ``str`` is decoded only for confluent-kafka to
    encode it again (about 0.03 us per row for a key and a value).
    """
    names = [n.lower() for n in batch.schema.names]
    if name not in names:
        return None
    column = batch.column(names.index(name))
    if as_bytes:
        binary = _BINARY_OF.get(str(column.type))
        if binary is not None:
            import pyarrow as pa

            column = column.view(getattr(pa, binary)())
    values: list[Any] = column.to_pylist()
    return values


_BINARY_OF = {"string": "binary", "large_string": "large_binary"}
"""Arrow string types and the binary type with the same layout (a view converts)."""


class _Pooled:
    """A Python worker's producer for one configuration, and the current task's errors.

    A Python worker runs one task at a time, so the failures of the task now writing
    are the ones the delivery reports append to (reset when a task borrows it).
    """

    def __init__(self, config: Mapping[str, str]) -> None:
        self.failures: list[Any] = []
        self.used = time.monotonic()
        # The sink needs failures only: ``delivery.report.only.error`` (whatever the
        # user set: the callback is the sink's own). With ``ordered.switch.mode=pause``
        # (unless the user chose track) the producer leaves that filter to confluent,
        # which drops a success before building its ``Message``: about 0.4 us of CPU
        # less per row than the emulation track mode needs. The price, a
        # ``BufferError`` while an expansion or shrink drains this producer's older
        # records, is what the send loops below already wait out (poll and retry).
        settings = {**config, "delivery.report.only.error": "true"}
        settings.setdefault("ordered.switch.mode", "pause")
        self.producer = OrderedProducer(settings, on_delivery=self._on_delivery)

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None and not self.failures:
            self.failures.append(err)


_POOL_LOCK = threading.Lock()
_POOL: dict[tuple[tuple[str, str], ...], _Pooled] = {}
_IDLE_S = 600.0
"""A pooled producer unused this long is closed (Spark's producer cache: 10 minutes)."""


def _borrow(config: Mapping[str, str]) -> tuple[tuple[tuple[str, str], ...], _Pooled]:
    """The worker's producer for ``config`` (created on first use), taken from the pool.

    Spark's Kafka sink keeps its producers in a per-executor cache; this keeps one
    ``OrderedProducer`` (with its ZooKeeper session and layout watches) per Python
    worker and configuration, so a task does not pay for a new session and metadata.
    """
    key = tuple(sorted((str(k), str(v)) for k, v in config.items()))
    now = time.monotonic()
    stale: list[_Pooled] = []
    with _POOL_LOCK:
        pooled = _POOL.pop(key, None)
        for other_key, other in list(_POOL.items()):
            if now - other.used > _IDLE_S:
                stale.append(_POOL.pop(other_key))
    for old in stale:
        old.producer.close()
    if pooled is None:
        pooled = _Pooled(config)
    pooled.failures.clear()
    return key, pooled


def _give_back(key: tuple[tuple[str, str], ...], pooled: _Pooled) -> None:
    pooled.used = time.monotonic()
    with _POOL_LOCK:
        previous = _POOL.pop(key, None)
        _POOL[key] = pooled
    if previous is not None:  # another thread of this worker pooled one meanwhile
        previous.producer.close()


_CHUNK = 1024
"""Rows per C-level loop: about 1 ms of holding the GIL (other threads run between)."""


def _produce_pairs(
    producer: OrderedProducer, failures: list[Any], topic: str, values: list[Any], keys: list[Any]
) -> None:
    """Queue ``produce(topic, value, key)`` for every pair, in order, each exactly once.

    Three positional arguments take the compiled send path when it is built; ``map``
    drained by a ``deque`` calls it from C, without a Python loop per row (about
    0.06 us of CPU less per row). When librdkafka's queue is full the row whose
    ``produce`` raised ``BufferError`` is the last one ``map`` took from the list
    iterators, so its index is ``len - 1 - length_hint(remaining)``: it is retried
    after ``poll`` until queued, then the loop goes on with the rows after it.
    Delivery reports (and so ``failures``) are served only by ``poll``/``flush`` on
    this thread: checking after each ``poll`` and chunk sees every failure the
    row-by-row loop would see.
    """
    produce = producer.produce
    n = len(values)
    if len(keys) != n:
        raise ValueError(f"{n} values but {len(keys)} keys")
    remaining_values, remaining_keys = iter(values), iter(keys)
    while length_hint(remaining_values):
        try:
            # repeat() runs out first, so map takes at most _CHUNK rows from the lists.
            deque(map(produce, repeat(topic, _CHUNK), remaining_values, remaining_keys), 0)
        except BufferError:
            row = n - 1 - length_hint(remaining_values)
            while True:
                producer.poll(0.05)
                try:
                    produce(topic, values[row], keys[row])
                    break
                except BufferError:
                    continue
        if failures:
            return


def _produce_rows(
    producer: OrderedProducer,
    failures: list[Any],
    options: SinkOptions,
    batch: Any,
) -> None:
    """Queue one Arrow batch's rows (the compiled path for ``topic, value, key`` rows)."""
    n = batch.num_rows
    values = _column(batch, "value", as_bytes=True) or [None] * n
    keys = _column(batch, "key", as_bytes=True) or [None] * n
    partitions = _column(batch, "partition")
    headers = _column(batch, "headers")
    topics = None if options.topic else _column(batch, "topic")
    if topics is not None and None in topics:
        raise ConfigError(
            "null topic present in the data. Use the topic option for setting a default topic."
        )
    produce = producer.produce
    if topics is None and partitions is None and headers is None:
        topic = options.topic
        assert topic is not None
        _produce_pairs(producer, failures, topic, values, keys)
        return
    for i in range(n):
        topic = options.topic or topics[i]  # type: ignore[index]
        partition = partitions[i] if partitions is not None else None
        head = headers[i] if headers is not None else None
        record_headers = [(h["key"], h["value"]) for h in head] if head else None
        while True:
            try:
                produce(
                    topic,
                    values[i],
                    keys[i],
                    -1 if partition is None else partition,
                    headers=record_headers,
                )
                break
            except BufferError:
                producer.poll(0.05)
        if failures:
            return


def write_batches(options: SinkOptions, batches: Iterator[Any]) -> int:
    """Write Arrow record batches through the worker's ``OrderedProducer``; flush; count.

    The producer stays open for the worker's next task of the same configuration; a
    task that fails closes it instead.

    Raises:
        OrderedKafkaError: A record was not delivered (the first Kafka error, named).
    """
    key, pooled = _borrow(options.producer)
    producer, failures = pooled.producer, pooled.failures
    written = 0
    healthy = False
    try:
        for batch in batches:
            _produce_rows(producer, failures, options, batch)
            written += batch.num_rows
            producer.poll(0)
            if failures:
                break
        left = producer.flush()
        if failures:
            err = failures[0]
            raise OrderedKafkaError(
                f"ordered-kafka sink: a record was not delivered: {err.name()}: {err.str()}",
                err,
            )
        if left:
            raise OrderedKafkaError(f"ordered-kafka sink: {left} records not delivered at flush")
        healthy = True
    finally:
        if healthy:
            _give_back(key, pooled)
        else:
            producer.close()
    return written


class OrderedKafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("ordered-kafka")``: the worker's producer, flushed before success."""

    def __init__(self, options: SinkOptions, schema: Any) -> None:
        _check_schema(options, schema)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        """Write this task's rows; flush; fail the task on any delivery error."""
        return SinkCommit(write_batches(self.options, iterator))


class OrderedKafkaStreamWriter(DataSourceStreamArrowWriter):
    """``df.writeStream.format("ordered-kafka")``: each micro-batch as the batch writer."""

    def __init__(self, options: SinkOptions, schema: Any) -> None:
        _check_schema(options, schema)
        self.options = options

    def write(self, iterator: Iterator[Any]) -> SinkCommit:
        """Write this task's rows; flush; fail the task on any delivery error."""
        return SinkCommit(write_batches(self.options, iterator))

    def commit(self, messages: list[Any], batchId: int) -> None:
        """Nothing to commit: every task flushed before it succeeded."""

    def abort(self, messages: list[Any], batchId: int) -> None:
        """Nothing to undo (Kafka has no rollback without transactions, as Spark's sink)."""
