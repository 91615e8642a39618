"""The records of the consumer barrier (``docs/consumer-barrier.md``) and of feature flags.

Same mechanism as :mod:`coordinator.kernel.store.records` (frozen dataclasses, strict
versioned JSON, :mod:`coordinator.kernel.store.schema`). They live in znodes under
``{root}/features`` and ``{root}/barrier``, which code of v0.5.0 and before never reads:
a mixed fleet never meets a record version it cannot read, and no existing record's
version changes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar, Final

from coordinator.kernel.store.schema import (
    _Bad,
    _bool,
    _expired,
    _nonneg,
    _positive,
    _Record,
    _str,
    _time,
)

__all__ = [
    "CONSUMER_BARRIER",
    "FEATURES",
    "FIRST_ADOPTION",
    "AnnouncementRecord",
    "BarrierAck",
    "BarrierRegistration",
    "FeatureRecord",
    "RewindAck",
]

CONSUMER_BARRIER: Final = "consumer-barrier"
"""The feature flag of the consumer barrier."""

FIRST_ADOPTION: Final = "first-adoption"
"""``changed_by`` of the consumer barrier's flag when a new root's first adoption turned it
on (:meth:`~coordinator.kernel.store.topics.TopicStore.create_topic`)."""

FEATURES: Final = (CONSUMER_BARRIER,)
"""Every feature flag this code knows (``ordered features``)."""


def _feature(value: Any) -> str:
    name = _str(value)
    if name not in FEATURES:
        raise _Bad(f"unknown feature {name!r} (known: {', '.join(FEATURES)})")
    return name


@dataclass(frozen=True)
class FeatureRecord(_Record):
    """A feature flag, at ``{root}/features/{feature}`` (no node: off).

    Attributes:
        feature: The feature's name (one of :data:`FEATURES`).
        enabled: Whether it is on.
        changed_at: Unix time of the last change.
        changed_by: Who changed it (``host:pid`` of the command).
    """

    feature: str
    enabled: bool
    changed_at: float
    changed_by: str

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "feature": _feature,
        "enabled": _bool,
        "changed_at": _time,
        "changed_by": _str,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class AnnouncementRecord(_Record):
    """An epoch a controller is about to publish.

    At ``{root}/barrier/topics/{topic}/announcement``.

    Producers never read it; a consumer that reads it stops relying on the barrier for
    the topic (it checks its fetches, as without the barrier) until it has read the
    epoch published, or the announcement withdrawn.

    Attributes:
        topic: The topic.
        id: Unique per announcement (a rewrite for another target gets a new one): an
            ack names it, so an ack of an older announcement never counts.
        epoch: The epoch number that will be published.
        to_active: Its active partition count.
        announced_at: Unix time of the announcement.
        evicted: Consumer id -> unix time until which the publish must wait for it: a
            consumer that did not ack within the bound, evicted (its member node
            deleted) then, plus its lease. Kept here so that a controller that takes
            over keeps the clock.
    """

    topic: str
    id: str
    epoch: int
    to_active: int
    announced_at: float
    evicted: dict[str, float]

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "id": _str,
        "epoch": _nonneg,
        "to_active": _positive,
        "announced_at": _time,
        "evicted": _expired,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class BarrierRegistration(_Record):
    """A consumer reading a topic.

    At ``{root}/barrier/topics/{topic}/consumers/{id}`` (ephemeral).

    Attributes:
        id: The consumer's barrier id (the znode name, also of its member node).
        group: Its ``group.id`` (empty: none).
        host: Its host name.
        pid: Its process id.
        lease_ms: How long it relies on one answered lease renewal: a controller that
            evicts it waits this long (plus a second) before it publishes.
        registered_at: Unix time of the registration.
    """

    id: str
    group: str
    host: str
    pid: int
    lease_ms: int
    registered_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "id": _str,
        "group": _str,
        "host": _str,
        "pid": _nonneg,
        "lease_ms": _positive,
        "registered_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class BarrierAck(_Record):
    """A consumer's ack of an announcement.

    At ``{root}/barrier/topics/{topic}/acks/{id}`` (ephemeral).

    Attributes:
        id: The consumer's barrier id.
        announcement: The acked announcement's ``id``.
        epoch: Its epoch.
        acked_at: Unix time of the ack.
    """

    id: str
    announcement: str
    epoch: int
    acked_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "id": _str,
        "announcement": _str,
        "epoch": _nonneg,
        "acked_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class RewindAck(_Record):
    """A consumer's ack of its group's rewind marker.

    At ``{root}/barrier/topics/{topic}/rewinds/{id}`` (ephemeral).

    Attributes:
        id: The consumer's barrier id.
        group: Its group.
        zxid: The marker's last-write zxid it has seen (and will act on before it
            judges another batch).
        acked_at: Unix time of the ack.
    """

    id: str
    group: str
    zxid: int
    acked_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "id": _str,
        "group": _str,
        "zxid": _nonneg,
        "acked_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()
