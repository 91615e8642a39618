"""The one module that touches confluent-kafka's private parts.

Three things ordered-kafka needs are not on confluent-kafka's public surface:

* admin types: ``confluent_kafka.admin`` exports ``OffsetSpec``, ``ConfigResource``,
  ``ResourceType``, ``NewPartitions`` and ``NewTopic`` without an ``__all__``, so a strict type
  checker sees them only in the private modules that define them;
* the serde builder (``confluent_kafka._serde_builder``): how confluent's
  ``SerializingProducer`` and ``DeserializingConsumer`` pop, build and close their serdes
  and hand them the cluster id; the serde wrappers run the same code to stay in step;
* the asyncio clients' parts (``confluent_kafka.aio``'s call helpers, the producer's
  buffer, batch executor and batch manager, ``asyncinit`` and the async serde builder),
  which :mod:`ordered.aio` reuses so that its clients behave as confluent's do;
* the C layout of ``Message``, which ``ordered/_fastconsume.c`` reads field by field
  (its ``MessageHead``): :func:`bind_message_layout` lets the compiled scan read
  messages only once a probe message reads back.

A confluent-kafka upgrade that moves one of them fails here, naming what moved, instead
of somewhere inside a client; ``tests/unit/test_confluent_private.py`` checks each part
(and the signatures the serde wrappers call) against the installed confluent-kafka.
"""

from __future__ import annotations

from importlib.metadata import version
from typing import Any, Final

from confluent_kafka import Message

try:
    from confluent_kafka._serde_builder import (
        AsyncSharedClusterIdResolver,
        SharedClusterIdResolver,
        async_build_serdes,
        async_close_serdes,
        build_serdes,
        close_serdes,
        maybe_await,
        pop_serde_props,
        propagate_async_cluster_id_resolver,
        propagate_cluster_id_resolver,
    )
    from confluent_kafka._util.asyncinit import asyncinit
    from confluent_kafka.admin._config import ConfigResource
    from confluent_kafka.admin._listoffsets import OffsetSpec
    from confluent_kafka.admin._resource import ResourceType
    from confluent_kafka.aio import _common as aio_common
    from confluent_kafka.aio.producer._buffer_timeout_manager import BufferTimeoutManager
    from confluent_kafka.aio.producer._kafka_batch_executor import ProducerBatchExecutor
    from confluent_kafka.aio.producer._producer_batch_processor import ProducerBatchManager
    from confluent_kafka.cimpl import NewPartitions, NewTopic
except ImportError as exc:  # an upgrade moved one: say which, and where to look
    raise ImportError(
        f"confluent-kafka {version('confluent-kafka')} moved a private part ordered-kafka "
        f"uses ({exc}); coordinator/kernel/confluent_private.py is the one module that "
        "imports them"
    ) from exc

__all__ = [
    "PRIVATE_PARTS",
    "AsyncSharedClusterIdResolver",
    "BufferTimeoutManager",
    "ConfigResource",
    "NewPartitions",
    "NewTopic",
    "OffsetSpec",
    "ProducerBatchExecutor",
    "ProducerBatchManager",
    "ResourceType",
    "SharedClusterIdResolver",
    "aio_common",
    "async_build_serdes",
    "async_close_serdes",
    "asyncinit",
    "bind_message_layout",
    "build_serdes",
    "close_serdes",
    "maybe_await",
    "pop_serde_props",
    "propagate_async_cluster_id_resolver",
    "propagate_cluster_id_resolver",
]

PRIVATE_PARTS: Final[tuple[tuple[str, str, str], ...]] = (
    ("confluent_kafka.admin._listoffsets", "OffsetSpec", "ListOffsets (the admin helper)"),
    ("confluent_kafka.admin._config", "ConfigResource", "a topic's cleanup.policy"),
    ("confluent_kafka.admin._resource", "ResourceType", "a topic's cleanup.policy"),
    ("confluent_kafka.cimpl", "NewPartitions", "CreatePartitions (expand)"),
    ("confluent_kafka.cimpl", "NewTopic", "CreateTopics (the tools' topics)"),
    ("confluent_kafka._serde_builder", "pop_serde_props", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "build_serdes", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "close_serdes", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "SharedClusterIdResolver", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "propagate_cluster_id_resolver", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "AsyncSharedClusterIdResolver", "ordered.aio"),
    ("confluent_kafka._serde_builder", "async_build_serdes", "ordered.aio"),
    ("confluent_kafka._serde_builder", "async_close_serdes", "ordered.aio"),
    ("confluent_kafka._serde_builder", "maybe_await", "ordered.aio"),
    ("confluent_kafka._serde_builder", "pop_serde_props", "ordered.aio"),
    ("confluent_kafka._serde_builder", "propagate_async_cluster_id_resolver", "ordered.aio"),
    ("confluent_kafka._util.asyncinit", "asyncinit", "ordered.aio"),
    ("confluent_kafka.aio._common", "async_call", "ordered.aio"),
    ("confluent_kafka.aio._common", "ReentryContext", "ordered.aio"),
    ("confluent_kafka.aio._common", "wrap_callback", "ordered.aio"),
    ("confluent_kafka.aio._common", "wrap_common_callbacks", "ordered.aio"),
    ("confluent_kafka.aio._common", "wrap_conf_callback", "ordered.aio"),
    (
        "confluent_kafka.aio.producer._buffer_timeout_manager",
        "BufferTimeoutManager",
        "ordered.aio",
    ),
    ("confluent_kafka.aio.producer._kafka_batch_executor", "ProducerBatchExecutor", "ordered.aio"),
    (
        "confluent_kafka.aio.producer._producer_batch_processor",
        "ProducerBatchManager",
        "ordered.aio",
    ),
)
"""``(module, name, what uses it)`` of every private name imported above."""

# Values no field of a fresh Message holds by chance: a misread field cannot match them.
_PROBE_PARTITION: Final = 4242
_PROBE_OFFSET: Final = 1_234_567_890_123
_PROBE_KEY: Final = b"probe"


def bind_message_layout(module: Any) -> bool:
    """Bind a compiled helper to confluent's ``Message`` layout if it reads back.

    Args:
        module: ``ordered._fastconsume`` (its ``bind(probe, partition, offset, key)``).

    Returns:
        Whether the helper reads this confluent-kafka's messages; when not, the caller
        keeps its pure-Python path.
    """
    probe = Message(topic="probe", partition=_PROBE_PARTITION, offset=_PROBE_OFFSET, key=_PROBE_KEY)
    return bool(module.bind(probe, _PROBE_PARTITION, _PROBE_OFFSET, _PROBE_KEY))
