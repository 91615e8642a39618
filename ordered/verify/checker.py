"""The checker of verifiable runs: order, loss and duplicates, from histories alone.

It reads the events of :mod:`ordered.verify.history` and checks, for each group:

* **first deliveries in order**: for each (producer, key), the records delivered to the
  group for the first time come in the order the producer sent them (increasing
  sequence). A redelivery after a crash or a rewind is not a first delivery;
* **every pass in order**: the same, counting only the first delivery of each record
  within one pass. A pass is what one reader delivers between two changes of its
  assignment or seeks (the reader numbers them), and, for a group whose offsets were
  reset while none of its members ran, everything the group delivers after the reset;
* **nothing lost**: every record a producer's delivery report acked was delivered to
  the group (for the groups that must be complete). A lost record below a log start
  offset seen in the history is reported as trimmed before the group delivered it;
* **duplicates**: deliveries beyond the first, counted (at-least-once allows them);
* **no commit past an undelivered record** (``committed_past_undelivered``): for the
  groups that must be complete, except the exactly-once groups (they read another
  topic, whose offsets are not the acks'), every commit a ``cmt`` event records (a
  reader's own commits, the consumer's boundary commits, the committed offsets a
  reader read back before it closed) is compared with the acked records of its
  partition. An acked record at ``(partition, offset)`` is reported when some
  commit of the group on that partition is *higher* than ``offset`` (the committed
  offset is the next record to read: everything below it counts as consumed) while
  no member of the group had delivered that place at or before the commit's time.
  Each record is reported once per group, with the first commit that passed it.
  Deliveries are recorded before their commits (:mod:`ordered.verify.reader`), so a
  commit of records the group delivered never counts, whoever delivered them.
  A commit at or below the record never counts: the lower commits of a seek back, a
  rewind or an offset reset (the ``replay`` group) pass nothing, and the later,
  higher commits of a replay pass only records the group delivered before. A record
  delivered *after* a commit passed it is still reported (at that time the group
  counted as consumed a record no member had delivered: a crash then would have
  lost it; ``delivered_later`` in the sample), and a record that was never
  delivered is reported here as well as lost: whether or not a trim removed it
  later, the commit names how it was lost. A commit's time is when the reader
  recorded it (after the commit returned, or when it read the offsets back), never
  earlier than the commit itself, so a later delivery is never mistaken for an
  earlier one. Only the commits the histories record are checked: a group that
  recorded none (Spark, the JVM readers) has no ``commits`` in its figures. With
  ``topic`` given, commits on other topics are left out.

Every violation names the key, the producer, both records' sequences, partitions,
offsets and epochs, who delivered them and in which pass. The checker is pure: no
Kafka, no ZooKeeper, only the events.
"""

from __future__ import annotations

import sys
from bisect import bisect_right
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from typing import Any, NamedTuple

__all__ = ["Delivery", "PauseProof", "Verdict", "Violation", "check"]

MAX_REPORTED = 50
"""Violations, lost records and records committed past listed in full per kind; the
counts are always exact."""


class Delivery(NamedTuple):
    """One delivery of a record to a group, as a reader recorded it."""

    ts: int
    producer: str
    key: str
    seq: int
    partition: int
    offset: int
    epoch: int
    reader: str
    pass_no: int

    def describe(self) -> dict[str, Any]:
        """The delivery as a JSON-ready dict."""
        return {
            "seq": self.seq,
            "partition": self.partition,
            "offset": self.offset,
            "epoch": self.epoch,
            "reader": self.reader,
            "pass": self.pass_no,
        }


