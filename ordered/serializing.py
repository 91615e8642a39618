"""``OrderedSerializingProducer``: confluent's ``SerializingProducer`` over ``OrderedProducer``.

confluent-kafka's ``SerializingProducer`` is a ``Producer`` whose ``produce`` first runs
the configured key and value serializers. This class does the same over an
:class:`~ordered.producer.OrderedProducer`, by composition (it holds one, as
``SerializingProducer`` sits on ``Producer``): the same configuration keys
(``key.serializer``, ``value.serializer`` and their ``.builder`` forms, taken out of the
dict before the wrapped producer sees it), serializers called with confluent's own
``SerializationContext(topic, MessageField.KEY/VALUE, headers)``, the same
``KeySerializationError`` / ``ValueSerializationError``, and the same ``produce``
signature (``key`` before ``value``).

The layout routes the *serialized* key: a key given as ``"k1"`` through a
``StringSerializer`` lands where ``OrderedProducer.produce(topic, value, b"k1")`` puts
it, so applications that serialize by hand and those that use this class agree.

The builder handling (``*.serializer.builder``, the cluster id resolver handed to
Schema Registry serializers, closing the serializers the client built) is confluent's
own code (``confluent_kafka._serde_builder``, reached through
:mod:`coordinator.kernel.confluent_private`), so it stays in step with
``SerializingProducer`` of the installed version.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar

from confluent_kafka.error import KeySerializationError, ValueSerializationError
from confluent_kafka.serialization import MessageField, SerializationContext

from coordinator.kernel.confluent_private import close_serdes
from ordered.producer import DeliveryCallback, OrderedProducer
from ordered.serde_setup import build_with_serdes

__all__ = ["OrderedSerializingProducer"]

K = TypeVar("K")
V = TypeVar("V")


class OrderedSerializingProducer(Generic[K, V]):
    """An :class:`~ordered.producer.OrderedProducer` with serialization, as confluent's
    ``SerializingProducer``.

    Configuration: that of ``OrderedProducer`` (confluent's keys plus ``ordered.*``) and
    confluent's ``key.serializer`` / ``value.serializer`` (callables
    ``(obj, SerializationContext) -> bytes``) or ``key.serializer.builder`` /
    ``value.serializer.builder``. Schema Registry serializers (Avro, Protobuf, JSON
    Schema) are such callables; they need a reachable registry at run time.

    Every other method is the wrapped producer's, forwarded explicitly; the ordered
    extras (``topic_state``, ``layout``, ...) are on :attr:`producer`.

    Args:
        conf: The configuration dict (not modified).

    Raises:
        ValueError: A serializer and its builder are both configured.
        ConfigError: A bad ``ordered.*`` setting (from ``OrderedProducer``).
        StoreError: ZooKeeper could not be reached (from ``OrderedProducer``).
    """

    def __init__(self, conf: dict[str, Any]) -> None:
        serdes, self._owned_serdes, self._producer = build_with_serdes(
            conf, "key.serializer", "value.serializer", OrderedProducer
        )
        self._key_serializer, self._value_serializer = serdes
        self._closed = False

    @property
    def producer(self) -> OrderedProducer:
        """The wrapped :class:`~ordered.producer.OrderedProducer` (for its ordered extras)."""
        return self._producer

    def produce(
        self,
        topic: str,
        key: K | None = None,
        value: V | None = None,
        partition: int = -1,
        on_delivery: DeliveryCallback | None = None,
        timestamp: int = 0,
        headers: Any = None,
    ) -> None:
        """Serialize the key and value, then produce, as ``SerializingProducer.produce``.

        Args:
            topic: The topic.
            key: The key object, given to the key serializer (if any); the layout routes
                the bytes it returns.
            value: The value object, given to the value serializer (if any).
            partition: An explicit partition, or -1 for the layout (or librdkafka's
                partitioner on a plain topic).
            on_delivery: Delivery report callback ``(err, msg)``.
            timestamp: CreateTime in ms since the epoch; 0 for now.
            headers: Record headers (dict or list of ``(str, value)``), also handed to
                the serializers in the ``SerializationContext``.

        Raises:
            RuntimeError: The producer has been closed (checked before the serializers
                run, as confluent does).
            TypeError: ``topic`` is not a str (likewise checked first).
            KeySerializationError: The key serializer raised.
            ValueSerializationError: The value serializer raised.
            BufferError: The queue is full, or (``LayoutUnavailableError``,
                ``SwitchDrainingError``) the layout cannot route now: poll and retry.
            KafkaException: Any other librdkafka error.
        """
        key_bytes: Any = key
        value_bytes: Any = value
        # Before the serializers: they may have side effects (schema registration) for
        # a record that can no longer be produced.
        if self._closed:
            raise RuntimeError("Producer has been closed")
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        ctx = SerializationContext(topic, MessageField.KEY, headers)
        if self._key_serializer is not None:
            try:
                key_bytes = self._key_serializer(key, ctx)
            except Exception as se:
                raise KeySerializationError(se) from se
        ctx.field = MessageField.VALUE
        if self._value_serializer is not None:
            try:
                value_bytes = self._value_serializer(value, ctx)
            except Exception as se:
                raise ValueSerializationError(se) from se
        self._producer.produce(
            topic,
            value_bytes,
            key_bytes,
            headers=headers,
            partition=partition,
            timestamp=timestamp,
            on_delivery=on_delivery,
        )

    # --- the rest of confluent's Producer, forwarded --------------------------------

    def produce_batch(
        self,
        topic: str,
        messages: list[dict[str, Any]],
        partition: int = -1,
        callback: DeliveryCallback | None = None,
        on_delivery: DeliveryCallback | None = None,
    ) -> int:
        """Produce records as they are, as ``Producer.produce_batch``.

        No serializer runs: ``SerializingProducer`` inherits ``produce_batch`` from
        ``Producer`` unchanged, so it takes bytes there too.
        """
        return self._producer.produce_batch(topic, messages, partition, callback, on_delivery)

    def poll(self, timeout: float = -1) -> int:
        """Serve delivery reports, as ``Producer.poll``."""
        return self._producer.poll(timeout)

    def flush(self, timeout: float = -1) -> int:
        """Wait for every record to be delivered, as ``Producer.flush``."""
        return self._producer.flush(timeout)

    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Purge queued records, as ``Producer.purge``."""
        self._producer.purge(in_queue, in_flight, blocking)

    def list_topics(self, topic: str | None = None, timeout: float = -1) -> Any:
        """Request metadata, as ``Producer.list_topics``."""
        return self._producer.list_topics(topic, timeout)

    def cluster_id(self, timeout: float = -1) -> str:
        """Return the cluster id, as ``Producer.cluster_id``."""
        return self._producer.cluster_id(timeout)

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """Set SASL credentials, as ``Producer.set_sasl_credentials``."""
        self._producer.set_sasl_credentials(username, password)

    def init_transactions(self, timeout: float = -1) -> None:
        """As ``Producer.init_transactions``."""
        self._producer.init_transactions(timeout)

    def begin_transaction(self) -> None:
        """As ``Producer.begin_transaction``."""
        self._producer.begin_transaction()

    def commit_transaction(self, timeout: float = -1) -> None:
        """As ``Producer.commit_transaction``."""
        self._producer.commit_transaction(timeout)

    def abort_transaction(self, timeout: float = -1) -> None:
        """As ``Producer.abort_transaction``."""
        self._producer.abort_transaction(timeout)

    def send_offsets_to_transaction(
        self, positions: list[Any], group_metadata: Any, timeout: float = -1
    ) -> None:
        """As ``Producer.send_offsets_to_transaction``."""
        self._producer.send_offsets_to_transaction(positions, group_metadata, timeout)

    def close(self) -> bool:
        """Close the producer, then the serializers it built, as ``SerializingProducer.close``.

        Serializers passed ready-made stay the application's to close. Later calls do
        nothing more; if closing the producer raises, the serializers are kept.
        """
        result = self._producer.close()
        # Only now: delivery callbacks served by the flush inside close() may produce
        # again on this thread.
        self._closed = True
        owned, self._owned_serdes = self._owned_serdes, []
        close_serdes(owned)
        return result

    def __len__(self) -> int:
        """Records not yet delivered (or failed), as ``len(Producer)``."""
        return len(self._producer)

    def __bool__(self) -> bool:
        """Always true, as a confluent ``Producer`` (``len`` would make it false)."""
        return True

    def __enter__(self) -> OrderedSerializingProducer[K, V]:
        """Return self; ``with`` closes it on the way out."""
        return self

    def __exit__(self, exc_type: Any, exc_value: Any, exc_traceback: Any) -> None:
        """Close, as ``SerializingProducer.__exit__``."""
        self.close()
