"""Source offsets in Spark's Kafka shape: ``{"topic": {"0": 23, "1": 5}}``.

Spark stores a source offset as the JSON of the dict the reader returns and hands it
back parsed (partition keys become strings), and compares offsets by their JSON. So
every offset this source returns is canonical: topics sorted, partitions in numeric
order (as Spark's ``JsonUtils.partitionOffsets`` writes them), values plain ``int``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

from coordinator.kernel.errors import ConfigError

__all__ = ["Offsets", "from_spark", "to_json", "to_spark"]

Offsets = dict[str, dict[int, int]]
"""Topic -> partition -> offset (the next offset to read)."""


def to_spark(offsets: Mapping[str, Mapping[int, int]]) -> dict[str, dict[str, int]]:
    """The canonical dict Spark logs: topics sorted, partitions in numeric order."""
    return {
        topic: {str(p): int(offsets[topic][p]) for p in sorted(offsets[topic])}
        for topic in sorted(offsets)
    }


def from_spark(offset: Mapping[str, Any] | None) -> Offsets:
    """Parse an offset Spark hands back (string partition keys) into ints.

    Raises:
        ConfigError: Not an offset of this source (a checkpoint of another source).
    """
    if not offset:
        return {}
    out: Offsets = {}
    try:
        for topic, partitions in offset.items():
            out[str(topic)] = {int(p): int(o) for p, o in partitions.items()}
    except (AttributeError, TypeError, ValueError) as exc:
        raise ConfigError(
            f"the checkpointed offset {offset!r} is not an ordered-kafka offset "
            '(expected {"topic": {"0": 23}})'
        ) from exc
    return out


def to_json(offsets: Mapping[str, Mapping[int, int]]) -> str:
    """The offset's JSON as Spark writes it to the offset log (compact)."""
    return json.dumps(to_spark(offsets), separators=(",", ":"))
