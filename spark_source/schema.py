"""Spark's Kafka schema, as a Spark ``StructType`` and as the Arrow schema reads return.

The columns, types and nullability are those of Spark's ``KafkaRecordToRowConverter``:
every field nullable, ``timestamp`` a Spark ``TimestampType`` (Arrow: microseconds, UTC),
``timestampType`` Java's ``TimestampType.id`` (0 CreateTime, 1 LogAppendTime).
"""

from __future__ import annotations

from typing import Any

__all__ = ["arrow_schema", "kafka_schema"]


def kafka_schema(include_headers: bool) -> Any:
    """Spark's Kafka source schema (``headers`` only when asked)."""
    from pyspark.sql.types import (
        ArrayType,
        BinaryType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        StructType,
        TimestampType,
    )

    fields = [
        StructField("key", BinaryType()),
        StructField("value", BinaryType()),
        StructField("topic", StringType()),
        StructField("partition", IntegerType()),
        StructField("offset", LongType()),
        StructField("timestamp", TimestampType()),
        StructField("timestampType", IntegerType()),
    ]
    if include_headers:
        header = StructType([StructField("key", StringType()), StructField("value", BinaryType())])
        fields.append(StructField("headers", ArrayType(header)))
    return StructType(fields)


def arrow_schema(include_headers: bool) -> Any:
    """The Arrow schema Spark expects of a ``read`` that yields record batches.

    Built by PySpark's own conversion, so it is the one Spark checks against.
    """
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(kafka_schema(include_headers), timezone="UTC")
