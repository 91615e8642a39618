"""What ``expand``, ``shrink`` and ``unadopt`` would change: ``--dry-run`` and refusals.

Reads ZooKeeper and Kafka only. A transition plan runs the same checks as the
controller (adopted, same topic id, nothing pending, the count in range) and lists the
edges of the key flow: an expansion's new partitions *receive* keys that their
ancestors *give*; a shrink's partitions above the new count *retire* and give their
keys back to their ancestors, which *receive* them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from coordinator.kernel.errors import LayoutError, NotAdoptedError, TransitionInProgressError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore, ProducerRecord, TopicRecord
from coordinator.kernel.topic_ids import check_topic_id
from linear_hash import key_flow

__all__ = [
    "TransitionPlan",
    "UnadoptPlan",
    "producers_refusal",
    "transition_plan",
    "transition_text",
    "unadopt_plan",
    "unadopt_text",
]


@dataclass(frozen=True)
class TransitionPlan:
    """An expansion or shrink as it would run now.

    Attributes:
        topic: The topic.
        kind: ``expand`` or ``shrink``.
        epoch: The epoch it would publish.
        from_active: The active count now.
        to_active: The requested count.
        edges: ``(giver, receiver)`` pairs of the key flow.
        receive: Partitions that would receive keys.
        give: Partitions that would give keys.
        retire: Partitions that would retire (a shrink), else empty.
        create: Kafka partitions that would be created (an expansion past the physical
            count), else empty.
        producers: Registered producers the barrier would wait for.
    """

    topic: str
    kind: str
    epoch: int
    from_active: int
    to_active: int
    edges: tuple[tuple[int, int], ...]
    receive: tuple[int, ...]
    give: tuple[int, ...]
    retire: tuple[int, ...]
    create: tuple[int, ...]
    producers: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "dry_run": True,
            "topic": self.topic,
            "kind": self.kind,
            "epoch": self.epoch,
            "from_active": self.from_active,
            "to_active": self.to_active,
            "edges": [list(e) for e in self.edges],
            "receive": list(self.receive),
            "give": list(self.give),
            "retire": list(self.retire),
            "create": list(self.create),
            "producers": list(self.producers),
        }


def transition_plan(
    store: LayoutStore, admin: KafkaAdmin, topic: str, to: int, kind: str
) -> TransitionPlan:
    """Check an ``expand``/``shrink`` request as the controller would; write nothing.

    Raises:
        NotAdoptedError, TopicIdMismatchError, UnknownTopicError, LayoutError,
        TransitionInProgressError: The request would be refused (the same errors as
            the command without ``--dry-run``).
        OrderedKafkaError: Kafka failed.
        StoreError: ZooKeeper failed or holds a bad record.
    """
    kafka = admin.describe_topic(topic)
    record = store.get_topic(topic)
    if record is None:
        raise NotAdoptedError(
            f"topic {topic} is not adopted (adopt it first: ordered adopt {topic})"
        )
    check_topic_id(record, kafka.topic_id)
    if record.pending is not None:
        raise TransitionInProgressError(
            f"transition in progress: epoch {record.pending} of {topic} (to "
            f"{record.active} partitions) is pending"
        )
    _check_range(record, to, kind)
    edges = tuple(key_flow(record.initial, record.active, to))
    retire = tuple(range(to, record.active)) if kind == "shrink" else ()
    return TransitionPlan(
        topic=topic,
        kind=kind,
        epoch=record.epoch + 1,
        from_active=record.active,
        to_active=to,
        edges=edges,
        receive=tuple(sorted({b for _, b in edges})),
        give=tuple(sorted({a for a, _ in edges})),
        retire=retire,
        create=tuple(range(kafka.partitions, to)),
        producers=tuple(sorted(store.producers(topic))),
    )


def _check_range(record: TopicRecord, to: int, kind: str) -> None:
    topic = record.topic
    if kind == "expand" and to <= record.active:
        raise LayoutError(
            f"expand needs --to above the active partition count {record.active} "
            f"of {topic}, got {to}"
        )
    if kind == "shrink" and to >= record.active:
        raise LayoutError(
            f"shrink needs --to below the active partition count {record.active} "
            f"of {topic}, got {to}"
        )
    if kind == "shrink" and to < record.initial:
        raise LayoutError(
            f"cannot shrink {topic} below its initial partition count "
            f"{record.initial} (got --to {to})"
        )


def transition_text(p: TransitionPlan) -> str:
    """The plan in plain lines."""
    edges = ", ".join(f"{a}->{b}" for a, b in p.edges) or "none"
    lines = [
        f"dry run: {p.kind} {p.topic} {p.from_active} -> {p.to_active} partitions as "
        f"epoch {p.epoch}; nothing was written",
        f"edges {edges}",
        f"receive {_ints(p.receive)}",
        f"give {_ints(p.give)}",
    ]
    if p.kind == "shrink":
        lines.append(f"retire {_ints(p.retire)} (drained, then trimmable)")
    if p.create:
        lines.append(f"create in Kafka partitions {_ints(p.create)}")
    lines.append(
        f"barrier waits for {len(p.producers)} producer(s)"
        + (f": {', '.join(p.producers)}" if p.producers else "")
    )
    return "\n".join(lines)


def _ints(values: tuple[int, ...]) -> str:
    return ", ".join(map(str, values)) or "none"


@dataclass(frozen=True)
class UnadoptPlan:
    """What ``unadopt`` would remove, and who it would break.

    Attributes:
        topic: The topic.
        record: The topic record (``None``: not adopted, nothing to do).
        epochs: How many epoch records would go.
        producers: The registered producers by id.
    """

    topic: str
    record: TopicRecord | None
    epochs: int
    producers: dict[str, ProducerRecord]

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "dry_run": True,
            "name": self.topic,
            "adopted": self.record is not None,
            "topic": None if self.record is None else self.record.to_dict(),
            "epochs": self.epochs,
            "producers": {k: v.to_dict() for k, v in sorted(self.producers.items())},
        }


def unadopt_plan(store: LayoutStore, topic: str) -> UnadoptPlan:
    """Read what ``unadopt`` would remove.

    Raises:
        StoreError: ZooKeeper failed or holds a bad record.
    """
    record = store.get_topic(topic)
    if record is None:
        return UnadoptPlan(topic, None, 0, {})
    return UnadoptPlan(topic, record, len(store.epochs(topic)), store.producers(topic))


def _producer_list(producers: dict[str, ProducerRecord]) -> str:
    return ", ".join(
        f"{pid} (host {r.host}, pid {r.pid}, client.id {r.client_id or '-'})"
        for pid, r in sorted(producers.items())
    )


def producers_refusal(topic: str, p: UnadoptPlan, forced: bool = False) -> str:
    """Why unadopting with registered producers breaks order (the refusal or warning)."""
    head = (
        f"unadopting {topic} with {len(p.producers)} producer(s) registered"
        if forced
        else f"refusing to unadopt {topic}: {len(p.producers)} producer(s) are registered"
    )
    text = (
        f"{head}: {_producer_list(p.producers)}. Without the layout they route by plain "
        "Kafka hashing over every partition, so a key written before and after lands in "
        "two partitions and loses its order, and consumers stop gating"
    )
    return text if forced else text + "; stop them first, or pass --force"


def unadopt_text(topic: str, p: UnadoptPlan) -> str:
    """The unadopt dry run in plain lines."""
    if p.record is None:
        return f"dry run: topic {topic} is not adopted; unadopt would do nothing"
    lines = [
        f"dry run: unadopt {topic} would remove its layout (active {p.record.active}, "
        f"epoch {p.record.epoch}) and {p.epochs} epoch record(s); nothing was written",
        "producers registered: " + (_producer_list(p.producers) or "none"),
    ]
    return "\n".join(lines)
