"""The interested groups of a topic: whose committed offsets decide what may be trimmed.

A topic's *interested groups* are

* the registered ordered groups (an ``OrderedConsumer`` registers its group on every
  ordered topic it loads: ``{root}/groups/{g}/topics/{topic}``), and
* every consumer group with committed offsets on the topic (``list_consumer_groups``,
  then each group's committed offsets, read with an OffsetFetch of a client that never
  joins the group), unless :attr:`InterestSettings.registered_only` restricts the set
  to the first kind.

Two kinds of group hold nothing back: a plain group that never committed on the topic,
and an ``EMPTY`` group whose commits are older than :attr:`InterestSettings.stale_after_ms`
(default Kafka's own ``offsets.retention.minutes``, 7 days, after which Kafka itself
drops an empty group's offsets). Kafka does not say when an offset was committed, so
the age is measured from the first time the coordinator saw the offsets as they are
(:class:`~coordinator.kernel.store.GroupSeenRecord`): a group first seen now is never stale.

A group that committed on the topic but not on partition ``p`` has consumed nothing of
``p``: it holds ``p`` at offset 0. If any group's offsets cannot be read (or the group
list itself), :meth:`TopicInterest.min_committed` answers ``None`` ("unknown") for every
partition: KIP-68 counts such a failure as "min offset -1", and nothing is trimmed on a
guess. No interested group at all is also ``None``: nothing is known to be consumed.

A registered ordered group that has not committed on the topic yet has consumed nothing:
it holds every partition at offset 0 (a new group reading from ``earliest``, or an
exactly-once pipeline whose first transaction is still open, must not lose records to
a trim). It stops holding once it is stale: no member in Kafka (``EMPTY``, ``DEAD`` or
not listed) and registered longer ago than the stale setting.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Collection, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from coordinator.kernel.errors import OrderedKafkaError, RecordCorruptError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import GroupSeenRecord, LayoutStore

__all__ = [
    "DEFAULT_STALE_AFTER_MS",
    "GroupHold",
    "InterestSettings",
    "TopicInterest",
    "topic_interest",
]

_log = logging.getLogger(__name__)

READ_THREADS: Final = 8
"""Groups whose offsets are read at once: each group is one request, a cluster may have
thousands, and read one after the other they made a trim round last seconds."""

DEFAULT_STALE_AFTER_MS: Final = 7 * 24 * 60 * 60 * 1000
"""Kafka's default ``offsets.retention.minutes`` (10080) in milliseconds."""

ALL_GROUPS: Final = "*"
"""The key of :attr:`TopicInterest.unreadable` when the group list itself failed."""


@dataclass(frozen=True, slots=True)
class InterestSettings:
    """Which groups count.

    Attributes:
        registered_only: Count only the registered ordered groups.
        stale_after_ms: An ``EMPTY`` group whose offsets have not changed for this long
            holds nothing back.
    """

    registered_only: bool = False
    stale_after_ms: int = DEFAULT_STALE_AFTER_MS

    def __post_init__(self) -> None:
        if self.stale_after_ms < 0:
            raise ValueError(f"stale_after_ms must be >= 0, got {self.stale_after_ms}")


@dataclass(frozen=True, slots=True)
class GroupHold:
    """One group with committed offsets on the topic.

    Attributes:
        group: The consumer group id.
        state: Its state as Kafka lists it (``EMPTY``, ``STABLE``, ...).
        registered: Whether it is a registered ordered group of the topic.
        committed: Partition -> committed offset (partitions without a commit absent).
        stale: ``EMPTY`` with offsets unchanged for longer than the stale setting.
        seen_since: Unix time its offsets were first seen as they are (``None``: not
            tracked).
    """

    group: str
    state: str
    registered: bool
    committed: Mapping[int, int]
    stale: bool
    seen_since: float | None

    def position(self, partition: int) -> int:
        """Where the group stands on ``partition``: its commit, else 0 (nothing consumed)."""
        return self.committed.get(partition, 0)

    @property
    def reason(self) -> str:
        """Why the group holds trims back, in words an operator can act on."""
        if not self.committed:
            return (
                "registered ordered group with interest but no commit: holds every "
                "partition at 0 until it commits, or until it has no member and was "
                "registered longer ago than --stale-group-ms"
            )
        return "committed offsets" + (" (registered ordered group)" if self.registered else "")

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "group": self.group,
            "state": self.state,
            "registered": self.registered,
            "committed": {str(p): o for p, o in sorted(self.committed.items())},
            "stale": self.stale,
            "seen_since": self.seen_since,
            "reason": self.reason,
        }


@dataclass(frozen=True, slots=True)
class TopicInterest:
    """The interested groups of one topic at one moment.

    Attributes:
        topic: The topic.
        groups: Every group with commits on the topic that counts (stale ones included,
            marked; see :meth:`holding`).
        unreadable: Group id (or ``"*"`` for the group list) -> why its offsets could
            not be read. Non-empty means nothing may be trimmed.
    """

    topic: str
    groups: tuple[GroupHold, ...]
    unreadable: Mapping[str, str]

    @property
    def holding(self) -> tuple[GroupHold, ...]:
        """The groups that hold records back (not stale)."""
        return tuple(g for g in self.groups if not g.stale)

    def min_committed(self, partition: int) -> int | None:
        """The minimum committed offset of ``partition`` over the holding groups.

        ``None`` when it is unknown (some offsets unreadable) or when no group holds
        anything: then nothing is known to be consumed and nothing may be trimmed.
        """
        if self.unreadable:
            return None
        holding = self.holding
        if not holding:
            return None
        return min(g.position(partition) for g in holding)

    def minimum_holders(self, partition: int) -> tuple[GroupHold, ...]:
        """The holding groups that stand at :meth:`min_committed` of ``partition``.

        These are the groups that hold a consumed trim of ``partition`` where it is:
        empty when the minimum is unknown.
        """
        low = self.min_committed(partition)
        if low is None:
            return ()
        return tuple(g for g in self.holding if g.position(partition) == low)

    def holders(self, partition: int, offset: int) -> tuple[GroupHold, ...]:
        """The holding groups that have not committed ``partition`` up to ``offset``."""
        return tuple(g for g in self.holding if g.position(partition) < offset)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "topic": self.topic,
            "groups": [g.to_dict() for g in self.groups],
            "unreadable": dict(self.unreadable),
        }


