"""The one module that touches confluent-kafka's private parts.

Three things ordered-kafka needs are not on confluent-kafka's public surface:

* admin types: ``confluent_kafka.admin`` exports ``OffsetSpec``, ``ConfigResource``,
  ``ResourceType`` and ``NewPartitions`` without an ``__all__``, so a strict type
  checker sees them only in the private modules that define them;
* the serde builder (``confluent_kafka._serde_builder``): how confluent's
  ``SerializingProducer`` and ``DeserializingConsumer`` pop, build and close their serdes
  and hand them the cluster id; the serde wrappers run the same code to stay in step;
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
        SharedClusterIdResolver,
        build_serdes,
        close_serdes,
        pop_serde_props,
        propagate_cluster_id_resolver,
    )
    from confluent_kafka.admin._config import ConfigResource
    from confluent_kafka.admin._listoffsets import OffsetSpec
    from confluent_kafka.admin._resource import ResourceType
    from confluent_kafka.cimpl import NewPartitions
except ImportError as exc:  # an upgrade moved one: say which, and where to look
    raise ImportError(
        f"confluent-kafka {version('confluent-kafka')} moved a private part ordered-kafka "
        f"uses ({exc}); coordinator/client/confluent_private.py is the one module that "
        "imports them"
    ) from exc

__all__ = [
    "PRIVATE_PARTS",
    "ConfigResource",
    "NewPartitions",
    "OffsetSpec",
    "ResourceType",
    "SharedClusterIdResolver",
    "bind_message_layout",
    "build_serdes",
    "close_serdes",
    "pop_serde_props",
    "propagate_cluster_id_resolver",
]

PRIVATE_PARTS: Final[tuple[tuple[str, str, str], ...]] = (
    ("confluent_kafka.admin._listoffsets", "OffsetSpec", "ListOffsets (the admin helper)"),
    ("confluent_kafka.admin._config", "ConfigResource", "a topic's cleanup.policy"),
    ("confluent_kafka.admin._resource", "ResourceType", "a topic's cleanup.policy"),
    ("confluent_kafka.cimpl", "NewPartitions", "CreatePartitions (expand)"),
    ("confluent_kafka._serde_builder", "pop_serde_props", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "build_serdes", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "close_serdes", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "SharedClusterIdResolver", "the serde wrappers"),
    ("confluent_kafka._serde_builder", "propagate_cluster_id_resolver", "the serde wrappers"),
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
