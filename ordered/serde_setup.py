"""Building a wrapped client with its key and value serdes, for the serde wrappers.

:class:`~ordered.serializing.OrderedSerializingProducer` and
:class:`~ordered.deserializing.OrderedDeserializingConsumer` take their serdes out of
the configuration in the same way: confluent's own ``confluent_kafka._serde_builder``
code (through :mod:`coordinator.kernel.confluent_private`) pops the
``key.*``/``value.*`` properties and builds what is given as a builder, the wrapped
client is made from what is left, and its cluster id is handed to the serdes that ask
for it. This is that one sequence (:func:`build_with_serdes`); its asyncio twin
(:func:`async_build_with_serdes`) serves
:class:`~ordered.aio.serializing.OrderedAsyncSerializingProducer` and
:class:`~ordered.aio.deserializing.OrderedAsyncDeserializingConsumer`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

from coordinator.kernel.confluent_private import (
    AsyncSharedClusterIdResolver,
    SharedClusterIdResolver,
    async_build_serdes,
    async_close_serdes,
    build_serdes,
    close_serdes,
    pop_serde_props,
    propagate_async_cluster_id_resolver,
    propagate_cluster_id_resolver,
)

__all__ = ["async_build_with_serdes", "build_with_serdes"]


class _HasClusterId(Protocol):
    def cluster_id(self, timeout: float = ...) -> Any: ...


class _HasAsyncClusterId(Protocol):
    def cluster_id(self, *args: Any, **kwargs: Any) -> Awaitable[str]: ...


C = TypeVar("C", bound=_HasClusterId)
A = TypeVar("A", bound=_HasAsyncClusterId)


def build_with_serdes(
    conf: dict[str, Any],
    key_prop: str,
    value_prop: str,
    make_client: Callable[[dict[str, Any]], C],
) -> tuple[list[Any], list[Any], C]:
    """Pop and build the serdes named ``key_prop``/``value_prop``, then make the client.

    Args:
        conf: The application's configuration (not modified).
        key_prop: ``"key.serializer"`` or ``"key.deserializer"``.
        value_prop: ``"value.serializer"`` or ``"value.deserializer"``.
        make_client: Makes the wrapped client from the configuration without the serdes.

    Returns:
        ``([key_serde, value_serde], owned, client)``: ``owned`` are the serdes built
        here, for the wrapper to close when it closes.

    Raises:
        ValueError: A serde and its builder are both configured.
        Exception: Whatever ``make_client`` raises; the serdes built here are closed
            first (an error in closing them is dropped: the client's is the one to see).
    """
    specs, conf_copy = pop_serde_props(conf, key_prop, value_prop)
    serdes, owned, conf_copy = build_serdes(specs, conf_copy)
    try:
        client = make_client(conf_copy)
        propagate_cluster_id_resolver(SharedClusterIdResolver(client.cluster_id), serdes)
    except BaseException:
        # The constructor's own error is the one to see.
        with contextlib.suppress(Exception):
            close_serdes(owned)
        raise
    return serdes, owned, client


async def async_build_with_serdes(
    conf: dict[str, Any],
    key_prop: str,
    value_prop: str,
    make_client: Callable[[dict[str, Any]], A],
) -> tuple[list[Any], list[Any], A]:
    """:func:`build_with_serdes` for the asyncio wrappers: the serdes may be asyncio ones.

    The serdes are built with confluent's ``async_build_serdes`` and get an
    ``AsyncSharedClusterIdResolver`` over the client's (awaited) ``cluster_id``.

    Args:
        conf: The application's configuration (not modified).
        key_prop: ``"key.serializer"`` or ``"key.deserializer"``.
        value_prop: ``"value.serializer"`` or ``"value.deserializer"``.
        make_client: Makes the wrapped asyncio client from the configuration without
            the serdes (not awaited).

    Returns:
        ``([key_serde, value_serde], owned, client)``, as :func:`build_with_serdes`.

    Raises:
        ValueError: A serde and its builder are both configured.
        Exception: Whatever ``make_client`` raises; the serdes built here are closed
            first (an error in closing them is dropped: the client's is the one to see).
    """
    specs, conf_copy = pop_serde_props(conf, key_prop, value_prop)
    serdes, owned, conf_copy = await async_build_serdes(specs, conf_copy)
    try:
        client = make_client(conf_copy)
        propagate_async_cluster_id_resolver(AsyncSharedClusterIdResolver(client.cluster_id), serdes)
    except BaseException:
        # The constructor's own error is the one to see.
        with contextlib.suppress(Exception):
            await async_close_serdes(owned)
        raise
    return serdes, owned, client