@dataclass(frozen=True)
class Violation:
    """A record delivered after a later record of the same (producer, key).

    Attributes:
        check: ``first-delivery``, ``reader-pass`` or ``reset-pass``.
        group: The consumer group.
        producer: The producer id.
        key: The record key.
        record: The record delivered too late (seq, partition, offset, epoch, reader, pass).
        after: The later record (higher sequence) delivered before it.
        scope: The pass (``reader#n`` or ``reset@ts``), empty for first deliveries.
    """

    check: str
    group: str
    producer: str
    key: str
    record: dict[str, Any]
    after: dict[str, Any]
    scope: str = ""

    def to_dict(self) -> dict[str, Any]:
        """The violation as a JSON-ready dict."""
        return asdict(self)

    def __str__(self) -> str:
        r, a = self.record, self.after
        where = f" in {self.scope}" if self.scope else ""
        return (
            f"{self.check}{where}: group {self.group} key {self.key!r} producer {self.producer}: "
            f"seq {r['seq']} (partition {r['partition']} offset {r['offset']} epoch "
            f"{r['epoch']}, by {r['reader']}) came after seq {a['seq']} (partition "
            f"{a['partition']} offset {a['offset']} epoch {a['epoch']}, by {a['reader']})"
        )


@dataclass(frozen=True)
class PauseProof:
    """What happened to a group while all of its members were stopped.

    Attributes:
        group: The group.
        paused_s: Seconds its members were stopped, over all pauses.
        trims: Log start advances (trims) seen on any partition during its pauses.
        lost: Acked records the group never got (0: no trim removed one it needed).
    """

    group: str
    paused_s: float
    trims: int
    lost: int


@dataclass
class Verdict:
    """The checker's answer.

    Attributes:
        records: Records acked by producers.
        nacked: Records whose delivery failed (not required anywhere).
        groups: Per group: ``delivered`` (distinct records), ``deliveries``,
            ``duplicates``, ``replayed`` (deliveries in reset or seek passes that repeat
            a record), ``copies`` (records delivered from two places), ``lost``; for a
            group whose commits were checked also ``commits`` (commit events checked)
            and ``committed_past_undelivered``.
        violations: Order violations (at most :data:`MAX_REPORTED` per check listed).
        violation_count: Their exact number.
        lost: Acked records some complete group never got (listed up to the cap).
        lost_count: Their exact number, summed over groups.
        committed_past: Acked records a group's commit passed while no member of the
            group had delivered them (listed up to the cap): group, producer, seq, key,
            partition, offset, ``committed`` (the offset committed), ``committed_by``
            (the reader that recorded the commit), ``commit`` (``commit``, ``boundary``
            or ``read``), ``commit_ts``, ``delivered_later`` (delivered by some member
            after that commit).
        committed_past_count: Their exact number, summed over groups.
        duplicates: Deliveries beyond the first, summed over groups.
        mismatched: Deliveries whose key differs from the key the producer acked.
        copies: Records found at two places of a topic that must hold them once,
            beyond the places the input topic already holds them at (an exactly-once
            stage copies each input record once: a record the input holds twice is
            rightly in its output twice).
        input_copies: Extra places of records in the input topic (what the groups that
            are not exactly-once groups saw; at-least-once writes allow them).
        pauses: Per paused group, its :class:`PauseProof`.
    """

    records: int = 0
    nacked: int = 0
    groups: dict[str, dict[str, int]] = field(default_factory=dict)
    violations: list[Violation] = field(default_factory=list)
    violation_count: int = 0
    lost: list[dict[str, Any]] = field(default_factory=list)
    lost_count: int = 0
    committed_past: list[dict[str, Any]] = field(default_factory=list)
    committed_past_count: int = 0
    duplicates: int = 0
    mismatched: int = 0
    copies: int = 0
    input_copies: int = 0
    pauses: list[PauseProof] = field(default_factory=list)

    @property
    def holds(self) -> bool:
        """No order violation, nothing lost or committed past, no corrupted record."""
        clean = self.mismatched == 0 and self.copies == 0
        complete = self.lost_count == 0 and self.committed_past_count == 0
        return self.violation_count == 0 and complete and clean

    def to_dict(self) -> dict[str, Any]:
        """The verdict as a JSON-ready dict."""
        return {
            "holds": self.holds,
            "records": self.records,
            "nacked": self.nacked,
            "groups": self.groups,
            "violations": self.violation_count,
            "violation_samples": [v.to_dict() for v in self.violations],
            "lost": self.lost_count,
            "lost_samples": self.lost,
            "committed_past_undelivered": self.committed_past_count,
            "committed_past_samples": self.committed_past,
            "duplicates": self.duplicates,
            "mismatched": self.mismatched,
            "copies": self.copies,
            "input_copies": self.input_copies,
            "pauses": [asdict(p) for p in self.pauses],
        }


