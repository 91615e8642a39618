"""Pure KIP-253 linear-hashing math: no I/O.

Key hashing (:func:`hash_key`), routing a hash or key to a partition (:class:`Router`,
the one home of the routing formula, and :func:`route`, :func:`partition_for`,
:class:`Layout`, which use it), the split tree (:func:`parent`,
:func:`children`), and which partitions feed and block which when the active
partition count changes (:func:`key_flow`, :func:`sources`, :func:`blockers`,
:func:`gate_plan`), and the gate rule every reader applies (:class:`GateEvaluator`).
"""

from linear_hash.flow import blockers, key_flow, sources
from linear_hash.gating import (
    EpochInfo,
    GateEvaluator,
    OffsetMaps,
    OffsetView,
    Wait,
    epoch_range,
    gate_plan,
)
from linear_hash.hashing import ALGORITHMS, DEFAULT_ALGORITHM, Key, hash_key, murmur2
from linear_hash.layout import LAYOUT_VERSION, Layout
from linear_hash.router import KeyRouter, Router
from linear_hash.routing import children, parent, partition_for, route

__all__ = [
    "ALGORITHMS",
    "DEFAULT_ALGORITHM",
    "LAYOUT_VERSION",
    "EpochInfo",
    "GateEvaluator",
    "Key",
    "KeyRouter",
    "Layout",
    "OffsetMaps",
    "OffsetView",
    "Router",
    "Wait",
    "blockers",
    "children",
    "epoch_range",
    "gate_plan",
    "hash_key",
    "key_flow",
    "murmur2",
    "parent",
    "partition_for",
    "route",
    "sources",
]
