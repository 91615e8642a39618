"""Where a consumer group stands at the gates of an ordered topic (``describe --group``).

Reads the group's committed offsets and the log start and end offsets from Kafka, the
epoch history from the layout store, and the members' declared waits from the position
service, then applies the consumers' own gate rule (:class:`linear_hash.gating.GateEvaluator`)
at the group's committed position of every partition. Reads only; writes nothing.

For each partition the answer is the first closed gate at or past the group's position:

* ``open``: no closed gate ahead (every gate at or past the position is open);
* ``gated``: a closed gate lies ahead but no record has reached it yet;
* ``blocked``: records at or past a closed gate wait for delivery.

Like ``kafka-consumer-groups --describe`` it also shows each partition's lag (end
offset minus committed offset, ``None`` without a commit) and the member it is assigned
to (consumer id, host, client id), and the group's state. Each member's language
(``python``: an ``OrderedConsumer``; ``java``: an ``OrderedKafkaConsumer``) comes from the
members' records in the layout store (:class:`GroupMemberRecord`), matched to Kafka's
members by client id: ``None`` when no record has the member's client id (a plain Kafka
consumer, or an ordered consumer from before these records), or when records of that
client id name both languages. A group Kafka does not know
(no member, no commit anywhere) is reported with ``exists = False`` (the gates it would
meet from its first position are still shown); a group that exists but never committed
on the topic has ``committed = None`` on every partition.

A gate lists what it waits on: a source partition, the committed offset it needs and
the group's committed offset there now (``partition = -1`` stands for a pending epoch,
which waits for its seal). ``since`` is the earliest time a member of the group declared
one of those waits to the position service, else the time the gate's epoch was sealed
(or published, while pending).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from coordinator.kernel.errors import NotAdoptedError
from coordinator.kernel.history import TopicHistory
from coordinator.kernel.kafka_admin import GroupDescription, GroupMember, KafkaAdmin
from coordinator.kernel.positions import Interest, PositionService
from coordinator.kernel.store import EpochRecord, GroupMemberRecord, LayoutStore
from coordinator.kernel.topic_ids import check_topic_id
from linear_hash.gating import GateEvaluator, OffsetMaps, Wait

__all__ = [
    "GateWait",
    "GroupStatus",
    "PartitionStatus",
    "group_status",
    "member_languages",
    "topic_groups",
]

GateStateName = Literal["open", "gated", "blocked"]


@dataclass(frozen=True, slots=True)
class GateWait:
    """One piece of progress a closed gate needs.

    Attributes:
        partition: The source partition, or ``-1`` for a pending epoch.
        offset: The committed offset the group needs on it (``-1`` for a pending epoch).
        committed: The group's committed offset there now, ``None`` if none.
        epoch: The epoch whose gate needs it.
    """

    partition: int
    offset: int
    committed: int | None
    epoch: int

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "partition": self.partition,
            "offset": self.offset,
            "committed": self.committed,
            "epoch": self.epoch,
        }


@dataclass(frozen=True, slots=True)
class PartitionStatus:
    """The group's standing on one partition of the topic.

    Attributes:
        partition: The partition.
        role: ``active`` (below the active count) or ``retired``.
        committed: The group's committed offset, ``None`` if it has none.
        log_start: The partition's log start offset.
        end: The partition's end offset (high watermark).
        state: ``open``, ``gated`` or ``blocked`` (see the module docstring).
        gate: The boundary offset of the first closed gate, ``None`` when open.
        gate_epoch: The epoch of that gate, ``None`` when open.
        waits: What the gate waits on.
        since: Unix time the wait is known from (see the module docstring).
        lag: ``end - committed`` (``None`` without a commit).
        member: The member the partition is assigned to, ``None`` if none.
        language: That member's language (see the module docstring), ``None`` if unknown.
    """

    partition: int
    role: str
    committed: int | None
    log_start: int
    end: int
    state: GateStateName
    gate: int | None
    gate_epoch: int | None
    waits: tuple[GateWait, ...]
    since: float | None
    lag: int | None = None
    member: GroupMember | None = None
    language: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "partition": self.partition,
            "role": self.role,
            "committed": self.committed,
            "log_start": self.log_start,
            "end": self.end,
            "state": self.state,
            "gate": self.gate,
            "gate_epoch": self.gate_epoch,
            "waits": [w.to_dict() for w in self.waits],
            "since": self.since,
            "lag": self.lag,
            "consumer_id": None if self.member is None else self.member.member_id,
            "host": None if self.member is None else self.member.host,
            "client_id": None if self.member is None else self.member.client_id,
            "language": self.language,
        }


@dataclass(frozen=True, slots=True)
class GroupStatus:
    """A group's standing at the gates of one topic.

    Attributes:
        topic: The topic.
        group: The consumer group id.
        active: The topic's active partition count.
        epoch: The topic's current epoch.
        partitions: One entry per partition that exists in Kafka, ascending.
        state: The group's state in Kafka (``STABLE``, ``EMPTY``, ...).
        members: The group's members.
        languages: Member id -> its language (see the module docstring); a member of
            unknown language is absent.
    """

    topic: str
    group: str
    active: int
    epoch: int
    partitions: tuple[PartitionStatus, ...]
    state: str = "UNKNOWN"
    members: tuple[GroupMember, ...] = ()
    languages: Mapping[str, str] = field(default_factory=dict)

    @property
    def exists(self) -> bool:
        """Whether Kafka knows the group (``DEAD``: no member and no commit at all)."""
        return self.state != "DEAD"

    @property
    def committed_any(self) -> bool:
        """Whether the group has committed on any partition of the topic."""
        return any(p.committed is not None for p in self.partitions)

    @property
    def lag(self) -> int | None:
        """The total lag over the partitions with a commit (``None``: no commit)."""
        lags = [p.lag for p in self.partitions if p.lag is not None]
        return sum(lags) if lags else None

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "topic": self.topic,
            "group": self.group,
            "active": self.active,
            "epoch": self.epoch,
            "partitions": [p.to_dict() for p in self.partitions],
            "state": self.state,
            "members": [
                {
                    "consumer_id": m.member_id,
                    "host": m.host,
                    "client_id": m.client_id,
                    "language": self.languages.get(m.member_id),
                    "partitions": sorted(p for t, p in m.assignment if t == self.topic),
                }
                for m in self.members
            ],
            "exists": self.exists,
            "committed_any": self.committed_any,
            "lag": self.lag,
        }


def group_status(store: LayoutStore, admin: KafkaAdmin, topic: str, group: str) -> GroupStatus:
    """Describe where ``group`` stands at the gates of ``topic``.

    Raises:
        UnknownTopicError: The topic does not exist in Kafka.
        NotAdoptedError: The topic is not adopted.
        TopicIdMismatchError: The layout was adopted for another topic id.
        OrderedKafkaError: Kafka failed.
        StoreError: ZooKeeper failed or holds a bad record.
    """
    kafka = admin.describe_topic(topic)
    count = kafka.partitions
    record = store.get_topic(topic)
    if record is None:
        raise NotAdoptedError(
            f"topic {topic} is not adopted (adopt it first: ordered adopt {topic})"
        )
    check_topic_id(record, kafka.topic_id)
    epochs = {e.epoch: e for e in store.epochs(topic)}
    gates = TopicHistory.from_records(record, list(epochs.values())).gates()
    partitions = range(count)
    described = admin.describe_group(group)
    committed = admin.committed_offsets(group, topic, partitions)
    owners = _owners(described, topic)
    languages = member_languages(described.members, store.group_members(group))
    starts = admin.start_offsets(topic, partitions)
    ends = admin.end_offsets(topic, partitions)
    interest = PositionService(store.client, store.root, group).interest(topic)
    view = OffsetMaps(committed, starts)
    out = []
    for p in partitions:
        position = max(committed.get(p, starts[p]), starts[p])
        gate, gate_epoch, waits = _first_closed_gate(gates, p, position, view)
        state: GateStateName = "open"
        if gate is not None:
            state = "blocked" if ends[p] > gate else "gated"
        out.append(
            PartitionStatus(
                partition=p,
                role="active" if p < record.active else "retired",
                committed=committed.get(p),
                log_start=starts[p],
                end=ends[p],
                state=state,
                gate=gate,
                gate_epoch=gate_epoch,
                waits=tuple(
                    GateWait(w.partition, w.offset, committed.get(w.partition), w.epoch)
                    for w in waits
                ),
                since=_since(waits, gate_epoch, epochs, interest),
                lag=None if p not in committed else max(0, ends[p] - committed[p]),
                member=owners.get(p),
                language=None if p not in owners else languages.get(owners[p].member_id),
            )
        )
    return GroupStatus(
        topic,
        group,
        record.active,
        record.epoch,
        tuple(out),
        described.state,
        described.members,
        languages,
    )


def member_languages(
    members: Sequence[GroupMember], records: Sequence[GroupMemberRecord]
) -> dict[str, str]:
    """Member id -> language, for the members one language's records name by client id."""
    by_client: dict[str, set[str]] = {}
    for r in records:
        by_client.setdefault(r.client_id, set()).add(r.language)
    out = {}
    for m in members:
        found = by_client.get(m.client_id, set())
        if len(found) == 1:
            out[m.member_id] = next(iter(found))
    return out


