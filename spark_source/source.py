"""The ``ordered-kafka`` data source: a streaming reader with gates, a batch reader, sinks.

Streaming (``spark.readStream.format("ordered-kafka")``): at every trigger the driver

1. lists the partitions the options name and reads Kafka's end offsets (FIRST),
2. then reads each topic's layout history after a ZooKeeper ``sync``, so any record
   below an end offset was written before the layout was read and its epoch is known,
3. reads the log start offsets, checks for data loss as Spark's Kafka source does,
4. caps every partition of an adopted topic at its first closed gate
   (:func:`spark_source.planner.gate_caps`; ``start``, the end of the last logged batch,
   is the group's progress), then applies the read limit to what is left.

A topic that is not adopted (or without ``ordered.zookeeper.connect``) gets no caps:
it is read exactly as Spark's Kafka source reads it. Executors read each range with
``assign`` (:mod:`spark_source.reader`).

Within one micro-batch every key's records come from one partition, so ordering a
batch by ``(partition, offset)`` orders every key; across batches a key's records come
in producer order.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    DataSourceStreamReader,
    DataSourceStreamWriter,
    DataSourceWriter,
    InputPartition,
)
from pyspark.sql.streaming.datasource import (
    ReadAllAvailable,
    ReadLimit,
    ReadMaxRows,
    ReadMinRows,
    SupportsTriggerAvailableNow,
)

from coordinator.kernel.errors import ConfigError, DataLossError
from spark_source.offsets import Offsets, from_spark, to_spark
from spark_source.options import (
    EARLIEST,
    LATEST,
    SourceOptions,
    parse_sink_options,
    parse_source_options,
)
from spark_source.planner import (
    OffsetRange,
    available_now_target,
    backlog,
    gate_caps,
    offset_ranges,
    rate_limit,
)
from spark_source.progress import GateClock, batch_progress
from spark_source.reader import consumer_settings, read_range
from spark_source.schema import arrow_schema, kafka_schema

__all__ = [
    "NAME",
    "KafkaRangePartition",
    "OrderedKafkaBatchReader",
    "OrderedKafkaDataSource",
    "OrderedKafkaStreamReader",
]

NAME = "ordered-kafka"
"""The format name the source and sink are registered under."""

if TYPE_CHECKING:
    from spark_source.cluster import Cluster

_log = logging.getLogger(__name__)


def _progress_log() -> logging.Logger:
    """The ``spark_source.progress`` logger; to stderr at INFO unless logging is set up.

    It runs in Spark's driver-side Python worker, where nobody configures logging and
    Python would drop INFO lines; its stderr goes to the driver's log.
    """
    log = logging.getLogger("spark_source.progress")
    if not log.handlers and not logging.getLogger().handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    return log


class KafkaRangePartition(InputPartition):
    """One Spark task: an offset range of one partition (pickled to the executor)."""

    def __init__(self, part: OffsetRange) -> None:
        super().__init__(part)
        self.part = part


def _range_of(partition: InputPartition) -> OffsetRange | None:
    """The range a task reads; ``None`` for the empty task of a batch with no data.

    PySpark plans a batch read without ranges as one ``InputPartition(None)``.
    """
    part = getattr(partition, "value", None)
    if part is None:
        return None
    if not isinstance(part, OffsetRange):
        raise TypeError(f"not an ordered-kafka partition: {partition!r}")
    return part


def _resolve(
    wanted: str | Mapping[str, Mapping[int, int]],
    partitions: Mapping[str, Sequence[int]],
    starts: Mapping[str, Mapping[int, int]],
    ends: Mapping[str, Mapping[int, int]],
    option: str,
) -> Offsets:
    """Turn ``earliest``/``latest``/JSON into concrete offsets (resolved once)."""
    if wanted == "earliest":
        return {t: dict(starts[t]) for t in partitions}
    if wanted == "latest":
        return {t: dict(ends[t]) for t in partitions}
    assert not isinstance(wanted, str)
    out: Offsets = {}
    for topic, parts in partitions.items():
        given = wanted.get(topic)
        if given is None:
            continue
        if set(given) != set(parts):
            raise ConfigError(
                f"option '{option}': if it gives specific offsets, it must give every "
                f"partition of {topic}: Kafka has {sorted(parts)}, the option gives "
                f"{sorted(given)}"
            )
        resolved: dict[int, int] = {}
        for p, o in given.items():
            if o == EARLIEST:
                resolved[p] = starts[topic][p]
            elif o == LATEST:
                resolved[p] = ends[topic][p]
            else:
                resolved[p] = o
        out[topic] = resolved
    missing = sorted(set(wanted) - set(partitions))
    if missing:
        raise ConfigError(f"option '{option}' names topics that are not read: {missing}")
    return out


class OrderedKafkaStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    """The streaming reader: Spark's Kafka source plus the gates of adopted topics.

    Constructed on the driver and pickled to the executors: no client is opened before
    the first driver-side call (see :meth:`__getstate__`).

    Args:
        options: The checked options.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer = consumer_settings(options.kafka, options.group_id_prefix)
        self._cluster: Cluster | None = None
        self._initial: dict[str, dict[str, int]] | None = None
        self._latest: Offsets | None = None
        self._target: Offsets | None = None
        self._last_trigger_ms = 0.0
        self._uncapped: Offsets | None = None
        self._gate_clock = GateClock()
        self._logged_batch: tuple[Any, Any] | None = None
        self.progress: dict[str, Any] = {}
        """The last planned batch's figures (:func:`spark_source.progress.batch_progress`)."""

    def __getstate__(self) -> dict[str, Any]:
        """Pickle without the driver's clients (they are reopened lazily)."""
        state = dict(self.__dict__)
        state["_cluster"] = None
        return state

    @property
    def cluster(self) -> Cluster:
        """The driver's Kafka and ZooKeeper clients (opened on first use)."""
        if self._cluster is None:
            # Imported here: executors unpickle this module and never plan.
            from spark_source.cluster import Cluster

            self._cluster = Cluster(self.options)
        return self._cluster

    # --- offsets ----------------------------------------------------------------------

    def initialOffset(self) -> dict[str, dict[str, int]]:
        """Resolve ``startingOffsets`` once: ``earliest``/``latest``/JSON to offsets.

        Python sources are not given the checkpoint path; Spark calls this only when the
        offset log is empty (a new query, or a crash during its first batch), and a
        restart resumes from the logged offsets instead.
        """
        if self._initial is None:
            cluster = self.cluster
            parts = cluster.partitions()
            ends, starts = cluster.offsets(parts)
            offsets = _resolve(self.options.starting, parts, starts, ends, "startingOffsets")
            self._initial = to_spark(offsets)
        return self._initial

    def getDefaultReadLimit(self) -> ReadLimit:
        """``maxOffsetsPerTrigger`` as ``ReadMaxRows``, else ``minOffsetsPerTrigger``."""
        if self.options.max_offsets is not None:
            return ReadMaxRows(self.options.max_offsets)
        if self.options.min_offsets is not None:
            return ReadMinRows(self.options.min_offsets)
        return ReadAllAvailable()

    def reportLatestOffset(self) -> dict[str, dict[str, int]] | None:
        """Kafka's end offsets as last read (uncapped), for the query's progress."""
        return None if self._latest is None else to_spark(self._latest)

    def prepareForTriggerAvailableNow(self) -> None:
        """Freeze the target: Kafka's end offsets now. Batches then run up to it, gated."""
        cluster = self.cluster
        self._target, _ = cluster.offsets(cluster.partitions(), starts=False)

    def latestOffset(self, start: dict[str, Any], limit: ReadLimit) -> dict[str, dict[str, int]]:
        """The end of the next batch: Kafka's end offsets, capped by the gates and limited.

        Args:
            start: The end of the last batch Spark logged (or the initial offset).
            limit: ``ReadAllAvailable`` (Trigger.Once) or this source's default limit.

        Raises:
            DataLossError: With ``failOnDataLoss``: a partition read before is gone or
                trimmed past the query's position, or a new partition does not start at 0.
        """
        begin = from_spark(start)
        end = self.plan(begin)
        capped = end
        if isinstance(limit, ReadAllAvailable):
            self._report(begin, capped, end)
            return to_spark(end)
        options = self.options
        if options.min_offsets is not None and self._target is None:
            now = time.monotonic() * 1000.0
            if self._last_trigger_ms == 0.0:
                self._last_trigger_ms = now
            waited = now - self._last_trigger_ms
            if waited < options.max_trigger_delay_ms and backlog(begin, end) < options.min_offsets:
                return to_spark(begin)
            self._last_trigger_ms = now
        if options.max_offsets is not None:
            end = rate_limit(begin, end, options.max_offsets)
        self._report(begin, capped, end)
        return to_spark(end)

    def _report(self, begin: Offsets, capped: Offsets, end: Offsets) -> None:
        """Keep and log the batch's progress figures (:mod:`spark_source.progress`).

        PySpark's Python source API has no custom metrics: logged, once per batch that
        reads something, on the ``spark_source.progress`` logger.
        """
        uncapped = self._uncapped or {}
        wait_ms = self._gate_clock.update(uncapped, capped, time.monotonic())
        self.progress = batch_progress(uncapped, capped, end, wait_ms)
        batch = (to_spark(begin), to_spark(end))
        # Once per batch: Spark asks again at every trigger while nothing changes.
        if batch != self._logged_batch and (backlog(begin, end) > 0 or self._gate_clock.since):
            self._logged_batch = batch
            _progress_log().info("ordered-kafka progress %s", json.dumps(self.progress))

    def plan(self, begin: Offsets) -> Offsets:
        """Kafka's end offsets, then the layouts, then the caps (no read limit).

        The order is the point: an end offset read before the layout covers only records
        written before the layout was read, so every epoch they carry is known.
        """
        cluster = self.cluster
        parts = cluster.partitions()
        # Both offset requests fly together; both answers are in before the layout read.
        ends, log_starts = cluster.offsets(parts)
        histories = cluster.histories(parts)
        self._latest = ends
        self._check_loss(begin, parts, ends, log_starts)
        self._uncapped = ends
        target = ends
        if self._target is not None:
            target = {}
            for topic, last in ends.items():
                frozen = self._target.setdefault(topic, {})
                history = histories[topic]
                if history.adopted:
                    frozen.update(available_now_target(history.epochs, frozen, last))
                first = begin.get(topic, {})
                target[topic] = {
                    p: min(o, frozen[p]) if p in frozen else first.get(p, 0)
                    for p, o in last.items()
                }
            self._uncapped = target
        out: Offsets = {}
        for topic, last in target.items():
            first = begin.get(topic, {})
            history = histories[topic]
            if history.adopted:
                caps = gate_caps(history.epochs, first, last, log_starts[topic])
            else:
                caps = {p: max(first.get(p, 0), o) for p, o in last.items()}
            out[topic] = caps
        # Partitions read before but no longer listed (failOnDataLoss=false): dropped,
        # as Spark's Kafka source drops them.
        return out

    def _check_loss(
        self,
        begin: Offsets,
        parts: Mapping[str, Sequence[int]],
        ends: Offsets,
        log_starts: Offsets,
    ) -> None:
        fail = self.options.fail_on_data_loss
        problems: list[DataLossError] = []
        for topic, offsets in begin.items():
            for p, o in offsets.items():
                if topic not in parts or p not in parts[topic]:
                    problems.append(DataLossError(topic, p, o, "the partition is gone"))
                elif o < log_starts[topic][p]:
                    # A retired partition read to its end and then trimmed has
                    # o == log start: not a loss.
                    problems.append(
                        DataLossError(topic, p, o, f"the log now starts at {log_starts[topic][p]}")
                    )
                elif o > ends[topic][p]:
                    problems.append(
                        DataLossError(
                            topic, p, o, f"the partition's end went back to {ends[topic][p]}"
                        )
                    )
        for topic, ps in parts.items():
            for p in ps:
                if p not in begin.get(topic, {}) and log_starts[topic][p] > 0:
                    problems.append(
                        DataLossError(
                            topic, p, 0, f"added partition starts at {log_starts[topic][p]}, not 0"
                        )
                    )
        if not problems:
            return
        if fail:
            raise problems[0]
        for problem in problems:
            _log.warning("%s", problem)

    def partitions(self, start: dict[str, Any], end: dict[str, Any]) -> list[KafkaRangePartition]:
        """One task per partition range (split further for ``minPartitions``)."""
        ranges = offset_ranges(from_spark(start), from_spark(end), self.options.min_partitions)
        return [KafkaRangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one range on an executor: Arrow record batches of Spark's Kafka schema."""
        return _read(self.options, self._consumer, partition)

    def commit(self, end: dict[str, Any]) -> None:
        """Nothing to do: like Spark's Kafka source, progress lives in the checkpoint."""

    def stop(self) -> None:
        """Close the driver's clients."""
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = None


class OrderedKafkaBatchReader(DataSourceReader):
    """A batch read (``spark.read.format("ordered-kafka")``), as Spark's Kafka batch read.

    Reads ``[startingOffsets, endingOffsets)`` of every partition (``earliest`` and
    ``latest`` by default). One batch has no gates: a key that moved between partitions
    has records in both; only the ``ordered.epoch`` header (an opt-in of the producers)
    tells which came first. Use the streaming source for per-key order.
    """

    def __init__(self, options: SourceOptions) -> None:
        self.options = options
        self._consumer = consumer_settings(options.kafka, options.group_id_prefix)

    def partitions(self) -> list[KafkaRangePartition]:
        """Resolve the starting and ending offsets now; one task per range."""
        from spark_source.cluster import Cluster

        cluster = Cluster(self.options, open_store=False)
        try:
            parts = cluster.partitions()
            ends, starts = cluster.offsets(parts)
        finally:
            cluster.close()
        first = _resolve(self.options.starting, parts, starts, ends, "startingOffsets")
        last = _resolve(self.options.ending, parts, starts, ends, "endingOffsets")
        ranges = offset_ranges(first, last, self.options.min_partitions)
        return [KafkaRangePartition(r) for r in ranges]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        """Read one range on an executor."""
        return _read(self.options, self._consumer, partition)


def _read(
    options: SourceOptions, consumer: dict[str, str], partition: InputPartition
) -> Iterator[Any]:
    """Read one range on an executor: Arrow record batches of Spark's Kafka schema."""
    part = _range_of(partition)
    if part is None:
        return iter(())
    return read_range(
        consumer,
        part,
        fail_on_data_loss=options.fail_on_data_loss,
        schema=arrow_schema(options.include_headers),
        poll_timeout_s=options.poll_timeout_ms / 1000.0,
    )


class OrderedKafkaDataSource(DataSource):
    """The ``ordered-kafka`` format: Spark's Kafka options, schema and offsets, with gates.

    The options are checked when the query is defined (``load()`` calls :meth:`schema`),
    with errors naming the option, as Spark's Kafka source does.
    """

    @classmethod
    def name(cls) -> str:
        """The format name, ``ordered-kafka``."""
        return NAME

    def schema(self) -> Any:
        """Spark's Kafka schema; checks the read options first (runs at ``load()``)."""
        parsed = parse_source_options(self.options, streaming=None)
        return kafka_schema(parsed.include_headers)

    def streamReader(self, schema: Any) -> OrderedKafkaStreamReader:
        """The streaming reader."""
        return OrderedKafkaStreamReader(parse_source_options(self.options, streaming=True))

    def reader(self, schema: Any) -> OrderedKafkaBatchReader:
        """The batch reader."""
        return OrderedKafkaBatchReader(parse_source_options(self.options, streaming=False))

    def writer(self, schema: Any, overwrite: bool) -> DataSourceWriter:
        """The batch sink (``df.write.format("ordered-kafka")``)."""
        from spark_source.sink import OrderedKafkaBatchWriter

        return OrderedKafkaBatchWriter(parse_sink_options(self.options), schema)

    def streamWriter(self, schema: Any, overwrite: bool) -> DataSourceStreamWriter:
        """The streaming sink (``df.writeStream.format("ordered-kafka")``)."""
        from spark_source.sink import OrderedKafkaStreamWriter

        return OrderedKafkaStreamWriter(parse_sink_options(self.options), schema)