class _OrderCheck:
    """Per (producer, key): the highest sequence delivered so far in one scope."""

    def __init__(self, check: str, group: str, scope: str, out: Verdict) -> None:
        self.check, self.group, self.scope, self.out = check, group, scope, out
        self.seen: set[tuple[str, int]] = set()
        self.highest: dict[tuple[str, str], Delivery] = {}

    def feed(self, d: Delivery) -> bool:
        """Take delivery ``d``; return whether it is the record's first in this scope."""
        rid = (d.producer, d.seq)
        if rid in self.seen:
            return False
        self.seen.add(rid)
        pk = (d.producer, d.key)
        top = self.highest.get(pk)
        if top is not None and top.seq > d.seq:
            self.out.violation_count += 1
            if sum(v.check == self.check for v in self.out.violations) < MAX_REPORTED:
                self.out.violations.append(
                    Violation(
                        self.check,
                        self.group,
                        d.producer,
                        d.key,
                        d.describe(),
                        top.describe(),
                        self.scope,
                    )
                )
        else:
            self.highest[pk] = d
        return True


class _Commit(NamedTuple):
    """A group's committed offset on a partition, as a reader recorded it."""

    ts: int
    partition: int
    offset: int
    reader: str
    why: str


def _commit(ev: dict[str, Any]) -> _Commit:
    return _Commit(
        int(ev["ts"]),
        int(ev["tp"]),
        int(ev["o"]),
        sys.intern(str(ev.get("r", ""))),
        sys.intern(str(ev.get("why", "commit"))),
    )


def _delivery(ev: dict[str, Any]) -> Delivery:
    # Interned: a long run holds millions of deliveries of a few hundred keys and ids.
    return Delivery(
        int(ev["ts"]),
        sys.intern(str(ev["p"])),
        sys.intern(str(ev["k"])),
        int(ev["s"]),
        int(ev["tp"]),
        int(ev["o"]),
        int(ev.get("e", -1)),
        sys.intern(str(ev["r"])),
        int(ev.get("n", 0)),
    )


