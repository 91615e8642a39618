"""``ordered describe TOPIC [--group G | --all-groups]``.

The topic view starts with a short summary (layout, epoch, what is pending or retired
and why), then the detail: the record, every epoch, the producers, and each retired
partition (draining or trimmed, its final offset, the interested groups that hold it
back). The layout comes from ZooKeeper first; when Kafka does not answer within
``--kafka-timeout`` it is still shown, with a note that Kafka is unreachable.

The group view (``--group G``, or ``--all-groups``: every group with a commit on the
topic, and every registered ordered group that holds its trims without one) shows per
partition what the group waits on at the gates and its lag, like
``kafka-consumer-groups --describe``, then one line per member: its consumer id,
language (``python`` or ``java``; ``-`` for a plain Kafka consumer), host, client id and
partitions of the topic, and whether (and why) the group holds the topic's trims.
"""

from __future__ import annotations

import argparse
import socket
import time
from collections.abc import Sequence
from typing import Any

from coordinator.autoscale.report import autoscale_summary
from coordinator.control.adoption import adopted_topic_deleted
from coordinator.control.controller import (
    DEFAULT_DELIVERY_TIMEOUT_MS,
    EXPIRY_GRACE_S,
    barrier_status,
)
from coordinator.groups.group_status import GroupStatus, group_status, topic_groups
from coordinator.groups.interest import GroupHold, topic_interest
from coordinator.kernel.errors import OrderedKafkaError
from coordinator.kernel.kafka_admin import KafkaTopic, UnknownTopicError
from coordinator.kernel.store import EpochRecord, ProducerRecord, TopicRecord
from coordinator.kernel.topic_ids import check_topic_id
from coordinator.trims.retention import RetiredStatus, retired_status
from ordered.cli.connection import Connections, common_arguments, connect, topic_text
from ordered.cli.options import CommandLineError, interest_arguments, interest_settings, topic_name
from ordered.cli.output import emit
from ordered.cli.security import security_notes

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register ``describe``."""
    describe = sub.add_parser(
        "describe",
        help="show a topic's layout, epochs and producers, or where groups wait (--group, "
        "--all-groups)",
    )
    describe.add_argument("topic", metavar="TOPIC", type=topic_name, help="the Kafka topic")
    which = describe.add_mutually_exclusive_group()
    which.add_argument(
        "--group",
        default=None,
        metavar="G",
        help="show, per partition, what consumer group G waits on at the gates and its lag, "
        "and its members (consumer id, language, host, client id, partitions)",
    )
    which.add_argument(
        "--all-groups",
        action="store_true",
        help="as --group, for every consumer group with a commit on the topic",
    )
    interest_arguments(describe)
    common_arguments(describe, None)
    describe.set_defaults(func=_describe)


def _describe(args: argparse.Namespace) -> int:
    if args.group is not None or args.all_groups:
        return _describe_groups(args)
    with connect(args) as conn:
        payload, text = _topic_view(args, conn)
        notes = security_notes(conn.store, conn.store.get_topic(args.topic))
    payload["security"] = notes.to_dict()
    emit(payload, text + notes.text(), args.json)
    return 0


# --- the topic view ------------------------------------------------------------------


def _topic_view(args: argparse.Namespace, conn: Connections) -> tuple[dict[str, Any], str]:
    topic = args.topic
    store = conn.store
    # ZooKeeper first: the layout is shown even when Kafka does not answer.
    record = store.get_topic(topic)
    kafka: KafkaTopic | None = None
    kafka_error: str | None = None
    refused = _all_refuse(conn.admin.bootstrap_servers, args.kafka_timeout)
    try:
        if refused:
            # Every bootstrap server refuses connections: Kafka is down, and waiting
            # out --kafka-timeout would only delay the layout.
            raise OrderedKafkaError(
                f"Kafka at {conn.admin.bootstrap_servers}: {refused} (connection refused)"
            )
        kafka = conn.admin.describe_topic(topic, diagnose=False)
    except UnknownTopicError:
        if record is None:
            raise
        raise adopted_topic_deleted(topic) from None
    except OrderedKafkaError as exc:
        kafka_error = f"Kafka is unreachable: {exc}"
    if record is None:
        assert kafka is not None
        hint = _root_hint(conn)
        # Producers may register on a topic that is not adopted; show them as before.
        payload = _payload(
            topic, None, kafka, kafka_error, [], store.producers(topic), [], [], None
        )
        payload["hint"] = hint
        payload["partitions"] = _partition_rows(kafka, None, [])
        text = f"{topic}: not adopted; {kafka.partitions} partitions in Kafka" + (
            f"\nhint: {hint}" if hint else ""
        )
        return payload, text + "\n" + _partition_text(payload["partitions"])
    if kafka is not None:
        check_topic_id(record, kafka.topic_id)
    epochs = store.epochs(topic)
    producers = store.producers(topic)
    acks = sorted(store.acks(topic, record.pending)) if record.pending is not None else []
    retention = store.get_retention(topic)
    retention_ms = None if retention is None else retention.consumed_ms
    retired: list[RetiredStatus] = []
    if kafka is not None:
        retired = retired_status(store, conn.admin, topic, interest_settings(args))
    payload = _payload(
        topic, record, kafka, kafka_error, epochs, producers, acks, retired, retention_ms
    )
    summary = _summary(record, kafka, kafka_error, epochs, producers, acks, retired)
    payload["summary"] = summary
    detail = _detail(record, kafka, epochs, producers, acks)
    text = "\n".join(summary) + "\n\n" + detail
    payload["partitions"] = _partition_rows(kafka, record, retired)
    if kafka is not None:
        text += "\n" + _partition_text(payload["partitions"])
        text += "\n" + _retired_text(retired, retention_ms)
    autoscale, autoscale_text = autoscale_summary(store, topic)
    payload["autoscale"] = autoscale
    text += "\n" + autoscale_text
    return payload, text


def _all_refuse(bootstrap: str, timeout: float) -> str:
    """A reason when every server of ``bootstrap`` refuses a TCP connection, else ``""``.

    Only a refusal counts: a server that does not answer in time may be slow, and is
    left to the Kafka request and its timeout.
    """
    addresses = []
    for item in bootstrap.split(","):
        host, _, port = item.strip().rpartition("://")[2].rpartition(":")
        if not host or not port.isdigit():
            return ""
        addresses.append((host.strip("[]"), int(port)))
    for address in addresses:
        try:
            with socket.create_connection(address, timeout=min(1.0, timeout)):
                return ""
        except ConnectionRefusedError:
            continue
        except OSError:
            return ""
    return "no bootstrap server accepts connections"


def _root_hint(conn: Connections) -> str:
    """Why a topic may look not adopted: the store root holds nothing at all."""
    root = conn.store.root
    if conn.store.client.exists(root) is None:
        return (
            f"the store root {root} does not exist in ZooKeeper: is --root right? "
            "(nothing was ever adopted under it)"
        )
    if not conn.store.list_topics():
        return f"the store root {root} holds no adopted topic: is --root right?"
    return ""


def _payload(
    topic: str,
    record: TopicRecord | None,
    kafka: KafkaTopic | None,
    kafka_error: str | None,
    epochs: list[EpochRecord],
    producers: dict[str, ProducerRecord],
    acks: list[str],
    retired: list[RetiredStatus],
    retention_ms: int | None,
) -> dict[str, Any]:
    return {
        "name": topic,
        "adopted": record is not None,
        "topic": None if record is None else record.to_dict(),
        "kafka_partitions": None if kafka is None else kafka.partitions,
        "kafka_topic_id": None if kafka is None else kafka.topic_id,
        "kafka": {"reachable": kafka is not None, "error": kafka_error},
        "epochs": [e.to_dict() for e in epochs],
        "producers": {k: v.to_dict() for k, v in producers.items()},
        "pending_acks": list(acks),
        "retired": [r.to_dict() for r in retired],
        "consumed_retention_ms": retention_ms,
    }


def _summary(
    record: TopicRecord,
    kafka: KafkaTopic | None,
    kafka_error: str | None,
    epochs: list[EpochRecord],
    producers: dict[str, ProducerRecord],
    acks: list[str],
    retired: list[RetiredStatus],
) -> list[str]:
    physical = f"{kafka.partitions} in Kafka" if kafka is not None else "Kafka count unknown"
    flags = ("" if record.ordered else ", unordered") + (", compacted" if record.compacted else "")
    lines = [
        f"{record.topic}: {record.active} active partitions (initial {record.initial}, "
        f"{physical}), epoch {record.epoch}, {record.algorithm}{flags}"
    ]
    if kafka_error:
        lines.append(f"note: {kafka_error}; the layout below is ZooKeeper's only")
    pending = next((e for e in epochs if e.epoch == record.pending), None)
    if pending is None:
        lines.append("pending: nothing; every epoch is sealed")
    else:
        now = time.time()
        status = barrier_status(pending, set(acks), set(producers), now)
        waiting = []
        for pid in status.waiting:
            if pid in status.expired:
                left = max(0.0, _grace_end(pending, pid, status.expired) - now)
                waiting.append(f"{pid} (gone, {left:.0f} s of grace left)")
            else:
                waiting.append(pid)
        age = now - pending.created_at
        why = (
            f"waits for {len(waiting)} of {len(pending.producers)} producer(s) to ack: "
            + ", ".join(waiting)
            if waiting
            else "its barrier has passed; it seals at the next step of a controller"
        )
        lines.append(
            f"pending: epoch {pending.epoch} ({pending.from_active} -> {pending.to_active}), "
            f"published {age:.0f} s ago, {why}; `ordered coordinator` completes it"
        )
    draining = [r for r in retired if r.state != "trimmed"]
    if draining:
        parts = []
        for r in draining:
            held = ", ".join(g.group for g in r.holders)
            parts.append(f"{r.partition} {r.state}" + (f" (held by {held})" if held else ""))
        lines.append("retired: " + "; ".join(parts))
    trimmed = [r.partition for r in retired if r.state == "trimmed"]
    if trimmed:
        lines.append("trimmed: partitions " + ", ".join(map(str, trimmed)))
    lines.append(
        f"producers: {len(producers)} registered{_languages(producers)}; where a group "
        f"waits: ordered describe {record.topic} --group G (or --all-groups)"
    )
    return lines


def _languages(producers: dict[str, ProducerRecord]) -> str:
    """`` (2 python, 1 java)``: the clients behind the registrations, or nothing."""
    counts: dict[str, int] = {}
    for r in producers.values():
        counts[r.language] = counts.get(r.language, 0) + 1
    return f" ({', '.join(f'{n} {lang}' for lang, n in sorted(counts.items()))})" if counts else ""


def _grace_end(epoch: EpochRecord, pid: str, expired: dict[str, float]) -> float:
    ms = epoch.delivery_timeouts_ms.get(pid, DEFAULT_DELIVERY_TIMEOUT_MS)
    return expired[pid] + ms / 1000.0 + EXPIRY_GRACE_S


def _detail(
    record: TopicRecord,
    kafka: KafkaTopic | None,
    epochs: list[EpochRecord],
    producers: dict[str, ProducerRecord],
    acks: list[str],
) -> str:
    lines = [topic_text(record)]
    if kafka is not None:
        lines.append(f"kafka partitions {kafka.partitions}, kafka topic id {kafka.topic_id}")
    else:
        lines.append("kafka partitions unknown (Kafka unreachable)")
    if epochs and epochs[0].from_active != epochs[0].to_active:
        # Only an adoption's epoch leaves the count as it was: this history was compacted.
        lines.append(f"epochs before {epochs[0].epoch}: compacted (no record in Kafka needs them)")
    for e in epochs:
        boundaries = ", ".join(f"{p}@{o}" for p, o in e.boundaries.items())
        edges = ", ".join(f"{a}->{b}" for a, b in e.edges)
        lines.append(
            f"epoch {e.epoch} {e.state}: {e.from_active} -> {e.to_active}"
            + (f", edges {edges}" if edges else "")
            + (f", boundaries {boundaries}" if boundaries else "")
            + (f", producers {', '.join(e.producers)}" if e.producers else "")
        )
    lines.append(
        "producers "
        + (
            ", ".join(
                f"{pid} ({r.language}, host {r.host}, pid {r.pid}, client.id {r.client_id or '-'})"
                for pid, r in sorted(producers.items())
            )
            or "none"
        )
    )
    if record.pending is not None:
        lines.append(f"acks of epoch {record.pending}: {', '.join(acks) or 'none'}")
    return "\n".join(lines)


def _partition_rows(
    kafka: KafkaTopic | None, record: TopicRecord | None, retired: list[RetiredStatus]
) -> list[dict[str, Any]]:
    """Per partition in Kafka: its role in the layout, leader, replicas and ISR."""
    if kafka is None:
        return []
    states = {r.partition: r.state for r in retired}
    rows = []
    for r in kafka.replicas:
        if record is None:
            role = "plain"
        elif r.partition < record.active:
            role = "active"
        else:
            role = states.get(r.partition, "unused")
        rows.append({**r.to_dict(), "role": role})
    return rows


def _partition_text(rows: list[dict[str, Any]]) -> str:
    """The partitions as ``kafka-topics --describe`` lists them, with the layout role."""
    table = [("PARTITION", "ROLE", "LEADER", "REPLICAS", "ISR")] + [
        (
            str(r["partition"]),
            r["role"],
            "none" if r["leader"] is None else str(r["leader"]),
            ",".join(map(str, r["replicas"])),
            ",".join(map(str, r["isr"])),
        )
        for r in rows
    ]
    return "\n".join(_table(table))


def _retired_text(retired: list[RetiredStatus], retention_ms: int | None) -> str:
    lines = [f"consumed retention {'off' if retention_ms is None else f'{retention_ms} ms'}"]
    if not retired:
        lines.append("retired partitions none")
    for r in retired:
        head = (
            f"retired partition {r.partition} (epoch {r.epoch}): {r.state}, final offset "
            f"{r.final_offset}, log {r.log_start}..{r.end}"
        )
        if r.state != "draining":
            lines.append(head)
            continue
        held = ", ".join(
            f"{g.group} ({g.state.lower()}) at {g.committed.get(r.partition, 'none')}"
            for g in r.holders
        )
        lines.append(
            f"{head}; held by {held or 'nobody'}" + (f" ({r.unknown})" if r.unknown else "")
        )
    return "\n".join(lines)


# --- the group view ------------------------------------------------------------------


def _describe_groups(args: argparse.Namespace) -> int:
    if args.group is not None and not args.group:
        raise CommandLineError("--group needs a group id")
    with connect(args) as conn:
        count = conn.admin.describe_topic(args.topic).partitions
        # The interested groups, as a trim reads them: a registered ordered group that
        # never committed holds every trim at 0, and must be named where it does.
        interest = topic_interest(
            conn.store,
            conn.admin,
            args.topic,
            range(count),
            interest_settings(args),
            only=None if args.all_groups else [str(args.group)],
        )
        holds = {g.group: g for g in interest.holding}
        if args.all_groups:
            groups = sorted(set(topic_groups(conn.admin, args.topic, count)) | set(holds))
        else:
            groups = [str(args.group)]
        statuses = [group_status(conn.store, conn.admin, args.topic, g) for g in groups]
    now = time.time()
    payloads = []
    for s in statuses:
        payload = s.to_dict()
        hold = holds.get(s.group)
        payload["holds_trims"] = hold is not None
        payload["holds_reason"] = None if hold is None else hold.reason
        payloads.append(payload)
    texts = [_group_text(s, now, holds.get(s.group)) for s in statuses]
    if args.all_groups:
        text = "\n\n".join(texts) or (
            f"no consumer group has committed on {args.topic} or holds its trims"
        )
        emit({"topic": args.topic, "groups": payloads}, text, args.json)
    else:
        emit(payloads[0], texts[0], args.json)
    return 0


def _ago(since: float | None, now: float) -> str:
    if since is None:
        return ""
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(since))
    return f" since {stamp} ({max(0.0, now - since):.1f} s)"


def _group_text(status: GroupStatus, now: float, hold: GroupHold | None = None) -> str:
    lag = "-" if status.lag is None else str(status.lag)
    lines = [
        f"group {status.group} on topic {status.topic}: {status.state.lower()}, "
        f"{len(status.members)} member(s), lag {lag}, active {status.active}, "
        f"epoch {status.epoch}"
    ]
    if not status.exists:
        lines.append(
            f"note: consumer group {status.group} does not exist in Kafka (no member, no "
            "commit): shown is where it would start"
        )
    elif not status.committed_any:
        lines.append(
            f"note: group {status.group} exists but has never committed on {status.topic}: "
            "its consumers start at auto.offset.reset"
        )
    if hold is not None and not hold.committed:
        lines.append(f"holds trims: {hold.reason}")
    header = ("PARTITION", "ROLE", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "GATE")
    rows = [header]
    for p in status.partitions:
        rows.append(
            (
                str(p.partition),
                p.role,
                "-" if p.committed is None else str(p.committed),
                str(p.end),
                "-" if p.lag is None else str(p.lag),
                p.state,
            )
        )
    rows_members = [("CONSUMER-ID", "LANGUAGE", "HOST", "CLIENT-ID", "PARTITIONS")] + [
        (
            m.member_id,
            status.languages.get(m.member_id, "-"),
            m.host,
            m.client_id,
            ",".join(str(p) for p in sorted(p for t, p in m.assignment if t == status.topic))
            or "-",
        )
        for m in sorted(status.members, key=lambda m: m.member_id)
    ]
    lines += _table(rows)
    if len(rows_members) > 1:
        lines += _table(rows_members)
    for p in status.partitions:
        if p.gate is None:
            continue
        waits = ", ".join(
            f"epoch {w.epoch} seal"
            if w.partition < 0
            else f"{w.partition}@{w.offset} (committed "
            f"{'none' if w.committed is None else w.committed})"
            for w in p.waits
        )
        lines.append(
            f"partition {p.partition} ({p.role}): committed "
            f"{'none' if p.committed is None else p.committed}, log {p.log_start}..{p.end}, "
            f"{p.state} at {p.gate} (epoch {p.gate_epoch}){_ago(p.since, now)}: waits on {waits}"
        )
    return "\n".join(lines)


def _table(rows: Sequence[tuple[str, ...]]) -> list[str]:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    return ["  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in rows]
