"""The records of every znode: frozen dataclasses stored as versioned JSON.

Every record serialises with :meth:`to_json` to UTF-8 JSON with sorted keys and a
``"version"`` (the class's :attr:`VERSION`), and parses with ``from_json(data, path)``,
which is strict: a record that is not JSON, has a ``version`` this code does not read,
lacks a field, has an extra field, or has a field of the wrong type raises
:class:`~coordinator.kernel.errors.RecordCorruptError` naming the znode path and the problem.
The schema is in ``docs/protocol.md``; the mechanism (checkers, versions, JSON) is
:mod:`coordinator.kernel.store.schema`.

Versions: a class reads its own :attr:`VERSION` and every older version listed in its
``_UPGRADES`` (each upgrade turns an older record into the current fields); a newer
version is refused with a message saying which versions this code reads. Two classes
have more than one version so far: :class:`TopicRecord` (version 2 added ``topic_id``;
version 1 records read as ``topic_id: null``, an adoption not bound to a topic id) and
:class:`ProducerRecord` (version 2 added ``language``, since JVM producers register
too; version 1 records, written only by Python producers, read as ``"python"``).
:class:`GroupMemberRecord` (a consumer's client and language, for ``describe --group``)
is new in version 1 and carries ``language`` from the start.

In Python, partition-keyed maps (``boundaries``, ``last_offsets``, ``waits``) use
``int`` keys; in JSON they are decimal strings. Constructors accept either and
normalise to ``int``, and list fields (``edges``, ``producers``) are normalised to
tuples, so records stay immutable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, TypeAlias

from coordinator.kernel.store.schema import (
    EPOCH_STATES,
    RECORD_VERSION,
    RETIRED_STATES,
    _algorithm,
    _Bad,
    _bool,
    _edges,
    _expired,
    _nonneg,
    _offsets,
    _opt_nonneg,
    _opt_time,
    _opt_topic_id,
    _owners,
    _positive,
    _Record,
    _retired_state,
    _state,
    _str,
    _str_tuple,
    _time,
    _timeouts,
    _Upgrade,
    _waits,
)

__all__ = [
    "EPOCH_STATES",
    "PRODUCER_LANGUAGES",
    "RECORD_VERSION",
    "RETIRED_STATES",
    "AckRecord",
    "AclPolicyRecord",
    "EpochRecord",
    "EpochsRecord",
    "GroupMemberRecord",
    "GroupRegistration",
    "GroupSeenRecord",
    "Interest",
    "ProducerRecord",
    "Progress",
    "RetentionRecord",
    "RetiredRecord",
    "TopicRecord",
]

EpochState: TypeAlias = Literal["pending", "sealed"]

PRODUCER_LANGUAGES = ("python", "java")
"""The values of ``ProducerRecord.language`` and ``GroupMemberRecord.language``: which
client library registered."""


def _language(value: Any) -> str:
    name = _str(value)
    if name not in PRODUCER_LANGUAGES:
        raise _Bad(f"unknown producer language {name!r} (known: {', '.join(PRODUCER_LANGUAGES)})")
    return name


def _member_language(value: Any) -> str:
    name = _str(value)
    if name not in PRODUCER_LANGUAGES:
        raise _Bad(f"unknown consumer language {name!r} (known: {', '.join(PRODUCER_LANGUAGES)})")
    return name


RetiredState: TypeAlias = Literal["draining", "trimmed"]


@dataclass(frozen=True)
class TopicRecord(_Record):
    """The current layout of an adopted topic, at ``{root}/topics/{topic}``.

    Attributes:
        topic: The Kafka topic.
        initial: ``N``, the partition count at adoption (>= 1).
        active: ``U``, the active partition count (>= ``initial``).
        epoch: The latest published epoch (>= 0).
        pending: The epoch still waiting to be sealed (always ``epoch``), or ``None``.
        physical: The partition count in Kafka (>= ``active``).
        algorithm: The key hash: ``murmur3``, ``murmur2`` or ``crc32``.
        ordered: KIP-253 ``enable.ordered.delivery``: route keys by the layout.
        compacted: The topic's ``cleanup.policy`` includes ``compact``.
        adopted_at: Unix time of the adoption.
        topic_id: Kafka's topic id of the topic this layout was adopted for (base64,
            as Kafka prints it); a topic deleted and created again under the same
            name has another id, and the layout does not apply to it. ``None``: an
            adoption by an older version (record version 1), not bound to an id.
    """

    VERSION: ClassVar[int] = 2

    topic: str
    initial: int
    active: int
    epoch: int
    pending: int | None
    physical: int
    algorithm: str
    ordered: bool
    compacted: bool
    adopted_at: float
    topic_id: str | None = None

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "topic_id": _opt_topic_id,
        "initial": _nonneg,
        "active": _nonneg,
        "epoch": _nonneg,
        "pending": _opt_nonneg,
        "physical": _nonneg,
        "algorithm": _algorithm,
        "ordered": _bool,
        "compacted": _bool,
        "adopted_at": _time,
    }
    # Version 1 (before topic ids): the adoption is not bound to a topic id.
    _UPGRADES: ClassVar[dict[int, _Upgrade]] = {1: lambda raw: {**raw, "topic_id": None}}

    def __post_init__(self) -> None:
        self._normalise()

    def _check_invariants(self) -> None:
        if self.initial < 1:
            raise ValueError(f"initial must be >= 1, got {self.initial}")
        if self.active < self.initial:
            raise ValueError(f"active {self.active} is below initial {self.initial}")
        if self.physical < self.active:
            raise ValueError(f"physical {self.physical} is below active {self.active}")
        if self.pending is not None and self.pending != self.epoch:
            raise ValueError(f"pending {self.pending} is not the latest epoch {self.epoch}")


@dataclass(frozen=True)
class EpochRecord(_Record):
    """One layout epoch, at ``{root}/topics/{topic}/epochs/{epoch:010d}``.

    Attributes:
        topic: The Kafka topic.
        epoch: The epoch number (>= 0; 0 is the adoption).
        initial: ``N``.
        from_active: ``U`` before the change.
        to_active: ``U`` after it; the layout of the epoch is
            ``Layout(initial, to_active, epoch)``.
        state: ``pending`` until the barrier passed, then ``sealed``.
        edges: ``linear_hash.key_flow(initial, from_active, to_active)``.
        boundaries: Partition -> offset: the receiving partitions' end offsets at
            publish, then the giving partitions' end offsets at seal.
        producers: The producer ids the barrier waits for.
        expired: Producer id -> unix time the controller saw its registration gone.
        created_at: Unix time of the publish.
        sealed_at: Unix time of the seal, ``None`` while pending.
        delivery_timeouts_ms: Producer id -> its ``delivery_timeout_ms`` as registered,
            so a controller that takes over after the registration is gone still knows
            how long the producer's records may take.
    """

    topic: str
    epoch: int
    initial: int
    from_active: int
    to_active: int
    state: EpochState
    edges: tuple[tuple[int, int], ...]
    boundaries: dict[int, int]
    producers: tuple[str, ...]
    expired: dict[str, float]
    created_at: float
    sealed_at: float | None
    delivery_timeouts_ms: dict[str, int] = field(default_factory=dict)

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "epoch": _nonneg,
        "initial": _nonneg,
        "from_active": _nonneg,
        "to_active": _nonneg,
        "state": _state,
        "edges": _edges,
        "boundaries": _offsets,
        "producers": _str_tuple,
        "expired": _expired,
        "created_at": _time,
        "sealed_at": _opt_time,
        "delivery_timeouts_ms": _timeouts,
    }

    def __post_init__(self) -> None:
        self._normalise()

    def _check_invariants(self) -> None:
        if self.initial < 1:
            raise ValueError(f"initial must be >= 1, got {self.initial}")
        if self.from_active < self.initial or self.to_active < self.initial:
            raise ValueError(
                f"active counts {self.from_active} -> {self.to_active} below initial {self.initial}"
            )
        if (self.state == "sealed") != (self.sealed_at is not None):
            raise ValueError(f"state {self.state!r} does not match sealed_at {self.sealed_at}")

    @property
    def sealed(self) -> bool:
        """Whether the epoch is sealed."""
        return self.state == "sealed"


@dataclass(frozen=True)
class EpochsRecord(_Record):
    """What an un-adopted topic remembers, at ``{root}/topics/{topic}/epochs``.

    ``ordered unadopt`` deletes every epoch but keeps their parent node with this
    record, so that a later adoption of the same name numbers its first epoch after
    every epoch ever published under it: an epoch number never names two layouts,
    and a client that missed the un-adoption can tell the new record is newer.
    While a topic is adopted the node's data is empty or a stale copy of this record
    (only read when the topic is not adopted).

    Attributes:
        topic: The Kafka topic.
        last_epoch: The last epoch of the removed layout.
    """

    topic: str
    last_epoch: int

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "last_epoch": _nonneg,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class ProducerRecord(_Record):
    """A live producer, at ``{root}/topics/{topic}/producers/{id}`` (ephemeral).

    Attributes:
        id: The producer id, unique per registration (the znode name).
        host: The producer's host name.
        pid: The producer's process id.
        delivery_timeout_ms: Its ``delivery.timeout.ms``: after its session ends, no
            record of it can be delivered later than this.
        registered_at: Unix time of the registration.
        client_id: Its ``client.id``.
        language: The client that registered: ``python`` (``OrderedProducer``) or
            ``java`` (the kafka-clients ``OrderedPartitioner`` and interceptor of
            ``jvm/``). Version 1 records (before JVM producers) read as ``python``.
    """

    VERSION: ClassVar[int] = 2

    id: str
    host: str
    pid: int
    delivery_timeout_ms: int
    registered_at: float
    client_id: str
    language: str = "python"

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "id": _str,
        "host": _str,
        "pid": _nonneg,
        "delivery_timeout_ms": _nonneg,
        "registered_at": _time,
        "client_id": _str,
        "language": _language,
    }
    # Version 1 (before JVM producers): only the Python producer registered.
    _UPGRADES: ClassVar[dict[int, _Upgrade]] = {1: lambda raw: {**raw, "language": "python"}}

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class AckRecord(_Record):
    """A producer's ack of an epoch, at ``.../epochs/{epoch:010d}/acks/{id}``.

    Attributes:
        id: The producer id (the znode name).
        epoch: The acked epoch.
        last_offsets: Partition -> last offset the producer wrote under an older
            epoch, where known.
        acked_at: Unix time of the ack.
    """

    id: str
    epoch: int
    last_offsets: dict[int, int]
    acked_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "id": _str,
        "epoch": _nonneg,
        "last_offsets": _offsets,
        "acked_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class Interest(_Record):
    """What one group member's closed gates wait on in one topic (position service).

    At ``{root}/groups/{g}/interest/{topic}/{member}`` (ephemeral).

    Attributes:
        member: The member (consumer) id.
        waits: Partition -> the committed offset it must reach.
        at: Unix time of the declaration.
    """

    member: str
    waits: dict[int, int]
    at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "member": _str,
        "waits": _waits,
        "at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class Progress(_Record):
    """The committed offset a group member published for one partition.

    At ``{root}/groups/{g}/progress/{topic}/{partition}``.

    Attributes:
        partition: The partition.
        offset: The committed offset.
        at: Unix time of the publication.
    """

    partition: int
    offset: int
    at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "partition": _nonneg,
        "offset": _nonneg,
        "at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class RetiredRecord(_Record):
    """The trim state of one retired partition, at ``.../topics/{topic}/retired/{p}``.

    Attributes:
        topic: The Kafka topic.
        partition: The retired partition (at or above the active count).
        epoch: The (sealed) shrink epoch that retired it.
        final_offset: Its boundary in that epoch: every record of the partition lies
            below it, and the drain monitor trims it to exactly this offset.
        state: ``draining`` (some interested group has not committed up to
            ``final_offset``) or ``trimmed`` (DeleteRecords to ``final_offset`` done).
        updated_at: Unix time of the last change.
        trimmed_at: Unix time of the trim, ``None`` while draining.
    """

    topic: str
    partition: int
    epoch: int
    final_offset: int
    state: RetiredState
    updated_at: float
    trimmed_at: float | None

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "partition": _nonneg,
        "epoch": _nonneg,
        "final_offset": _nonneg,
        "state": _retired_state,
        "updated_at": _time,
        "trimmed_at": _opt_time,
    }

    def __post_init__(self) -> None:
        self._normalise()

    def _check_invariants(self) -> None:
        if (self.state == "trimmed") != (self.trimmed_at is not None):
            raise ValueError(f"state {self.state!r} does not match trimmed_at {self.trimmed_at}")


@dataclass(frozen=True)
class RetentionRecord(_Record):
    """A topic's consumed-retention setting (KIP-68), at ``.../topics/{topic}/retention``.

    Attributes:
        topic: The Kafka topic.
        consumed_ms: Records that every interested group committed and that are older
            than this many milliseconds are trimmed by the daemon's sweep.
        updated_at: Unix time of the setting.
    """

    topic: str
    consumed_ms: int
    updated_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "topic": _str,
        "consumed_ms": _positive,
        "updated_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class GroupRegistration(_Record):
    """An ordered consumer group reading a topic, at ``{root}/groups/{g}/topics/{topic}``.

    Written once (persistent) by an ``OrderedConsumer`` that loads an ordered topic;
    the registered groups are the first set of a topic's interested groups.

    Attributes:
        group: The consumer group id.
        topic: The Kafka topic.
        registered_at: Unix time of the first registration.
    """

    group: str
    topic: str
    registered_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "group": _str,
        "topic": _str,
        "registered_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class GroupMemberRecord(_Record):
    """A live consumer of an ordered group, at ``{root}/groups/{g}/members/{member}``.

    Ephemeral; written by an ``OrderedConsumer`` (Python) or an ``OrderedKafkaConsumer``
    (Java) when it first loads an ordered topic with a ``group.id``. Read only by
    ``ordered describe --group``, which matches it to Kafka's members by client id: it
    never gates a record.

    Attributes:
        member: The member id of the position service (the znode name, percent-encoded).
        group: The consumer group id.
        client_id: Its ``client.id`` (the one Kafka reports for the member).
        host: Its host name.
        pid: Its process id.
        language: The client: ``python`` (``OrderedConsumer``) or ``java``
            (``OrderedKafkaConsumer``).
        registered_at: Unix time of the registration.
    """

    member: str
    group: str
    client_id: str
    host: str
    pid: int
    language: str
    registered_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "member": _str,
        "group": _str,
        "client_id": _str,
        "host": _str,
        "pid": _nonneg,
        "language": _member_language,
        "registered_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class GroupSeenRecord(_Record):
    """When the daemon last saw a group's committed offsets on a topic change.

    At ``{root}/groups/{g}/seen/{topic}``. Kafka does not report when an offset was
    committed, so the age of a group's commits is measured from the first time the
    coordinator saw them as they are now: an empty group is stale once ``changed_at``
    is older than the stale setting. Never seen means "changed now" (never stale).

    Attributes:
        group: The consumer group id.
        topic: The Kafka topic.
        offsets: Partition -> committed offset, as last seen.
        changed_at: Unix time the offsets were first seen as they are.
    """

    group: str
    topic: str
    offsets: dict[int, int]
    changed_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "group": _str,
        "topic": _str,
        "offsets": _offsets,
        "changed_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()


@dataclass(frozen=True)
class AclPolicyRecord(_Record):
    """Who may do what under a store root, at ``{root}/acl`` (``ordered acl apply``).

    Identities are ZooKeeper ACL ids, ``digest:USER:HASH`` or ``sasl:USER``. Every node
    the layer creates under the root gets the ACL this policy gives its path, and
    ``ordered acl apply`` sets it on every existing node.

    Attributes:
        coordinator: Identities with every permission on the whole tree.
        producers: May register themselves and create acks; read the rest.
        consumers: May register their groups and write their groups' interest and
            progress; read the rest.
        readers: May read.
        groups: Consumer group -> the consumer identities that own it; a group not
            listed is owned by the consumer identity that creates it first.
        applied_at: Unix time of the last ``acl apply``.
    """

    coordinator: tuple[str, ...]
    producers: tuple[str, ...]
    consumers: tuple[str, ...]
    readers: tuple[str, ...]
    groups: dict[str, tuple[str, ...]]
    applied_at: float

    _CHECKS: ClassVar[dict[str, Callable[[Any], Any]]] = {
        "coordinator": _str_tuple,
        "producers": _str_tuple,
        "consumers": _str_tuple,
        "readers": _str_tuple,
        "groups": _owners,
        "applied_at": _time,
    }

    def __post_init__(self) -> None:
        self._normalise()

    def _check_invariants(self) -> None:
        if not self.coordinator:
            raise ValueError("AclPolicyRecord.coordinator: at least one identity is needed")
