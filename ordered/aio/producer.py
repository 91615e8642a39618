"""``OrderedAIOProducer``: confluent's ``AIOProducer`` over ``OrderedProducer``.

confluent's ``confluent_kafka.aio.AIOProducer`` gathers ``produce()`` calls in a buffer
and hands them to its ``Producer`` with ``produce_batch`` in an executor, one batch per
topic and partition. This class is the same asyncio shell over an
:class:`~ordered.producer.OrderedProducer`: the same constructor (``producer_conf``,
``max_workers``, ``executor``, ``batch_size``, ``buffer_timeout``), the same
awaitables (``produce`` returns a future of the delivered message), callbacks and
errors. The buffer, the batches and the timeout flush are confluent's own classes
(``confluent_kafka.aio.producer``), so they follow the installed version; the
``OrderedProducer`` routes each record of a batch by its key, as its ``produce``
would.

Two things differ, both for the order of a key's records:

* **Hand-overs one at a time.** confluent may run two batch hand-overs at once (a
  ``produce`` that fills the buffer and the timeout flush, or two tasks), on two
  executor threads: the later records can reach the producer first. Here one flush of
  the buffer runs at a time, in the order they were asked for, and ``flush()`` waits
  for the one in flight before it flushes the producer.
* **A failed hand-over keeps its place.** confluent puts the records of a batch that
  raised back at the *end* of the buffer, behind records produced meanwhile; here they
  go back to its front.

Construction does not wait for ZooKeeper on the loop: the ``OrderedProducer`` is made
in the executor. A ``ConfigError`` is raised by the constructor, as by
``OrderedProducer``'s; a ZooKeeper that cannot be reached (``StoreUnavailableError``)
is raised by the first call that needs the producer.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import logging
from typing import Any, cast

from coordinator.kernel.confluent_private import (
    BufferTimeoutManager,
    ProducerBatchExecutor,
    ProducerBatchManager,
)
from coordinator.kernel.confluent_private import aio_common as _common
from ordered.aio.calls import Built, Late, async_call
from ordered.producer import OrderedProducer
from ordered.producer.config import split_producer_config

__all__ = ["OrderedAIOProducer"]

_log = logging.getLogger("ordered.aio.producer")


class _InOrder:
    """What confluent's timeout flush calls: the producer's own one-at-a-time flush."""

    def __init__(self, producer: OrderedAIOProducer) -> None:
        self._producer = producer

    async def flush_buffer(self, target_topic: str | None = None) -> None:
        await self._producer._flush_buffer(target_topic)


class OrderedAIOProducer:
    """An asyncio :class:`~ordered.producer.OrderedProducer`, as confluent's ``AIOProducer``.

    Must be made inside a running event loop (as confluent's). Every blocking call runs
    in ``executor``; ``produce`` buffers the record and returns a future that resolves
    to the delivered message (or raises ``KafkaException``).

    Args:
        producer_conf: ``OrderedProducer``'s configuration (confluent's keys plus the
            ``ordered.`` settings); ``error_cb``, ``throttle_cb`` and ``stats_cb`` are
            coroutine functions, run on the loop (confluent's rule). Not modified.
        max_workers: Threads of the executor made here (ignored with ``executor``).
        executor: An executor to use instead.
        batch_size: Records buffered before a hand-over.
        buffer_timeout: Seconds of inactivity after which the buffer is handed over
            (0: never by time).

    Raises:
        ConfigError: A malformed ``ordered.`` setting (before anything is made).
        TypeError: No configuration dict (as ``OrderedProducer``).
    """

    def __init__(
        self,
        producer_conf: dict[str, Any],
        max_workers: int = 4,
        executor: concurrent.futures.Executor | None = None,
        batch_size: int = 1000,
        buffer_timeout: float = 1.0,
    ) -> None:
        split_producer_config(producer_conf)  # refuse a bad setting here, not in a thread
        if executor is not None:
            self.executor = executor
        else:
            self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
        self._loop = asyncio.get_running_loop()
        conf = dict(producer_conf)
        _common.wrap_common_callbacks(self._loop, conf)
        self._built: Built[OrderedProducer] = Built(self.executor, lambda: self._sync_client(conf))
        self._producer: Late[OrderedProducer] = Late(self._built)
        self._batch_size = batch_size
        self._is_closed = False
        self._order = asyncio.Lock()
        self._kafka_executor = ProducerBatchExecutor(cast(Any, self._producer), self.executor)
        self._batch_processor = ProducerBatchManager(self._kafka_executor)
        self._buffer_timeout_manager = BufferTimeoutManager(
            cast(Any, _InOrder(self)), self._kafka_executor, buffer_timeout
        )
        if buffer_timeout > 0:
            self._buffer_timeout_manager.start_timeout_monitoring()

    def _sync_client(self, conf: dict[str, Any]) -> OrderedProducer:
        """Make the sync client (in the executor). confluent's test suite, run against
        this class, makes it through ``confluent_kafka.Producer`` instead, which its
        tests replace with a mock."""
        return OrderedProducer(conf)

    async def __aenter__(self) -> OrderedAIOProducer:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    @property
    def producer(self) -> OrderedProducer:
        """The wrapped ``OrderedProducer`` (``topic_state``, ``layout``...); its methods block.

        It is made in the executor: after any awaited call has returned, it is there.

        Raises:
            RuntimeError: It is not made yet (or its constructor raised).
        """
        made = self._built.ready()
        if made is None:
            raise RuntimeError("the OrderedProducer is not made yet: await a call first")
        return made

    async def close(self) -> None:
        """Flush, then close the ``OrderedProducer`` (ack and leave ZooKeeper), then the executor.

        confluent's ``AIOProducer.close`` flushes and shuts its executor down; the ordered
        producer is also closed, so that no layout change waits for it. A second call
        does nothing.
        """
        if self._is_closed:
            return
        self._is_closed = True
        self._buffer_timeout_manager.stop_timeout_monitoring()
        try:
            await self._built.wait()
        except Exception:
            made = False  # never made: nothing to flush or close
        else:
            made = True
        if made:
            try:
                await self.flush()
            except Exception:
                _log.error("Error flushing messages during close", exc_info=True)
                raise
            await self._call(self._producer.close)
        await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)

    def __del__(self) -> None:
        if hasattr(self, "_is_closed"):
            self._is_closed = True
        if hasattr(self, "_buffer_timeout_manager"):
            self._buffer_timeout_manager.stop_timeout_monitoring()

    def __len__(self) -> int:
        """Records pending: in the ``OrderedProducer`` (held, queued, in flight) and buffered."""
        if self._is_closed:
            return 0
        made = self._built.ready()
        return (len(made) if made is not None else 0) + self._batch_processor.get_buffer_size()

    async def poll(self, timeout: float = 0, *args: Any, **kwargs: Any) -> int:
        """Serve delivery reports (confluent's ``poll``), in the executor."""
        served: int = await self._call(self._producer.poll, timeout, *args, **kwargs)
        return served

    async def produce(
        self,
        topic: str,
        value: Any | None = None,
        key: Any | None = None,
        *args: Any,
        **kwargs: Any,
    ) -> asyncio.Future[Any]:
        """Buffer a record; hand the buffer over once it holds ``batch_size`` records.

        Args:
            topic: The topic.
            value: The value.
            key: The key: the layout routes it (its bytes) on an adopted topic.
            *args: Ignored, as confluent's.
            **kwargs: ``partition`` and ``timestamp``; ``headers`` is refused.

        Returns:
            A future resolving to the delivered message, or raising ``KafkaException``.

        Raises:
            NotImplementedError: ``headers`` given (confluent's batch mode has none).
        """
        result: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
        msg_data: dict[str, Any] = {"topic": topic, "value": value, "key": key}
        if "partition" in kwargs:
            msg_data["partition"] = kwargs["partition"]
        if "timestamp" in kwargs:
            msg_data["timestamp"] = kwargs["timestamp"]
        if "headers" in kwargs:
            raise NotImplementedError(
                "Headers are not supported in AIOProducer batch mode. "
                "Use the synchronous Producer.produce() method if headers are required."
            )
        self._batch_processor.add_message(msg_data, result)
        self._buffer_timeout_manager.mark_activity()
        if self._batch_processor.get_buffer_size() >= self._batch_size:
            await self._flush_buffer()
        return result

    async def flush(self, *args: Any, **kwargs: Any) -> Any:
        """Hand the buffer over (after any hand-over in flight), then flush the producer."""
        await self._flush_buffer()
        self._buffer_timeout_manager.mark_activity()
        return await self._call(self._producer.flush, *args, **kwargs)

    async def purge(self, *args: Any, **kwargs: Any) -> Any:
        """Fail the buffered records' futures (cancelled) and purge the producer."""
        self._batch_processor.cancel_pending_futures()
        self._batch_processor.clear_buffer()
        self._buffer_timeout_manager.mark_activity()
        return await self._call(self._producer.purge, *args, **kwargs)

    async def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``list_topics``, in the executor."""
        return await self._call(self._producer.list_topics, *args, **kwargs)

    async def cluster_id(self, *args: Any, **kwargs: Any) -> str:
        """confluent's ``cluster_id``, in the executor."""
        found: str = await self._call(self._producer.cluster_id, *args, **kwargs)
        return found

    async def init_transactions(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``init_transactions``, in the executor."""
        return await self._call(self._producer.init_transactions, *args, **kwargs)

    async def begin_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Flush (as confluent's), then ``begin_transaction``."""
        await self.flush()
        return await self._call(self._producer.begin_transaction, *args, **kwargs)

    async def send_offsets_to_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``send_offsets_to_transaction``, in the executor."""
        return await self._call(self._producer.send_offsets_to_transaction, *args, **kwargs)

    async def commit_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Flush the buffer and the producer (as confluent's), then commit."""
        await self.flush()
        return await self._call(self._producer.commit_transaction, *args, **kwargs)

    async def abort_transaction(self, *args: Any, **kwargs: Any) -> Any:
        """Flush (as confluent's), then abort."""
        await self.flush()
        return await self._call(self._producer.abort_transaction, *args, **kwargs)

    async def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``set_sasl_credentials``, in the executor."""
        return await self._call(self._producer.set_sasl_credentials, *args, **kwargs)

    async def _flush_buffer(self, target_topic: str | None = None) -> None:
        """Hand the buffer over to the producer, one flush at a time, in order."""
        async with self._order:
            processor = self._batch_processor
            if processor.is_buffer_empty():
                return
            taken = sum(
                1
                for m in processor._message_buffer
                if target_topic is None or m["topic"] == target_topic
            )
            try:
                await processor.flush_buffer(target_topic)
            except BaseException:
                _to_front(processor, taken)
                raise

    async def _call(self, blocking_task: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``blocking_task(*args, **kwargs)`` in the executor (confluent's ``_call``;
        ``self._producer.poll`` and the like reach the ``OrderedProducer``)."""
        return await async_call(self.executor, blocking_task, *args, **kwargs)


def _to_front(processor: ProducerBatchManager, count: int) -> None:
    """Move the last ``count`` buffered records (put back after a failure) to the front."""
    buffer, futures = processor._message_buffer, processor._buffer_futures
    if count <= 0 or len(buffer) < count:
        return
    processor._message_buffer = buffer[-count:] + buffer[:-count]
    processor._buffer_futures = futures[-count:] + futures[:-count]
