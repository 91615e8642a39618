"""``OrderedAsyncSerializingProducer``: confluent's ``AsyncSerializingProducer``, ordered.

confluent's ``confluent_kafka.aio.AsyncSerializingProducer`` is an ``AIOProducer``
whose ``produce`` first runs the key and value serializers (plain callables or asyncio
ones, awaited). This class does the same over an
:class:`~ordered.aio.producer.OrderedAIOProducer`, by composition: the same
construction (``producer = await OrderedAsyncSerializingProducer(conf, **kwargs)``),
configuration keys (``key.serializer``, ``value.serializer`` and their ``.builder``
forms), ``produce`` signature (key before value), errors and closing of the serializers
it built. The builder handling and the cluster id resolver are confluent's own code
(``confluent_kafka._serde_builder``).

The layout routes the *serialized* key, as with the sync
:class:`~ordered.serializing.OrderedSerializingProducer`.
"""

from __future__ import annotations

import asyncio
from typing import Any, Generic, TypeVar

from confluent_kafka.error import KeySerializationError, ValueSerializationError
from confluent_kafka.serialization import MessageField, SerializationContext

from coordinator.kernel.confluent_private import async_close_serdes, asyncinit, maybe_await
from ordered.aio.producer import OrderedAIOProducer
from ordered.producer import OrderedProducer
from ordered.serde_setup import async_build_with_serdes

__all__ = ["OrderedAsyncSerializingProducer"]

K = TypeVar("K")
V = TypeVar("V")


@asyncinit
class OrderedAsyncSerializingProducer(Generic[K, V]):
    """An :class:`~ordered.aio.producer.OrderedAIOProducer` with serialization.

    Made with ``await OrderedAsyncSerializingProducer(conf, **kwargs)``, as confluent's.

    Args:
        conf: ``OrderedAIOProducer``'s configuration plus confluent's serializer keys
            (not modified).
        **kwargs: ``max_workers``, ``executor``, ``batch_size``, ``buffer_timeout``.

    Raises:
        ValueError: A serializer and its builder are both configured.
        ConfigError: A bad ``ordered.`` setting.
    """

    async def __init_impl(self, conf: dict[str, Any], **kwargs: Any) -> None:
        serdes, self._owned_serdes, self._aio = await async_build_with_serdes(
            conf,
            "key.serializer",
            "value.serializer",
            lambda conf_copy: OrderedAIOProducer(conf_copy, **kwargs),
        )
        self._key_serializer, self._value_serializer = serdes

    __init__ = __init_impl  # asyncinit awaits it

    @property
    def aio_producer(self) -> OrderedAIOProducer:
        """The wrapped ``OrderedAIOProducer``."""
        return self._aio

    @property
    def producer(self) -> OrderedProducer:
        """The ``OrderedProducer`` beneath (its methods block)."""
        return self._aio.producer

    async def __aenter__(self) -> OrderedAsyncSerializingProducer[K, V]:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    def __len__(self) -> int:
        return len(self._aio)

    async def close(self) -> None:
        """Close the producer, then the serializers it built (as confluent's)."""
        if not self._aio._is_closed:
            await self._aio.close()
        owned, self._owned_serdes = self._owned_serdes, []
        await async_close_serdes(owned)

    async def produce(
        self,
        topic: str,
        key: K | None = None,
        value: V | None = None,
        partition: int = -1,
        timestamp: int = 0,
        headers: Any = None,
    ) -> asyncio.Future[Any]:
        """Serialize the key and value, then produce (``AsyncSerializingProducer.produce``).

        Raises:
            RuntimeError: The producer is closed (before the serializers run).
            TypeError: ``topic`` is not a str (likewise).
            KeySerializationError: The key serializer raised.
            ValueSerializationError: The value serializer raised.
            NotImplementedError: ``headers`` given (confluent's batch mode has none).
        """
        # Before the serializers: they may have side effects (schema registration).
        if self._aio._is_closed:
            raise RuntimeError("Producer has been closed")
        if not isinstance(topic, str):
            raise TypeError(f"topic must be a str, not {type(topic).__name__}")
        key_bytes: Any = key
        value_bytes: Any = value
        ctx = SerializationContext(topic, MessageField.KEY, headers)
        if self._key_serializer is not None:
            try:
                key_bytes = await maybe_await(self._key_serializer(key, ctx))
            except Exception as se:
                raise KeySerializationError(se) from se
        ctx.field = MessageField.VALUE
        if self._value_serializer is not None:
            try:
                value_bytes = await maybe_await(self._value_serializer(value, ctx))
            except Exception as se:
                raise ValueSerializationError(se) from se
        kwargs: dict[str, Any] = {}
        if partition != -1:
            kwargs["partition"] = partition
        if timestamp != 0:
            kwargs["timestamp"] = timestamp
        if headers is not None:
            kwargs["headers"] = headers
        return await self._aio.produce(topic, value_bytes, key_bytes, **kwargs)

    async def poll(self, timeout: float = 0, *args: Any, **kwargs: Any) -> int:
        """As ``OrderedAIOProducer.poll``."""
        return await self._aio.poll(timeout, *args, **kwargs)

    async def flush(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.flush``."""
        return await self._aio.flush(*args, **kwargs)

    async def purge(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.purge``."""
        return await self._aio.purge(*args, **kwargs)

    async def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.list_topics``."""
        return await self._aio.list_topics(*args, **kwargs)

    async def cluster_id(self, *args: Any, **kwargs: Any) -> str:
        """As ``OrderedAIOProducer.cluster_id``."""
        return await self._aio.cluster_id(*args, **kwargs)

    async def init_transactions(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.init_transactions``."""
        return await self._aio.init_transactions(*args, **kwargs)

    async def begin_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.begin_transaction``."""
        return await self._aio.begin_transaction(*args, **kwargs)

    async def send_offsets_to_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.send_offsets_to_transaction``."""
        return await self._aio.send_offsets_to_transaction(*args, **kwargs)

    async def commit_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.commit_transaction``."""
        return await self._aio.commit_transaction(*args, **kwargs)

    async def abort_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.abort_transaction``."""
        return await self._aio.abort_transaction(*args, **kwargs)

    async def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        """As ``OrderedAIOProducer.set_sasl_credentials``."""
        return await self._aio.set_sasl_credentials(*args, **kwargs)