def topic_interest(
    store: LayoutStore,
    admin: KafkaAdmin,
    topic: str,
    partitions: Iterable[int],
    settings: InterestSettings | None = None,
    observe: bool = False,
    now: float | None = None,
    listed: Mapping[str, str] | None = None,
    only: Collection[str] | None = None,
) -> TopicInterest:
    """Read the interested groups of ``topic`` and their commits on ``partitions``.

    Pass every partition of the topic: the stale clock compares the offsets read now
    with the ones seen before.

    Args:
        store: The layout store (registrations and seen records).
        admin: Kafka admin helpers.
        topic: The topic.
        partitions: Its partitions.
        settings: Which groups count (default :class:`InterestSettings`).
        observe: Record offsets seen for the first time (:class:`GroupSeenRecord`);
            the daemon does, one-off commands only read.
        now: The current unix time (default ``time.time()``).
        listed: The cluster's groups and states, if already listed this round
            (:meth:`KafkaAdmin.list_groups`); listed here otherwise.
        only: Read these groups alone (a command about one group): each group's
            offsets are one Kafka request, and a cluster may have thousands.

    Raises:
        StoreError: ZooKeeper failed (Kafka failures land in ``unreadable``).
    """
    settings = settings or InterestSettings()
    now = time.time() if now is None else now
    wanted = sorted(set(partitions))
    registered = store.registered_groups(topic)
    unreadable: dict[str, str] = {}
    if listed is None:
        try:
            listed = admin.list_groups()
        except OrderedKafkaError as exc:
            _log.warning("interest of %s: %s", topic, exc)
            return TopicInterest(topic, (), {ALL_GROUPS: str(exc)})
    candidates = set(registered) if settings.registered_only else set(listed) | registered
    if only is not None:
        candidates &= set(only)
    groups: list[GroupHold] = []
    for group, committed_or_error in _read_offsets(admin, sorted(candidates), topic, wanted):
        if isinstance(committed_or_error, OrderedKafkaError):
            _log.warning("interest of %s: group %s: %s", topic, group, committed_or_error)
            unreadable[group] = str(committed_or_error)
            continue
        committed = committed_or_error
        state = listed.get(group, "UNKNOWN")
        if not committed:
            if group in registered:
                hold = _registered_without_commits(store, group, topic, state, settings, now)
                if hold is not None:
                    groups.append(hold)
            continue  # a plain group that never committed on the topic holds nothing back
        seen = _seen(store, group, topic, committed, observe, now)
        stale = (
            state == "EMPTY"
            and seen is not None
            and (now - seen) * 1000.0 >= settings.stale_after_ms
        )
        groups.append(GroupHold(group, state, group in registered, committed, stale, seen))
    return TopicInterest(topic, tuple(groups), unreadable)


def _read_offsets(
    admin: KafkaAdmin, groups: list[str], topic: str, wanted: list[int]
) -> list[tuple[str, dict[int, int] | OrderedKafkaError]]:
    """Each group's committed offsets on ``wanted`` (or why not), in ``groups``' order."""

    def read(group: str) -> dict[int, int] | OrderedKafkaError:
        try:
            return admin.group_offsets(group, topic, wanted)
        except OrderedKafkaError as exc:
            return exc

    if len(groups) <= 1:
        return [(g, read(g)) for g in groups]
    # KafkaAdmin.committed_offsets allows calls for different groups in parallel threads.
    with ThreadPoolExecutor(min(READ_THREADS, len(groups)), "interest") as pool:
        return list(zip(groups, pool.map(read, groups), strict=True))


def _registered_without_commits(
    store: LayoutStore,
    group: str,
    topic: str,
    state: str,
    settings: InterestSettings,
    now: float,
) -> GroupHold | None:
    """A registered group with no commit yet: it holds at 0 until it is stale."""
    registered_at = store.group_registered_at(group, topic)
    idle = state in ("EMPTY", "DEAD", "UNKNOWN")
    if idle and (
        registered_at is None or (now - registered_at) * 1000.0 >= settings.stale_after_ms
    ):
        return None
    return GroupHold(group, state, True, {}, False, registered_at)


def _seen(
    store: LayoutStore,
    group: str,
    topic: str,
    committed: Mapping[int, int],
    observe: bool,
    now: float,
) -> float | None:
    """Since when ``committed`` is what the coordinator sees; ``None`` if never seen."""
    try:
        record = store.group_seen(group, topic)
    except RecordCorruptError as exc:
        # A corrupt record only loses the stale clock: the group keeps holding.
        _log.warning("%s", exc)
        record = None
    if record is not None and dict(record.offsets) == dict(committed):
        return record.changed_at
    if observe:
        store.put_group_seen(GroupSeenRecord(group, topic, dict(committed), now))
        return now
    return None
