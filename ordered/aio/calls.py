"""How the asyncio clients reach the sync ordered clients: in the executor, one call at a time.

confluent's asyncio clients (``confluent_kafka.aio``) run every blocking call of their
sync client in a ``concurrent.futures`` executor. The ordered ones do the same with the
sync ordered clients, so every ordered part that waits (ZooKeeper's connection at
construction, the barrier's switch, the first-use topic check, layout checks, gate
waits) waits on an executor thread, never on the event loop, and no ordering rule is
written a second time here.

Three pieces, shared by the producer and the consumer:

* :class:`Built`: the sync client, made in the executor (its constructor connects to
  ZooKeeper and may wait seconds for it), reached only from executor threads;
* :class:`OneAtATime`: the per-client serialization of the consumer's calls.
  ``OrderedConsumer`` keeps Python state beside librdkafka's, which confluent's C gate
  does not cover, so two of its calls must never run at once; a call that the client's
  own callback makes (``on_assign`` calling ``assign``) is the one exception, as in
  confluent's gate;
* :class:`AsyncKeyListener`: KIP-253's key callbacks, which may be coroutines, awaited
  on the loop while the consumer's thread waits for them, in the order it calls them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
from collections.abc import Callable
from typing import Any, Generic, TypeVar

from coordinator.kernel.confluent_private import aio_common as _common
from ordered.listener import PartitionKeyRebalanceListener

__all__ = [
    "AsyncKeyListener",
    "Built",
    "Late",
    "OneAtATime",
    "ReentryContext",
    "async_call",
    "wrap_listener",
]

C = TypeVar("C")
T = TypeVar("T")

ReentryContext = _common.ReentryContext
"""confluent's identity of a call chain (what its C gate admits again), re-exported."""


async def async_call(
    executor: concurrent.futures.Executor, task: Callable[..., T], *args: Any, **kwargs: Any
) -> T:
    """Run ``task(*args, **kwargs)`` in ``executor`` and await it (confluent's helper)."""
    result: T = await _common.async_call(executor, task, *args, **kwargs)
    return result


class Built(Generic[C]):
    """A sync client made in the executor; :meth:`get` is for executor threads only.

    Args:
        executor: Where the constructor runs.
        make: The constructor (``OrderedProducer``, ``OrderedConsumer``, with its dict).
    """

    def __init__(self, executor: concurrent.futures.Executor, make: Callable[[], C]) -> None:
        self._future: concurrent.futures.Future[C] = executor.submit(make)

    def get(self) -> C:
        """The client, once made; raises what its constructor raised (every time)."""
        return self._future.result()

    def ready(self) -> C | None:
        """The client if it is made and its constructor succeeded, else ``None`` (never waits)."""
        future = self._future
        if future.done() and future.exception() is None:
            return future.result()
        return None

    async def wait(self) -> C:
        """Await the client (raises what its constructor raised)."""
        return await asyncio.wrap_future(self._future)


class Late(Generic[C]):
    """The sync client as its callers in the executor see it, before it is made.

    ``late.poll`` is a function that calls the client's ``poll`` when it runs (on an
    executor thread, once the client is made), so the asyncio client can hold what
    confluent's holds in ``_producer``/``_consumer`` from its constructor on. Each
    method's function is made once and kept: two reads of ``late.poll`` are the same
    object, as two reads of a bound method compare equal.

    Args:
        built: The client being made.
    """

    def __init__(self, built: Built[C]) -> None:
        self._built = built

    def __getattr__(self, name: str) -> Callable[..., Any]:
        if name.startswith("_"):
            raise AttributeError(name)  # no dunder or private lookups through the proxy
        built = self._built

        def forward(*args: Any, **kwargs: Any) -> Any:
            return getattr(built.get(), name)(*args, **kwargs)

        forward.__name__ = forward.__qualname__ = name
        self.__dict__[name] = forward
        return forward

    def __len__(self) -> int:
        """The client's ``len()`` once it is made, else 0 (never waits)."""
        made = self._built.ready()
        return len(made) if made is not None else 0  # type: ignore[arg-type]


class OneAtATime:
    """One call of a client at a time, re-entrant calls of its own callbacks admitted.

    confluent's ``AIOConsumer`` leaves the one-at-a-time rule to the C gate of the
    ``Consumer`` it holds; here the gate is on the event loop (an ``asyncio.Lock``, which
    admits waiters in the order they came), so waiting for a call in flight costs no
    executor thread. The identity a call presents to confluent's gate is confluent's
    (:class:`ReentryContext`), so the librdkafka calls the sync client makes are
    admitted exactly as an ``AIOConsumer``'s are.

    Args:
        executor: Where the calls run.
    """

    def __init__(self, executor: concurrent.futures.Executor) -> None:
        self._executor = executor
        self._lock = asyncio.Lock()
        self._holder = 0  # the identity of the call in flight (0: none)

    async def call(self, task: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Run ``task`` in the executor after the call in flight, or now if re-entrant."""
        identity = ReentryContext.get_or_generate_id()
        inner = ReentryContext.current_lock()

        def run() -> T:
            with ReentryContext.active(identity):
                return task(*args, **kwargs)

        if inner is not None and identity == self._holder:
            # A call from the client's own callback, while the call that ran the
            # callback waits for it: waiting for that call would never end.
            async with inner:  # siblings of one callback, one at a time (as confluent)
                return await async_call(self._executor, run)
        async with self._lock:
            self._holder = identity
            try:
                return await async_call(self._executor, run)
            finally:
                self._holder = 0


class AsyncKeyListener(PartitionKeyRebalanceListener):
    """The application's key listener, its coroutine methods awaited on the loop.

    The sync consumer calls the listener on an executor thread; a method that returns
    an awaitable is run on ``loop`` and that thread waits for it, so the consumer goes
    on (commits the boundary, delivers the next record) only after it has finished, and
    the callbacks run one after the other in the order the consumer calls them. A
    method that returns anything else ran on the executor thread, as in the sync
    consumer. The calls it makes back into the asyncio consumer are admitted as
    re-entrant (confluent's ``wrap_callback`` does the same for ``on_assign``).

    Args:
        loop: The event loop of the asyncio consumer.
        listener: The application's listener (a ``PartitionKeyRebalanceListener``, or
            any object with its two methods).
    """

    def __init__(self, loop: asyncio.AbstractEventLoop, listener: Any) -> None:
        self._loop = loop
        self.listener = listener

    def on_partition_key_maybe_revoked(self, partitions: list[Any]) -> None:
        """Run the application's ``on_partition_key_maybe_revoked`` (awaited if a coroutine)."""
        self._finish(self.listener.on_partition_key_maybe_revoked(partitions))

    def on_partition_key_assigned(self, partitions: list[Any]) -> None:
        """Run the application's ``on_partition_key_assigned`` (awaited if a coroutine)."""
        self._finish(self.listener.on_partition_key_assigned(partitions))

    def _finish(self, result: Any) -> None:
        if not inspect.isawaitable(result):
            return
        identity = ReentryContext.current_id()

        async def run() -> None:
            with ReentryContext.active(identity, asyncio.Lock()):
                await result

        asyncio.run_coroutine_threadsafe(run(), self._loop).result()


def wrap_listener(
    loop: asyncio.AbstractEventLoop, listener: Any | None
) -> PartitionKeyRebalanceListener | None:
    """``listener`` for the sync consumer (``None`` stays ``None``)."""
    return None if listener is None else AsyncKeyListener(loop, listener)
