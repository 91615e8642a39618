"""``OrderedAIOConsumer``: confluent's ``AIOConsumer`` over ``OrderedConsumer``.

confluent's ``confluent_kafka.aio.AIOConsumer`` runs each call of its ``Consumer`` in an
executor and returns an awaitable. This class does the same with an
:class:`~ordered.consumer.OrderedConsumer`: the same constructor (``consumer_conf``,
``max_workers``, ``executor``), methods, awaitables, callbacks (coroutine functions,
run on the loop, rebalance callbacks given this object) and errors. Every gate, check
and boundary is the ``OrderedConsumer``'s; what waits (gate waits, layout checks, the
ZooKeeper connection at construction) waits on an executor thread.

Calls run one at a time (:class:`~ordered.aio.calls.OneAtATime`), except those that
the consumer's own callbacks make while it waits for them. ``subscribe`` also takes
``key_listener``, whose methods may be coroutine functions (awaited on the loop, one
after the other, in the order the consumer calls them).

A ZooKeeper that cannot be reached (``StoreUnavailableError``) is raised by the first
call, not by the constructor, which never blocks the loop; a ``ConfigError`` is raised
by the constructor.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
from typing import Any

from coordinator.kernel.confluent_private import aio_common as _common
from ordered.aio.calls import Built, Late, OneAtATime, wrap_listener
from ordered.consumer import OrderedConsumer
from ordered.consumer_config import split_consumer_config

__all__ = ["OrderedAIOConsumer"]


class OrderedAIOConsumer:
    """An asyncio :class:`~ordered.consumer.OrderedConsumer`, as confluent's ``AIOConsumer``.

    Must be made inside a running event loop (as confluent's).

    Args:
        consumer_conf: ``OrderedConsumer``'s configuration (confluent's keys plus the
            ``ordered.`` settings); ``error_cb``, ``throttle_cb``, ``stats_cb`` and
            ``on_commit`` are coroutine functions, run on the loop. Not modified.
        max_workers: Threads of the executor made here (ignored with ``executor``).
        executor: An executor to use instead (it is not shut down by :meth:`close`).

    Raises:
        ValueError: ``max_workers`` below 1.
        ConfigError: A malformed ``ordered.`` setting.
    """

    def __init__(
        self,
        consumer_conf: dict[str, Any],
        max_workers: int = 100,
        executor: concurrent.futures.Executor | None = None,
    ) -> None:
        self._closed = False
        self._owns_executor = False
        split_consumer_config(consumer_conf)  # refuse a bad setting here, not in a thread
        if executor is not None:
            self.executor = executor
        else:
            if max_workers < 1:
                raise ValueError("max_workers must be at least 1")
            self.executor = concurrent.futures.ThreadPoolExecutor(max_workers=max_workers)
            self._owns_executor = True
        loop = asyncio.get_running_loop()
        conf = dict(consumer_conf)
        _common.wrap_common_callbacks(loop, conf)
        _common.wrap_conf_callback(loop, conf, "on_commit")
        self._built: Built[OrderedConsumer] = Built(self.executor, lambda: self._sync_client(conf))
        self._consumer: Late[OrderedConsumer] = Late(self._built)
        self._calls = OneAtATime(self.executor)
        self._face: Any = self  # what rebalance callbacks get (the deserializing one: itself)

    def _sync_client(self, conf: dict[str, Any]) -> OrderedConsumer:
        """Make the sync client (in the executor). confluent's test suite, run against
        this class, makes it through ``confluent_kafka.Consumer`` instead, which its
        tests replace with a mock."""
        return OrderedConsumer(conf)

    async def __aenter__(self) -> OrderedAIOConsumer:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.close()

    @property
    def consumer(self) -> OrderedConsumer:
        """The wrapped ``OrderedConsumer`` (``gate_status``, ``metrics``...); it blocks.

        Raises:
            RuntimeError: It is not made yet (or its constructor raised).
        """
        made = self._built.ready()
        if made is None:
            raise RuntimeError("the OrderedConsumer is not made yet: await a call first")
        return made

    async def _call(self, blocking_task: Any, *args: Any, **kwargs: Any) -> Any:
        """Run ``blocking_task(*args, **kwargs)`` in the executor, one call at a time
        (confluent's ``_call``; ``self._consumer.poll`` and the like reach the
        ``OrderedConsumer``)."""
        if self._closed:
            raise RuntimeError("Consumer closed")
        return await self._calls.call(blocking_task, *args, **kwargs)

    async def poll(self, *args: Any, **kwargs: Any) -> Any:
        """One message, as ``OrderedConsumer.poll`` (prefer :meth:`consume` for throughput)."""
        return await self._call(self._consumer.poll, *args, **kwargs)

    async def consume(self, *args: Any, **kwargs: Any) -> Any:
        """A batch of messages, as ``OrderedConsumer.consume``."""
        return await self._call(self._consumer.consume, *args, **kwargs)

    def _edit_rebalance_callbacks_args(self, args: tuple[Any, ...]) -> tuple[Any, ...]:
        return (self._face, *args[1:])

    async def subscribe(self, *args: Any, **kwargs: Any) -> Any:
        """Subscribe; ``on_assign``/``on_revoke``/``on_lost`` and ``key_listener`` may be given.

        The rebalance callbacks are coroutine functions (confluent's rule); the key
        listener's methods may be coroutine functions or plain ones.
        """
        loop = asyncio.get_running_loop()
        for callback in ("on_assign", "on_revoke", "on_lost"):
            if callback in kwargs:
                kwargs[callback] = _common.wrap_callback(
                    loop, kwargs[callback], self._edit_rebalance_callbacks_args
                )
        if "key_listener" in kwargs:
            kwargs["key_listener"] = wrap_listener(loop, kwargs["key_listener"])
        return await self._call(self._consumer.subscribe, *args, **kwargs)

    async def unsubscribe(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``unsubscribe``."""
        return await self._call(self._consumer.unsubscribe, *args, **kwargs)

    async def commit(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.commit`` (confluent's arguments)."""
        return await self._call(self._consumer.commit, *args, **kwargs)

    async def close(self, *args: Any, **kwargs: Any) -> Any:
        """Close the ``OrderedConsumer`` (it commits and leaves ZooKeeper), then the executor.

        A consumer whose constructor failed has nothing to close.
        """
        try:
            try:
                await self._built.wait()
            except Exception:
                return None
            return await self._call(self._consumer.close, *args, **kwargs)
        finally:
            self._closed = True
            if self._owns_executor:
                await asyncio.get_running_loop().run_in_executor(None, self.executor.shutdown, True)

    async def seek(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.seek``."""
        return await self._call(self._consumer.seek, *args, **kwargs)

    async def pause(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.pause``."""
        return await self._call(self._consumer.pause, *args, **kwargs)

    async def resume(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.resume``."""
        return await self._call(self._consumer.resume, *args, **kwargs)

    async def store_offsets(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.store_offsets``."""
        return await self._call(self._consumer.store_offsets, *args, **kwargs)

    async def committed(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.committed``."""
        return await self._call(self._consumer.committed, *args, **kwargs)

    async def assign(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.assign`` (gates apply)."""
        return await self._call(self._consumer.assign, *args, **kwargs)

    async def unassign(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.unassign``."""
        return await self._call(self._consumer.unassign, *args, **kwargs)

    async def incremental_assign(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.incremental_assign`` (gates apply)."""
        return await self._call(self._consumer.incremental_assign, *args, **kwargs)

    async def incremental_unassign(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.incremental_unassign``."""
        return await self._call(self._consumer.incremental_unassign, *args, **kwargs)

    async def assignment(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``assignment``."""
        return await self._call(self._consumer.assignment, *args, **kwargs)

    async def position(self, *args: Any, **kwargs: Any) -> Any:
        """``OrderedConsumer.position``."""
        return await self._call(self._consumer.position, *args, **kwargs)

    async def consumer_group_metadata(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``consumer_group_metadata``."""
        return await self._call(self._consumer.consumer_group_metadata, *args, **kwargs)

    async def set_sasl_credentials(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``set_sasl_credentials``."""
        return await self._call(self._consumer.set_sasl_credentials, *args, **kwargs)

    async def list_topics(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``list_topics``."""
        return await self._call(self._consumer.list_topics, *args, **kwargs)

    async def cluster_id(self, *args: Any, **kwargs: Any) -> str:
        """confluent's ``cluster_id``."""
        found: str = await self._call(self._consumer.cluster_id, *args, **kwargs)
        return found

    async def get_watermark_offsets(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``get_watermark_offsets``."""
        return await self._call(self._consumer.get_watermark_offsets, *args, **kwargs)

    async def offsets_for_times(self, *args: Any, **kwargs: Any) -> Any:
        """confluent's ``offsets_for_times``."""
        return await self._call(self._consumer.offsets_for_times, *args, **kwargs)