def check(
    events: Iterable[dict[str, Any]],
    complete_groups: Iterable[str] | None = None,
    exactly_once_groups: Iterable[str] = (),
    topic: str | None = None,
) -> Verdict:
    """Check the events of a run (any order; they are sorted by time here).

    Args:
        events: Events of :mod:`ordered.verify.history`, from every file of the run.
        complete_groups: Groups that must have every acked record (default: every group
            that delivered anything).
        exactly_once_groups: Groups reading a topic that must hold every record once:
            a record found at more places (partition, offset) there than in the input
            topic (as the other groups saw it) is a violation (``copies``; elsewhere
            copies are only counted: at-least-once allows them). Their commits are
            not compared with the acks (their offsets are the other topic's).
        topic: The topic the producers wrote (their acks carry no topic): commits
            recorded on another topic are left out (default: every commit counts).

    Returns:
        The :class:`Verdict`.
    """
    out = Verdict()
    acked: dict[tuple[str, int], tuple[str, int, int]] = {}
    deliveries: dict[str, list[Delivery]] = defaultdict(list)
    resets: dict[str, list[int]] = defaultdict(list)
    lows: dict[int, list[tuple[int, int]]] = defaultdict(list)
    pause_marks: dict[str, list[tuple[int, str]]] = defaultdict(list)
    seeks: set[tuple[str, int]] = set()
    commits: dict[str, list[_Commit]] = defaultdict(list)
    for ev in events:
        kind = ev.get("ev")
        if kind == "dlv":
            deliveries[str(ev["g"])].append(_delivery(ev))
        elif kind == "cmt":
            if topic is None or ev.get("t", topic) == topic:
                commits[str(ev["g"])].append(_commit(ev))
        elif kind == "ack":
            acked[(str(ev["p"]), int(ev["s"]))] = (str(ev["k"]), int(ev["tp"]), int(ev["o"]))
        elif kind == "nack":
            out.nacked += 1
        elif kind == "pass" and ev.get("why") == "seek":
            seeks.add((str(ev["r"]), int(ev["n"])))
        elif kind == "reset":
            resets[str(ev["g"])].append(int(ev["ts"]))
        elif kind == "low":
            lows[int(ev["tp"])].append((int(ev["ts"]), int(ev["o"])))
        elif kind in ("pause", "resume"):
            pause_marks[str(ev["g"])].append((int(ev["ts"]), kind))
    out.records = len(acked)
    wanted = set(deliveries) if complete_groups is None else set(complete_groups)
    exactly_once = set(exactly_once_groups)
    input_places: dict[tuple[str, int], int] = {}
    output_places: dict[str, dict[tuple[str, int], int]] = {}
    by_place: list[tuple[tuple[str, int], tuple[str, int, int]]] | None = None
    for group in sorted(set(deliveries) | wanted):
        found = deliveries.get(group, [])
        stats = _check_group(group, found, resets.get(group, []), seeks, acked, out)
        lost = _lost(group, stats.pop("_delivered_set"), acked, lows, out) if group in wanted else 0
        multi: dict[tuple[str, int], int] = stats.pop("_multi")
        stats["lost"] = lost
        if group in wanted and group not in exactly_once and commits.get(group):
            if by_place is None:
                by_place = sorted(acked.items(), key=lambda a: a[1][1:])
            stats["commits"] = len(commits[group])
            stats["committed_past_undelivered"] = _committed_past(
                group, found, commits[group], by_place, out
            )
        out.groups[group] = stats
        if group in exactly_once:
            output_places[group] = multi
        else:
            for rid, count in multi.items():
                input_places[rid] = max(count, input_places.get(rid, 1))
    out.input_copies = sum(count - 1 for count in input_places.values())
    for multi in output_places.values():
        out.copies += sum(max(0, n - input_places.get(rid, 1)) for rid, n in multi.items())
    for group, marks in sorted(pause_marks.items()):
        out.pauses.append(_pause_proof(group, marks, lows, out.groups.get(group, {})))
    return out


def _check_group(
    group: str,
    found: list[Delivery],
    reset_times: list[int],
    seeks: set[tuple[str, int]],
    acked: dict[tuple[str, int], tuple[str, int, int]],
    out: Verdict,
) -> dict[str, Any]:
    found.sort(key=lambda d: d.ts)
    first = _OrderCheck("first-delivery", group, "", out)
    passes: dict[tuple[str, int], _OrderCheck] = {}
    resets = sorted(reset_times)
    reset_check: _OrderCheck | None = None
    next_reset = 0
    duplicates = replayed = copies = 0
    places: dict[tuple[str, int], set[tuple[int, int]]] = {}
    for d in found:
        while next_reset < len(resets) and resets[next_reset] <= d.ts:
            reset_check = _OrderCheck("reset-pass", group, f"reset@{resets[next_reset]}", out)
            next_reset += 1
        was_new = first.feed(d)
        rid = (d.producer, d.seq)
        if was_new:
            places[rid] = {(d.partition, d.offset)}
        else:
            duplicates += 1
            seen_at = places[rid]
            if (d.partition, d.offset) not in seen_at:
                seen_at.add((d.partition, d.offset))
                copies += 1
        scope = (d.reader, d.pass_no)
        pass_check = passes.get(scope)
        if pass_check is None:
            pass_check = passes[scope] = _OrderCheck(
                "reader-pass", group, f"{d.reader}#{d.pass_no}", out
            )
        pass_check.feed(d)
        in_reset = reset_check is not None and reset_check.feed(d)
        if not was_new and (in_reset or scope in seeks):
            replayed += 1
        ack = acked.get((d.producer, d.seq))
        if ack is not None and ack[0] != d.key:
            out.mismatched += 1
    out.duplicates += duplicates
    return {
        "delivered": len(first.seen),
        "deliveries": len(found),
        "duplicates": duplicates,
        "replayed": replayed,
        "copies": copies,
        "_delivered_set": first.seen,
        "_multi": {rid: len(at) for rid, at in places.items() if len(at) > 1},
    }


