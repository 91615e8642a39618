"""Hooks for the producer and the consumer: event protocols and the Prometheus hook.

Give hooks to a client in its configuration dict, as confluent takes its callbacks::

    from ordered.hooks import PrometheusHooks
    metrics = PrometheusHooks(registry)            # one per registry, shared by clients
    consumer = OrderedConsumer({..., "ordered.hooks": [metrics]})

A hook is any object with one or more of the ``on_...`` methods of the protocols below
(:mod:`coordinator.kernel.hooks` documents every event, its arguments and its thread).
"""

from __future__ import annotations

from coordinator.kernel.hooks import (
    CONSUMER_HOOKS,
    PRODUCER_HOOKS,
    THREAD_HOOKS,
    HookAnnouncement,
    HookBarrierAck,
    HookGateBlocked,
    HookGateCheck,
    HookGateDropped,
    HookGateOpened,
    HookLayoutCheck,
    HookLayoutReload,
    HookRecordsDelivered,
    HookRecordsHeld,
    HookRouteSwitch,
    HookThreadRestart,
    HookThreadState,
    HookTombstoneCopy,
    HookTombstoneCopySent,
    HookViolation,
)
from coordinator.kernel.prometheus import PrometheusHooks
from ordered.consumer.counters import METRICS, ConsumerCounters

__all__ = [
    "CONSUMER_HOOKS",
    "METRICS",
    "PRODUCER_HOOKS",
    "THREAD_HOOKS",
    "ConsumerCounters",
    "HookAnnouncement",
    "HookBarrierAck",
    "HookGateBlocked",
    "HookGateCheck",
    "HookGateDropped",
    "HookGateOpened",
    "HookLayoutCheck",
    "HookLayoutReload",
    "HookRecordsDelivered",
    "HookRecordsHeld",
    "HookRouteSwitch",
    "HookThreadRestart",
    "HookThreadState",
    "HookTombstoneCopy",
    "HookTombstoneCopySent",
    "HookViolation",
    "PrometheusHooks",
]
