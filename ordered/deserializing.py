"""``OrderedDeserializingConsumer``: confluent's ``DeserializingConsumer`` over ``OrderedConsumer``.

confluent-kafka's ``DeserializingConsumer`` is a ``Consumer`` whose ``poll`` runs the
configured key and value deserializers on each record. This class does the same over
an :class:`~ordered.consumer.OrderedConsumer`, by composition: the same configuration
keys (``key.deserializer``, ``value.deserializer`` and their ``.builder`` forms, taken
out of the dict before the wrapped consumer sees it), deserializers called with
confluent's own ``SerializationContext(topic, MessageField.KEY/VALUE, headers)``, the
same ``KeyDeserializationError`` / ``ValueDeserializationError`` / ``ConsumeError``, and
``consume`` refused with ``NotImplementedError`` as confluent refuses it.

Records are deserialized after the ordered consumer has let them through its gates:
the order is the wrapped consumer's, the deserializer only changes what ``key()`` and
``value()`` return. The builder handling is confluent's own code
(``confluent_kafka._serde_builder``, through :mod:`coordinator.kernel.confluent_private`),
as in :mod:`ordered.serializing`.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Generic, TypeVar

from confluent_kafka import TopicPartition
from confluent_kafka.error import ConsumeError, KeyDeserializationError, ValueDeserializationError
from confluent_kafka.serialization import MessageField, SerializationContext

from coordinator.kernel.confluent_private import close_serdes
from ordered.consumer import OrderedConsumer
from ordered.listener import PartitionKeyRebalanceListener
from ordered.serde_setup import build_with_serdes

__all__ = ["OrderedDeserializingConsumer"]

K = TypeVar("K")
V = TypeVar("V")

Callback = Callable[[Any, list[TopicPartition]], Any]


class OrderedDeserializingConsumer(Generic[K, V]):
    """An :class:`~ordered.consumer.OrderedConsumer` with deserialization, as confluent's
    ``DeserializingConsumer``.

    Configuration: that of ``OrderedConsumer`` (confluent's keys plus ``ordered.*``) and
    confluent's ``key.deserializer`` / ``value.deserializer`` (callables
    ``(bytes, SerializationContext) -> obj``) or their ``.builder`` forms. Schema
    Registry deserializers (Avro, Protobuf, JSON Schema) are such callables.

    Every other method is the wrapped consumer's, forwarded explicitly; rebalance
    callbacks receive this object, as confluent's receive the ``DeserializingConsumer``.
    The ordered extras (``gate_status``, ``metrics``, ...) are on :attr:`consumer`.

    Args:
        conf: The configuration dict (not modified).

    Raises:
        ValueError: A deserializer and its builder are both configured.
        ConfigError: A bad ``ordered.*`` setting (from ``OrderedConsumer``).
        StoreError: ZooKeeper could not be reached (from ``OrderedConsumer``).
    """

    def __init__(self, conf: dict[str, Any]) -> None:
        serdes, self._owned_serdes, self._consumer = build_with_serdes(
            conf, "key.deserializer", "value.deserializer", OrderedConsumer
        )
        self._key_deserializer, self._value_deserializer = serdes

    @property
    def consumer(self) -> OrderedConsumer:
        """The wrapped :class:`~ordered.consumer.OrderedConsumer` (for its ordered extras)."""
        return self._consumer

    def poll(self, timeout: float = -1) -> Any:
        """Return the next record deserialized, or ``None`` on timeout, as
        ``DeserializingConsumer.poll``.

        The deserialized key and value are what ``key()``/``value()`` and
        ``deserialized_key()``/``deserialized_value()`` return.

        Args:
            timeout: Seconds; negative waits forever.

        Raises:
            KeyDeserializationError: The key deserializer raised.
            ValueDeserializationError: The value deserializer raised.
            ConsumeError: ``poll`` returned an error event.
            RuntimeError: The consumer is closed.
        """
        msg = self._consumer.poll(timeout)
        if msg is None:
            return None
        error = msg.error()
        if error is not None:
            raise ConsumeError(error, kafka_message=msg)
        return self._deserialize(msg)

    def _deserialize(self, msg: Any) -> Any:
        # The key first, so a key deserializer can leave state for the value's (as
        # confluent orders them).
        ctx = SerializationContext(msg.topic(), MessageField.KEY, msg.headers())
        key = msg.key()
        if self._key_deserializer is not None:
            try:
                key = self._key_deserializer(key, ctx)
            except Exception as se:
                raise KeyDeserializationError(exception=se, kafka_message=msg) from se
        value = msg.value()
        if self._value_deserializer is not None:
            ctx.field = MessageField.VALUE
            try:
                value = self._value_deserializer(value, ctx)
            except Exception as se:
                raise ValueDeserializationError(exception=se, kafka_message=msg) from se
        msg.set_key(key)
        msg.set_value(value)
        return msg

    def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """Not implemented, as ``DeserializingConsumer.consume``: use :meth:`poll`."""
        raise NotImplementedError

    # --- the rest of confluent's Consumer, forwarded --------------------------------

    def subscribe(
        self,
        topics: list[str],
        on_assign: Callback | None = None,
        on_revoke: Callback | None = None,
        on_lost: Callback | None = None,
        key_listener: PartitionKeyRebalanceListener | None = None,
    ) -> None:
        """Subscribe, as ``Consumer.subscribe`` (plus KIP-253's ``key_listener``).

        The callbacks get this consumer as their first argument.
        """
        self._consumer.subscribe(
            topics,
            on_assign=self._bound(on_assign),
            on_revoke=self._bound(on_revoke),
            on_lost=self._bound(on_lost),
            key_listener=key_listener,
        )

    def _bound(self, callback: Callback | None) -> Callback | None:
        if callback is None:
            return None

        def call(_wrapped: Any, partitions: list[TopicPartition]) -> Any:
            return callback(self, partitions)

        return call

    def unsubscribe(self) -> None:
        """As ``Consumer.unsubscribe``."""
        self._consumer.unsubscribe()

    def assign(self, partitions: list[TopicPartition]) -> None:
        """As ``Consumer.assign`` (the gates still apply)."""
        self._consumer.assign(partitions)

    def incremental_assign(self, partitions: list[TopicPartition]) -> None:
        """As ``Consumer.incremental_assign``."""
        self._consumer.incremental_assign(partitions)

    def incremental_unassign(self, partitions: list[TopicPartition]) -> None:
        """As ``Consumer.incremental_unassign``."""
        self._consumer.incremental_unassign(partitions)

    def unassign(self) -> None:
        """As ``Consumer.unassign``."""
        self._consumer.unassign()

    def assignment(self) -> list[TopicPartition]:
        """As ``Consumer.assignment``."""
        return self._consumer.assignment()

    def commit(self, *args: Any, **kwargs: Any) -> Any:
        """As ``Consumer.commit`` (``message``, ``offsets``, ``asynchronous``)."""
        return self._consumer.commit(*args, **kwargs)

    def store_offsets(self, *args: Any, **kwargs: Any) -> None:
        """As ``Consumer.store_offsets`` (``message`` or ``offsets``)."""
        self._consumer.store_offsets(*args, **kwargs)

    def committed(self, partitions: list[TopicPartition], timeout: float | None = None) -> Any:
        """As ``Consumer.committed``."""
        return self._consumer.committed(partitions, timeout)

    def position(self, partitions: list[TopicPartition]) -> list[TopicPartition]:
        """As ``Consumer.position``."""
        return self._consumer.position(partitions)

    def seek(self, partition: TopicPartition) -> None:
        """As ``Consumer.seek``."""
        self._consumer.seek(partition)

    def pause(self, partitions: list[TopicPartition]) -> None:
        """As ``Consumer.pause``."""
        self._consumer.pause(partitions)

    def resume(self, partitions: list[TopicPartition]) -> None:
        """As ``Consumer.resume``."""
        self._consumer.resume(partitions)

    def get_watermark_offsets(
        self, partition: TopicPartition, timeout: float | None = None, cached: bool = False
    ) -> Any:
        """As ``Consumer.get_watermark_offsets``."""
        return self._consumer.get_watermark_offsets(partition, timeout, cached)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """As ``Consumer.list_topics``."""
        return self._consumer.list_topics(topic, timeout)

    def offsets_for_times(
        self, partitions: list[TopicPartition], timeout: float | None = None
    ) -> Any:
        """As ``Consumer.offsets_for_times``."""
        return self._consumer.offsets_for_times(partitions, timeout)

    def memberid(self) -> Any:
        """As ``Consumer.memberid``."""
        return self._consumer.memberid()

    def consumer_group_metadata(self) -> Any:
        """As ``Consumer.consumer_group_metadata``."""
        return self._consumer.consumer_group_metadata()

    def cluster_id(self, *args: Any, **kwargs: Any) -> Any:
        """As ``Consumer.cluster_id``."""
        return self._consumer.cluster_id(*args, **kwargs)

    def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        """As ``Consumer.set_sasl_credentials``."""
        return self._consumer.set_sasl_credentials(*args, **kwargs)

    def close(self) -> None:
        """Close the consumer, then the deserializers it built, as
        ``DeserializingConsumer.close``."""
        self._consumer.close()
        owned, self._owned_serdes = self._owned_serdes, []
        close_serdes(owned)

    def __enter__(self) -> OrderedDeserializingConsumer[K, V]:
        """Return self; ``with`` closes it on the way out."""
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, exc_traceback: Any) -> None:
        """Close, as ``DeserializingConsumer.__exit__``."""
        self.close()
