"""Trim outcomes per DeleteRecords error code, through a fault-injecting admin.

Kafka cannot be made to answer NOT_LEADER_FOR_PARTITION, KAFKA_STORAGE_EXCEPTION or
TOPIC_AUTHORIZATION_FAILED on demand in a plain dev cluster; these tests script the
answers and check what :class:`coordinator.trims.trim.Trimmer` makes of each one. The real
answers (POLICY_VIOLATION, timeouts, leader-only) are in tests/integration/test_trim.py
and tests/integration/test_trim_replicated.py.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import KafkaError

from coordinator.groups.interest import GroupHold, TopicInterest
from coordinator.kernel.errors import TrimRequestError
from coordinator.kernel.kafka_admin import DeleteOutcome, UnknownTopicError, WaitReport
from coordinator.kernel.store import EpochRecord, RetiredRecord, TopicRecord
from coordinator.trims.retention import consumed_targets, retired_partitions
from coordinator.trims.trim import ERROR_RULES, Outcome, Trimmer, TrimStatus, validate
from linear_hash import key_flow
from ordered.cli.trim import read_offset_file

TP = tuple[str, int]


class FaultyAdmin:
    """Answers DeleteRecords from a script: a list of error codes (or None) per partition."""

    def __init__(
        self,
        script: Mapping[TP, list[int | None]],
        leader_starts: Mapping[TP, int] | None = None,
        partitions: int = 4,
        end: int = 100,
    ) -> None:
        self.script = {tp: list(codes) for tp, codes in script.items()}
        self.leader_starts = dict(leader_starts or {})
        self.partitions = partitions
        self.end = end
        self.calls: list[tuple[dict[TP, int], float]] = []

    def partition_count(self, topic: str) -> int:
        if topic == "missing":
            raise UnknownTopicError(f"topic {topic} does not exist in Kafka")
        return self.partitions

    def start_offsets(self, topic: str, partitions: Any) -> dict[int, int]:
        return {p: self.leader_starts.get((topic, p), 0) for p in partitions}

    def end_offsets(self, topic: str, partitions: Any) -> dict[int, int]:
        return {p: self.end for p in partitions}

    def delete_records(
        self,
        offsets: Mapping[TP, int],
        operation_timeout: float,
        request_timeout: float,
        on_wait: WaitReport | None = None,
    ) -> dict[TP, DeleteOutcome]:
        self.calls.append((dict(offsets), operation_timeout))
        out = {}
        for tp, offset in offsets.items():
            codes = self.script[tp]
            code = codes.pop(0) if len(codes) > 1 else codes[0]
            if code is None:
                out[tp] = DeleteOutcome(offset, None)
            else:
                out[tp] = DeleteOutcome(-1, KafkaError(code))
        return out


def run(admin: FaultyAdmin, offsets: dict[TP, int], **kwargs: Any) -> Any:
    return Trimmer(admin).trim(offsets, **kwargs)


def test_success_reports_low_watermark_and_leader_start() -> None:
    admin = FaultyAdmin({("t", 0): [None]}, leader_starts={("t", 0): 7})
    report = run(admin, {("t", 0): 7})
    [r] = report.results
    assert report.ok and r.status is TrimStatus.TRIMMED
    assert (r.requested, r.low_watermark, r.leader_log_start) == (7, 7, 7)
    assert r.to_dict()["leader_log_start_offset"] == 7


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (KafkaError.NOT_LEADER_FOR_PARTITION, "NOT_LEADER_FOR_PARTITION"),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PARTITION"),
        (KafkaError.KAFKA_STORAGE_ERROR, "KAFKA_STORAGE_EXCEPTION"),
        (KafkaError.LEADER_NOT_AVAILABLE, "LEADER_NOT_AVAILABLE"),
    ],
)
def test_retried_codes_succeed_when_the_error_clears(code: int, name: str) -> None:
    admin = FaultyAdmin({("t", 1): [code, code, None]})
    report = run(admin, {("t", 1): 5}, timeout=10)
    assert report.ok, report.summary()
    assert len(admin.calls) == 3
    assert ERROR_RULES[code].outcome is Outcome.RETRY
    assert ERROR_RULES[code].name == name


@pytest.mark.parametrize(
    ("code", "name"),
    [
        (KafkaError.NOT_LEADER_FOR_PARTITION, "NOT_LEADER_FOR_PARTITION"),
        (KafkaError.KAFKA_STORAGE_ERROR, "KAFKA_STORAGE_EXCEPTION"),
        (KafkaError.UNKNOWN_TOPIC_OR_PART, "UNKNOWN_TOPIC_OR_PARTITION"),
    ],
)
def test_retried_codes_fail_at_the_timeout_naming_the_code(code: int, name: str) -> None:
    admin = FaultyAdmin({("t", 1): [code]})
    started = time.monotonic()
    report = run(admin, {("t", 1): 5}, timeout=1.0)
    assert time.monotonic() - started < 3
    [r] = report.results
    assert r.status is TrimStatus.FAILED and r.error == name
    assert name in r.message and "attempt" in r.message
    assert len(admin.calls) >= 2


def test_authorization_failure_says_delete_is_needed() -> None:
    admin = FaultyAdmin({("t", 0): [KafkaError.TOPIC_AUTHORIZATION_FAILED]})
    [r] = run(admin, {("t", 0): 3}).results
    assert r.status is TrimStatus.FAILED and r.error == "TOPIC_AUTHORIZATION_FAILED"
    assert "DELETE" in r.message and "topic" in r.message
    assert len(admin.calls) == 1  # never retried


def test_policy_violation_skips_that_partition_only() -> None:
    admin = FaultyAdmin({("t", 0): [KafkaError.POLICY_VIOLATION], ("t", 1): [None]})
    report = run(admin, {("t", 0): 3, ("t", 1): 3})
    skipped, trimmed = report.results
    assert skipped.status is TrimStatus.SKIPPED and "POLICY_VIOLATION" in skipped.message
    assert trimmed.status is TrimStatus.TRIMMED
    assert not report.ok and "POLICY_VIOLATION" in report.summary()


def test_offset_out_of_range_fails_without_retry() -> None:
    admin = FaultyAdmin({("t", 0): [KafkaError.OFFSET_OUT_OF_RANGE]})
    [r] = run(admin, {("t", 0): 3}).results
    assert r.status is TrimStatus.FAILED and "OFFSET_OUT_OF_RANGE" in r.message
    assert len(admin.calls) == 1


def test_unknown_code_fails_with_its_name() -> None:
    admin = FaultyAdmin({("t", 0): [KafkaError.INVALID_REQUEST]})
    [r] = run(admin, {("t", 0): 3}).results
    assert r.status is TrimStatus.FAILED and r.error == "INVALID_REQUEST"


def test_default_timeout_tells_leader_truncated_from_not() -> None:
    admin = FaultyAdmin(
        {("t", 0): [KafkaError.REQUEST_TIMED_OUT], ("t", 1): [KafkaError.REQUEST_TIMED_OUT]},
        leader_starts={("t", 0): 9, ("t", 1): 2},
    )
    slow, stuck = run(admin, {("t", 0): 9, ("t", 1): 9}, timeout=2).results
    assert slow.status is TrimStatus.FAILED and slow.leader_log_start == 9
    assert "leader truncated" in slow.message and "--leader-only" in slow.message
    assert stuck.status is TrimStatus.FAILED and "did not truncate" in stuck.message


def test_leader_only_emulation() -> None:
    admin = FaultyAdmin(
        {("t", 0): [KafkaError.REQUEST_TIMED_OUT], ("t", 1): [KafkaError._TIMED_OUT]},
        leader_starts={("t", 0): 12, ("t", 1): 3},
    )
    report = run(admin, {("t", 0): 10, ("t", 1): 10}, timeout=30, leader_only=True)
    truncated, not_truncated = report.results
    assert truncated.status is TrimStatus.LEADER_TRIMMED and truncated.ok
    assert (truncated.low_watermark, truncated.leader_log_start) == (-1, 12)
    assert not_truncated.status is TrimStatus.FAILED
    assert "did not truncate" in not_truncated.message
    # The short TimeoutMs is what makes it leader-only.
    assert admin.calls[0][1] <= 0.25


def test_dry_run_sends_nothing() -> None:
    admin = FaultyAdmin({("t", 0): [None]})
    report = run(admin, {("t", 0): 3}, dry_run=True)
    assert report.ok and report.results[0].status is TrimStatus.DRY_RUN
    assert admin.calls == []


def test_every_seed_code_has_a_rule() -> None:
    for code in (
        KafkaError.OFFSET_OUT_OF_RANGE,
        KafkaError.NOT_LEADER_FOR_PARTITION,
        KafkaError.UNKNOWN_TOPIC_OR_PART,
        KafkaError.TOPIC_AUTHORIZATION_FAILED,
        KafkaError.POLICY_VIOLATION,
        KafkaError.KAFKA_STORAGE_ERROR,
        KafkaError.REQUEST_TIMED_OUT,
    ):
        assert code in ERROR_RULES


# --- validation: refused before anything is sent --------------------------------------


@pytest.mark.parametrize(
    ("request_", "needle"),
    [
        ({("t", 0): -2}, "must be >= 0"),
        ({("t", 0): 101}, "past the high watermark 100"),
        ({("t", 9): 1}, "has no partition 9"),
        ({("missing", 0): 1}, "does not exist"),
        ({}, "nothing to trim"),
    ],
)
def test_validate_refuses(request_: dict[TP, int], needle: str) -> None:
    admin = FaultyAdmin({})
    with pytest.raises(TrimRequestError, match=needle):
        validate(admin, request_)
    assert admin.calls == []


def test_validate_minus_one_is_the_high_watermark_only_when_allowed() -> None:
    admin = FaultyAdmin({})
    assert validate(admin, {("t", 0): -1}, allow_end=True) == {("t", 0): 100}
    with pytest.raises(TrimRequestError):
        validate(admin, {("t", 0): -1})


def test_offset_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(
        json.dumps({"partitions": [{"topic": "a", "partition": 0, "offset": 5}], "version": 1})
    )
    assert read_offset_file(good) == {("a", 0): 5}
    for text, needle in [
        ("{", "not JSON"),
        ('{"partitions": {}}', "expected"),
        ('{"partitions": [{"topic": "a", "partition": 0}], "version": 1}', "exactly"),
        ('{"partitions": [{"topic": "a", "partition": "0", "offset": 1}]}', "integer"),
        ('{"partitions": [], "version": 2}', "version"),
        ('{"partitions": []}', "no partitions"),
    ]:
        bad = tmp_path / "bad.json"
        bad.write_text(text)
        with pytest.raises(TrimRequestError, match=needle):
            read_offset_file(bad)
    with pytest.raises(TrimRequestError, match="cannot read"):
        read_offset_file(tmp_path / "nope.json")


# --- interest and targets (pure) ------------------------------------------------------


def hold(group: str, committed: dict[int, int], stale: bool = False) -> GroupHold:
    return GroupHold(group, "EMPTY" if stale else "STABLE", False, committed, stale, None)


def test_min_committed_rules() -> None:
    interest = TopicInterest("t", (hold("a", {0: 5, 1: 9}), hold("b", {0: 7})), {})
    assert interest.min_committed(0) == 5
    assert interest.min_committed(1) == 0  # b committed on the topic, not on 1
    assert [g.group for g in interest.holders(0, 6)] == ["a"]
    stale = TopicInterest("t", (hold("a", {0: 5}), hold("old", {0: 1}, stale=True)), {})
    assert stale.min_committed(0) == 5
    assert TopicInterest("t", (), {}).min_committed(0) is None
    unreadable = TopicInterest("t", (hold("a", {0: 5}),), {"b": "boom"})
    assert unreadable.min_committed(0) is None


def test_consumed_targets_never_past_the_high_watermark_or_cutoff() -> None:
    interest = TopicInterest("t", (hold("a", {0: 50, 1: 10, 2: 3}),), {})
    starts, ends = {0: 0, 1: 0, 2: 5}, {0: 40, 1: 100, 2: 9}
    assert consumed_targets(interest, starts, ends) == {0: 40, 1: 10}
    assert consumed_targets(interest, starts, ends, {0: 20, 1: 100, 2: 9}) == {0: 20, 1: 10}


def test_retired_partitions_from_history() -> None:
    now = time.time()
    topic = TopicRecord("t", 2, 2, 2, None, 4, "murmur3", True, False, now)

    def epoch(n: int, a: int, b: int, bounds: dict[int, int], sealed: bool = True) -> EpochRecord:
        return EpochRecord(
            "t",
            n,
            2,
            a,
            b,
            "sealed" if sealed else "pending",
            tuple(key_flow(2, a, b)),
            bounds,
            (),
            {},
            now,
            now if sealed else None,
        )

    history = [
        epoch(0, 2, 2, {}),
        epoch(1, 2, 4, {2: 0, 3: 0}),
        epoch(2, 4, 2, {2: 11, 3: 13, 0: 0, 1: 0}),
    ]
    got = retired_partitions(topic, history, 5)
    assert {p: (r.epoch, r.final_offset) for p, r in got.items()} == {2: (2, 11), 3: (2, 13)}
    pending = [*history[:2], epoch(2, 4, 2, {0: 0, 1: 0}, sealed=False)]
    assert retired_partitions(topic, pending, 4)[2].final_offset is None

    # After compaction dropped epochs 0-2 (a later epoch 3 left), the records say it;
    # a record of an epoch still in the history (or newer) is not a retirement.
    later = [epoch(3, 2, 2, {})]
    stored = {
        2: RetiredRecord("t", 2, 2, 11, "trimmed", now, now),
        3: RetiredRecord("t", 3, 2, 13, "trimmed", now, now),
    }
    got = retired_partitions(topic, later, 5, stored)
    assert {p: (r.epoch, r.final_offset) for p, r in got.items()} == {2: (2, 11), 3: (2, 13)}
    assert retired_partitions(topic, later, 5) == {}
    assert retired_partitions(topic, history[2:], 5, {2: stored[2]})[2].epoch == 2
    assert retired_partitions(topic, [epoch(2, 2, 2, {})], 5, stored) == {}


def test_retired_record_round_trip() -> None:
    record = RetiredRecord("t", 3, 2, 40, "trimmed", 1.0, 2.0)
    assert RetiredRecord.from_json(record.to_json(), "/x") == record
    with pytest.raises(ValueError):
        RetiredRecord("t", 3, 2, 40, "draining", 1.0, 2.0)
