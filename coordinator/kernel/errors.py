"""The error hierarchy of the ordering layer.

Every exception raised on purpose by ``ordered``, ``coordinator`` and ``spark_source``
derives from :class:`OrderedError`. Errors that come from Kafka keep the original
``confluent_kafka.KafkaError`` (and so its code) in :attr:`OrderedKafkaError.kafka_error`.
Bad arguments to pure functions raise the builtin ``ValueError``/``TypeError`` instead.
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "BarrierTimeoutError",
    "BatchStoppedError",
    "ClusterError",
    "CommandLineError",
    "ConfigError",
    "DataLossError",
    "JarNotBuiltError",
    "LayoutError",
    "LayoutUnavailableError",
    "NotAdoptedError",
    "OrderViolationError",
    "OrderedError",
    "OrderedKafkaError",
    "RecordCorruptError",
    "RunInterruptedError",
    "StateTransitionError",
    "StoreAuthError",
    "StoreError",
    "StoreUnavailableError",
    "SwitchDrainingError",
    "TopicIdMismatchError",
    "TransitionInProgressError",
    "TrimError",
    "TrimRequestError",
    "UnknownTopicError",
    "UsageError",
]


class OrderedError(Exception):
    """Root of every error raised by the ordering layer."""


class UsageError(OrderedError):
    """The caller asked for something that cannot be done as asked (CLI exit code 1)."""


class CommandLineError(UsageError):
    """The command line of ``ordered`` is wrong in a way its parser cannot see (a missing
    server, flags that go together): CLI exit code 2, like argparse's own errors."""


class ConfigError(UsageError):
    """A configuration value is missing, unknown, malformed or conflicts with another."""


class ClusterError(OrderedError):
    """The local development cluster could not be started, found or stopped."""


class BatchStoppedError(OrderedError):
    """A ``foreachBatch`` function's Spark call was interrupted by ``query.stop()``.

    The message is short on purpose (see :mod:`spark_source.stopping`); the batch is
    not committed and runs again when the query restarts from its checkpoint.
    """


class JarNotBuiltError(OrderedError):
    """The JVM producers' jar is not where it is built (``bash scripts/setup.sh`` builds it)."""


class RunInterruptedError(OrderedError):
    """A long run (``ordered chaos``) was stopped by SIGINT or SIGTERM; it stopped everything."""


class StoreError(OrderedError):
    """The layout store in ZooKeeper is unreachable or holds a record that fails its check.

    Catch a subclass to tell the two apart: :class:`StoreUnavailableError` (ZooKeeper
    could not be reached or did not answer in time; retrying later may succeed) and
    :class:`RecordCorruptError` (a znode holds data that fails its schema check;
    retrying will not help).
    """


class StoreUnavailableError(StoreError):
    """ZooKeeper could not be reached, or a store operation ran out of retries."""


class StoreAuthError(StoreError):
    """ZooKeeper refused an operation: the client's identity lacks the permission (NoAuth).

    The message names ``NoAuth``, the znode path and the identity (never a password);
    retrying will not help. Nothing was written.
    """


class RecordCorruptError(StoreError):
    """A znode holds data that is not a valid record of its kind (schema check failed)."""


class LayoutError(UsageError):
    """A requested layout change is not valid for the topic's current layout."""


class LayoutUnavailableError(OrderedError, BufferError):
    """The producer cannot route a record now: its ZooKeeper session is not usable.

    Raised by ``OrderedProducer.produce`` for a keyed record to an ordered topic while
    the session is suspended or lost (until the producer has re-registered and re-read
    the layout), and for the first record to a topic while ZooKeeper is unreachable.
    It is a ``BufferError``, so the usual ``except BufferError: poll(); retry`` loop of
    confluent-kafka producers waits it out.
    """


class SwitchDrainingError(OrderedError, BufferError):
    """The producer cannot take a record now: a route switch waits for older records.

    Raised by ``OrderedProducer.produce`` with ``ordered.switch.mode=pause`` while an
    epoch this producer switched to waits for its records sent before the switch to be
    delivered (usually milliseconds). It is a ``BufferError``: the usual
    ``except BufferError: poll(); retry`` loop serves the delivery reports, and the
    record is taken once the older ones are all delivered.
    """


class NotAdoptedError(UsageError):
    """The topic exists in Kafka but has not been adopted by the ordering layer."""


