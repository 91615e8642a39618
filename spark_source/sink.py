"""The ``ordered-kafka`` sink: Spark's Kafka sink columns, written through ``OrderedProducer``.

Spark's own Kafka sink routes keys with murmur2 over the current partition count, which
scatters a key over several partitions when the topic grows. This sink writes through
:class:`ordered.producer.OrderedProducer`, so an adopted topic gets its layout's
partition for every key; a plain topic is written as confluent-kafka writes it.

Columns, as Spark's Kafka sink takes them: ``value`` (required, binary or string),
``key`` (binary or string), ``topic`` (string; the ``topic`` option overrides it),
``partition`` (int, explicit partition) and ``headers`` (array of ``key``/``value``
structs). Each task flushes before it reports success; the first delivery error fails
the task with the Kafka error named.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from pyspark.sql.datasource import (
    DataSourceArrowWriter,
    DataSourceStreamArrowWriter,
    WriterCommitMessage,
)

from coordinator.errors import ConfigError, OrderedKafkaError
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


def _column(batch: Any, name: str) -> list[Any] | None:
    names = [n.lower() for n in batch.schema.names]
    if name not in names:
        return None
    values: list[Any] = batch.column(names.index(name)).to_pylist()
    return values


def write_batches(options: SinkOptions, batches: Iterator[Any]) -> int:
    """Write Arrow record batches through one ``OrderedProducer``; flush; count.

    Raises:
        OrderedKafkaError: A record was not delivered (the first Kafka error, named).
    """
    failures: list[Any] = []

    def on_delivery(err: Any, _msg: Any) -> None:
        if err is not None and not failures:
            failures.append(err)

    producer = OrderedProducer(dict(options.producer), on_delivery=on_delivery)
    written = 0
    try:
        for batch in batches:
            n = batch.num_rows
            values = _column(batch, "value") or [None] * n
            keys = _column(batch, "key") or [None] * n
            topics = [options.topic] * n if options.topic else (_column(batch, "topic") or [])
            partitions = _column(batch, "partition") or [None] * n
            headers = _column(batch, "headers") or [None] * n
            for i in range(n):
                topic = topics[i]
                if topic is None:
                    raise ConfigError(
                        "null topic present in the data. Use the topic option for setting a "
                        "default topic."
                    )
                partition = partitions[i]
                head = headers[i]
                record_headers = [(h["key"], h["value"]) for h in head] if head else None
                while True:
                    try:
                        producer.produce(
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
                    break
            written += n
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
    finally:
        producer.close()
    return written


class OrderedKafkaBatchWriter(DataSourceArrowWriter):
    """``df.write.format("ordered-kafka")``: one producer per task, flushed before success."""

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
