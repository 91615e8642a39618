"""The asyncio clients: confluent's ``confluent_kafka.aio`` four, over the ordered clients.

:class:`OrderedAIOProducer`, :class:`OrderedAIOConsumer`,
:class:`OrderedAsyncSerializingProducer` and :class:`OrderedAsyncDeserializingConsumer`
keep the names, signatures, awaitables, callbacks, executor options and errors of
confluent's ``AIOProducer``, ``AIOConsumer``, ``AsyncSerializingProducer`` and
``AsyncDeserializingConsumer``. Each holds a sync ordered client and runs its calls in
an executor, as confluent's hold theirs (:mod:`ordered.aio.calls`): every ordering rule
is the sync client's.
"""

from __future__ import annotations

from ordered.aio.consumer import OrderedAIOConsumer
from ordered.aio.deserializing import OrderedAsyncDeserializingConsumer
from ordered.aio.producer import OrderedAIOProducer
from ordered.aio.serializing import OrderedAsyncSerializingProducer

__all__ = [
    "OrderedAIOConsumer",
    "OrderedAIOProducer",
    "OrderedAsyncDeserializingConsumer",
    "OrderedAsyncSerializingProducer",
]