class TopicIdMismatchError(UsageError):
    """The layout in the store was adopted for another incarnation of the topic.

    Kafka gives every topic a topic id at creation; a topic deleted and created again
    under the same name gets a new one. A layout records the id of the topic it was
    adopted for, and a client or command that finds Kafka's topic under another id
    refuses the layout (``ordered adopt TOPIC --replace`` re-adopts the topic,
    ``ordered unadopt TOPIC`` removes the layout).

    Attributes:
        topic: The topic name.
        recorded_id: The topic id the layout was adopted for.
        kafka_id: The topic id Kafka reports now.
    """

    def __init__(self, topic: str, recorded_id: str, kafka_id: str) -> None:
        super().__init__(
            f"topic {topic} was adopted as topic id {recorded_id}, but Kafka's topic "
            f"{topic} now has topic id {kafka_id} (deleted and created again?): its layout "
            f"does not apply; re-adopt it with `ordered adopt {topic} --replace` or remove "
            f"the layout with `ordered unadopt {topic}`"
        )
        self.topic = topic
        self.recorded_id = recorded_id
        self.kafka_id = kafka_id

    def __reduce__(self) -> tuple[Any, ...]:
        # Pickles (Spark ships exceptions between processes) with its three fields.
        return (type(self), (self.topic, self.recorded_id, self.kafka_id))


class UnknownTopicError(UsageError):
    """The topic does not exist in Kafka."""


class BarrierTimeoutError(OrderedError):
    """The barrier did not pass in time; the epoch stays pending for a later resume."""


class TransitionInProgressError(OrderedError):
    """Another layout transition of the same topic is running; retry when it ends."""


class OrderedKafkaError(OrderedError):
    """A Kafka operation failed; ``kafka_error`` is the original ``KafkaError``.

    Attributes:
        kafka_error: The ``confluent_kafka.KafkaError`` reported by librdkafka.
    """

    def __init__(self, message: str, kafka_error: Any = None) -> None:
        super().__init__(message)
        self.kafka_error = kafka_error

    def code(self) -> int | None:
        """Return the ``KafkaError`` code, as ``KafkaError.code()`` does, or ``None``."""
        if self.kafka_error is None:
            return None
        return int(self.kafka_error.code())


class TrimRequestError(UsageError):
    """A trim request is malformed or cannot be done as asked; nothing was sent."""


class TrimError(OrderedError):
    """A trim (DeleteRecords) failed or timed out for at least one partition.

    Attributes:
        results: The per-partition results (``coordinator.trims.trim.PartitionTrim``), the
            failed ones included, so a caller can report every partition.
    """

    def __init__(self, message: str, results: tuple[Any, ...] = ()) -> None:
        super().__init__(message)
        self.results = results


class OrderViolationError(OrderedError):
    """A consumed record contradicts the layout (``ordered.violation.policy=raise``).

    Its key routes to another partition under every layout that could have placed it at
    its offset, or its epoch header names an epoch that cannot have written that
    offset: a producer outside the ordering layer (or a bug) broke the key's order.

    Attributes:
        topic: The record's topic.
        partition: The record's partition.
        offset: The record's offset.
        reason: What was contradicted.
    """

    def __init__(self, topic: str, partition: int, offset: int, reason: str) -> None:
        super().__init__(f"order violation in {topic}[{partition}]@{offset}: {reason}")
        self.topic = topic
        self.partition = partition
        self.offset = offset
        self.reason = reason


class StateTransitionError(OrderedError, RuntimeError):
    """A state machine was asked for a move its transition table does not list.

    Always a bug in the caller (an event in a state where it cannot happen), never a
    condition of the servers: the message names the machine, the state and the event.
    """


class DataLossError(OrderedError):
    """Records a reader had to read are gone from Kafka (trimmed, aged out or deleted).

    Raised by the Spark source when ``failOnDataLoss`` is true (Spark's default).

    Attributes:
        topic: The topic.
        partition: The partition.
        offset: The first offset that could not be read.
    """

    def __init__(self, topic: str, partition: int, offset: int, detail: str) -> None:
        super().__init__(
            f"Cannot fetch offset {offset} of {topic}-{partition}: {detail}. Some data may have "
            "been lost because they are not available in Kafka any more; either the data was "
            "aged out by Kafka or the topic may have been deleted before all the data in the "
            "topic was processed. If you don't want your streaming query to fail on such "
            'cases, set the source option "failOnDataLoss" to "false".'
        )
        self.topic = topic
        self.partition = partition
        self.offset = offset