def _lost(
    group: str,
    delivered: set[tuple[str, int]],
    acked: dict[tuple[str, int], tuple[str, int, int]],
    lows: dict[int, list[tuple[int, int]]],
    out: Verdict,
) -> int:
    count = 0
    for rid, (key, partition, offset) in sorted(acked.items()):
        if rid in delivered:
            continue
        count += 1
        if len(out.lost) < MAX_REPORTED:
            start = max((o for _, o in lows.get(partition, [])), default=-1)
            out.lost.append(
                {
                    "group": group,
                    "producer": rid[0],
                    "seq": rid[1],
                    "key": key,
                    "partition": partition,
                    "offset": offset,
                    "trimmed": offset < start,
                    "log_start_seen": start,
                }
            )
    out.lost_count += count
    return count


def _committed_past(
    group: str,
    found: list[Delivery],
    commits: list[_Commit],
    by_place: list[tuple[tuple[str, int], tuple[str, int, int]]],
    out: Verdict,
) -> int:
    """Count (and sample) the acked records a commit of ``group`` passed undelivered.

    ``found`` is sorted by time (:func:`_check_group`); ``by_place`` holds the acks,
    (record id, (key, partition, offset)), by partition and offset. Per partition, the
    commits in time order with their running maximum: the first commit higher than an
    offset is the earliest that passed it, so the record is reported when that commit
    came before the record's first delivery to the group (or it never came).
    """
    first_at: dict[tuple[int, int], int] = {}
    for d in found:
        first_at.setdefault((d.partition, d.offset), d.ts)
    by_partition: dict[int, list[_Commit]] = defaultdict(list)
    for c in commits:
        if c.offset >= 0:
            by_partition[c.partition].append(c)
    ordered: dict[int, tuple[list[_Commit], list[int]]] = {}
    for partition, found_commits in by_partition.items():
        found_commits.sort(key=lambda c: (c.ts, c.offset))
        highest: list[int] = []
        top = -1
        for c in found_commits:
            top = max(top, c.offset)
            highest.append(top)
        ordered[partition] = (found_commits, highest)
    count = 0
    for rid, (key, partition, offset) in by_place:
        entry = ordered.get(partition)
        if entry is None:
            continue
        in_time, highest = entry
        at = bisect_right(highest, offset)
        if at == len(highest):
            continue  # no commit of the group on this partition went past the record
        passed = in_time[at]
        delivered = first_at.get((partition, offset))
        if delivered is not None and delivered <= passed.ts:
            continue  # delivered before (or with) the first commit past it
        count += 1
        if len(out.committed_past) < MAX_REPORTED:
            out.committed_past.append(
                {
                    "group": group,
                    "producer": rid[0],
                    "seq": rid[1],
                    "key": key,
                    "partition": partition,
                    "offset": offset,
                    "committed": passed.offset,
                    "committed_by": passed.reader,
                    "commit": passed.why,
                    "commit_ts": passed.ts,
                    "delivered_later": delivered is not None,
                }
            )
    out.committed_past_count += count
    return count


def _pause_proof(
    group: str,
    marks: list[tuple[int, str]],
    lows: dict[int, list[tuple[int, int]]],
    stats: dict[str, Any],
) -> PauseProof:
    intervals: list[tuple[int, int]] = []
    started: int | None = None
    for ts, kind in sorted(marks):
        if kind == "pause" and started is None:
            started = ts
        elif kind == "resume" and started is not None:
            intervals.append((started, ts))
            started = None
    trims = 0
    for samples in lows.values():
        previous = -1
        for ts, offset in sorted(samples):
            if previous >= 0 and offset > previous and any(a <= ts <= b for a, b in intervals):
                trims += 1
            previous = max(previous, offset)
    paused = sum(b - a for a, b in intervals) / 1e9
    return PauseProof(group, round(paused, 1), trims, int(stats.get("lost", 0)))
