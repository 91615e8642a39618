"""``OrderedAsyncDeserializingConsumer``: confluent's ``AsyncDeserializingConsumer``, ordered.

confluent's ``confluent_kafka.aio.AsyncDeserializingConsumer`` is an ``AIOConsumer``
whose ``poll`` and ``consume`` run the key and value deserializers (plain callables or
asyncio ones, awaited). This class does the same over an
:class:`~ordered.aio.consumer.OrderedAIOConsumer`, by composition: the same
construction (``consumer = await OrderedAsyncDeserializingConsumer(conf, **kwargs)``),
configuration keys, errors (``ConsumeError`` from ``poll`` for an error event,
``KeyDeserializationError`` / ``ValueDeserializationError``), and rebalance callbacks
that get this object. Records are deserialized after the ordered consumer let them
through its gates: a deserializer changes what ``key()`` and ``value()`` return, never
the order.
"""

from __future__ import annotations

from typing import Any, Generic, TypeVar, cast

from confluent_kafka.error import ConsumeError, KeyDeserializationError, ValueDeserializationError
from confluent_kafka.serialization import MessageField, SerializationContext

from coordinator.kernel.confluent_private import async_close_serdes, asyncinit, maybe_await
from ordered.aio.consumer import OrderedAIOConsumer
from ordered.consumer import OrderedConsumer
from ordered.serde_setup import async_build_with_serdes

__all__ = ["OrderedAsyncDeserializingConsumer"]

K = TypeVar("K")
V = TypeVar("V")


@asyncinit
class OrderedAsyncDeserializingConsumer(Generic[K, V]):
    """An :class:`~ordered.aio.consumer.OrderedAIOConsumer` with deserialization.

    Made with ``await OrderedAsyncDeserializingConsumer(conf, **kwargs)``, as confluent's.

    Args:
        conf: ``OrderedAIOConsumer``'s configuration plus confluent's deserializer keys
            (not modified).
        **kwargs: ``max_workers``, ``executor``.

    Raises:
        ValueError: A deserializer and its builder are both configured.
        ConfigError: A bad ``ordered.`` setting.
    """

    async def __init_impl(self, conf: dict[str, Any], **kwargs: Any) -> None:
        def make_consumer(conf_copy: dict[str, Any]) -> OrderedAIOConsumer:
            aio = OrderedAIOConsumer(conf_copy, **kwargs)
            aio._face = self  # rebalance callbacks get this object
            return aio

        serdes, self._owned_serdes, self._aio = await async_build_with_serdes(
            conf, "key.deserializer", "value.deserializer", make_consumer
        )
        self._key_deserializer, self._value_deserializer = serdes

    __init__ = __init_impl  # asyncinit awaits it

    @property
    def aio_consumer(self) -> OrderedAIOConsumer:
        """The wrapped ``OrderedAIOConsumer``."""
        return self._aio

    @property
    def consumer(self) -> OrderedConsumer:
        """The ``OrderedConsumer`` beneath (``gate_status``, ``metrics``...; it blocks)."""
        return self._aio.consumer

    async def __aenter__(self) -> OrderedAsyncDeserializingConsumer[K, V]:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    async def close(self, *args: Any, **kwargs: Any) -> Any:
        """Close the consumer, then the deserializers it built; later calls do nothing."""
        result = None
        if not self._aio._closed:
            result = await self._aio.close(*args, **kwargs)
        owned, self._owned_serdes = self._owned_serdes, []
        await async_close_serdes(owned)
        return result

    async def poll(self, timeout: float = -1) -> Any:
        """One message, deserialized; ``None`` at the timeout.

        Raises:
            ConsumeError: An error event.
            KeyDeserializationError: The key deserializer raised.
            ValueDeserializationError: The value deserializer raised.
        """
        msg = await self._aio.poll(timeout)
        if msg is None:
            return None
        error = msg.error()
        if error is not None:
            raise ConsumeError(error, kafka_message=msg)
        return await self._deserialize(msg)

    async def consume(self, num_messages: int = 1, timeout: float = -1) -> list[Any]:
        """A batch, deserialized; messages with an error are returned as they are."""
        msgs = await self._aio.consume(num_messages, timeout)
        result: list[Any] = []
        for msg in msgs:
            if msg.error() is not None:
                result.append(msg)
            else:
                result.append(await self._deserialize(msg))
        return result

    async def _deserialize(self, msg: Any) -> Any:
        # The key first: a key deserializer may leave state for the value's (confluent).
        topic = cast(str, msg.topic())
        ctx = SerializationContext(topic, MessageField.KEY, msg.headers())
        key: Any = msg.key()
        if self._key_deserializer is not None:
            try:
                key = await maybe_await(self._key_deserializer(key, ctx))
            except Exception as se:
                raise KeyDeserializationError(exception=se, kafka_message=msg) from se
        value: Any = msg.value()
        if self._value_deserializer is not None:
            ctx.field = MessageField.VALUE
            try:
                value = await maybe_await(self._value_deserializer(value, ctx))
            except Exception as se:
                raise ValueDeserializationError(exception=se, kafka_message=msg) from se
        msg.set_key(key)
        msg.set_value(value)
        return msg

    async def subscribe(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.subscribe`` (callbacks get this consumer)."""
        return await self._aio.subscribe(*args, **kwargs)

    async def unsubscribe(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.unsubscribe``."""
        return await self._aio.unsubscribe(*args, **kwargs)

    async def commit(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.commit``."""
        return await self._aio.commit(*args, **kwargs)

    async def seek(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.seek``."""
        return await self._aio.seek(*args, **kwargs)

    async def pause(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.pause``."""
        return await self._aio.pause(*args, **kwargs)

    async def resume(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.resume``."""
        return await self._aio.resume(*args, **kwargs)

    async def store_offsets(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.store_offsets``."""
        return await self._aio.store_offsets(*args, **kwargs)

    async def committed(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.committed``."""
        return await self._aio.committed(*args, **kwargs)

    async def assign(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.assign``."""
        return await self._aio.assign(*args, **kwargs)

    async def unassign(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.unassign``."""
        return await self._aio.unassign(*args, **kwargs)

    async def incremental_assign(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.incremental_assign``."""
        return await self._aio.incremental_assign(*args, **kwargs)

    async def incremental_unassign(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.incremental_unassign``."""
        return await self._aio.incremental_unassign(*args, **kwargs)

    async def assignment(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.assignment``."""
        return await self._aio.assignment(*args, **kwargs)

    async def position(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.position``."""
        return await self._aio.position(*args, **kwargs)

    async def consumer_group_metadata(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.consumer_group_metadata``."""
        return await self._aio.consumer_group_metadata(*args, **kwargs)

    async def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.set_sasl_credentials``."""
        return await self._aio.set_sasl_credentials(*args, **kwargs)

    async def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.list_topics``."""
        return await self._aio.list_topics(*args, **kwargs)

    async def cluster_id(self, *args: Any, **kwargs: Any) -> str:
        """As ``OrderedAIOConsumer.cluster_id``."""
        return await self._aio.cluster_id(*args, **kwargs)

    async def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.get_watermark_offsets``."""
        return await self._aio.get_watermark_offsets(*args, **kwargs)

    async def offsets_for_times(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOConsumer.offsets_for_times``."""
        return await self._aio.offsets_for_times(*args, **kwargs)