def _owners(described: GroupDescription, topic: str) -> dict[int, GroupMember]:
    return {p: m for m in described.members for t, p in m.assignment if t == topic}


def topic_groups(admin: KafkaAdmin, topic: str, partitions: int) -> list[str]:
    """Every consumer group with a commit on ``topic`` (for ``--all-groups``), sorted.

    Raises:
        OrderedKafkaError: Kafka failed.
    """
    return sorted(
        g for g in admin.list_groups() if admin.group_offsets(g, topic, range(partitions))
    )


def _first_closed_gate(
    gates: GateEvaluator, partition: int, position: int, view: OffsetMaps
) -> tuple[int | None, int | None, list[Wait]]:
    """The lowest gate boundary at or past ``position`` that is closed, and its waits."""
    for boundary in sorted({b for b, _e in gates.gates_of(partition) if b >= position}):
        waits = gates.waiting_on(partition, boundary, view)
        if waits:
            return boundary, max(w.epoch for w in waits), waits
    return None, None, []


def _since(
    waits: Sequence[Wait],
    gate_epoch: int | None,
    epochs: Mapping[int, EpochRecord],
    interest: Mapping[str, Interest],
) -> float | None:
    if gate_epoch is None:
        return None
    declared = [
        i.at
        for i in interest.values()
        for w in waits
        if w.partition >= 0 and i.waits.get(w.partition, -1) >= w.offset
    ]
    if declared:
        return min(declared)
    record = epochs.get(gate_epoch)
    if record is None:
        return None
    return record.sealed_at if record.sealed_at is not None else record.created_at
