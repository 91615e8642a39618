"""Trims: DeleteRecords (KIP-107) with a defined outcome for every error, and leader-only mode.

:func:`validate` checks a request against Kafka before anything is sent (partitions
exist, offsets between 0 and the high watermark). :class:`Trimmer` sends it and decides
every partition's answer by :data:`ERROR_RULES`: each DeleteRecords error code of the
protocol is *retried* (until the timeout), *skipped* (the partition is left as it is
and reported; the others go on) or *failed*, with a message that names the code.

Modes:

* default: the broker answers once every live replica's log start offset reached the
  offset (the low watermark), or ``REQUEST_TIMED_OUT`` after ``timeout``; a timeout
  is a failure whose message says whether the leader itself truncated.
* leader-only (the draft KIP's ``LeaderOnly``, which no broker implements yet, so it
  is emulated): DeleteRecords with a short ``TimeoutMs``
  (:data:`LEADER_ONLY_WAIT_S`); on a timeout the leader's log start offset is read
  (ListOffsets ``earliest`` is answered by the leader). At or past the offset means
  "leader truncated, followers slow": success, low watermark unknown (-1). Below it
  means "leader did not truncate": failure.

Every result carries the draft KIP's response fields: the requested offset, the low
watermark and the leader's log start offset, ``-1`` where unknown.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from enum import Enum
from typing import Any, Final, Protocol

from confluent_kafka import KafkaError

from coordinator.kernel.errors import OrderedKafkaError, TrimRequestError
from coordinator.kernel.kafka_admin import DeleteOutcome, UnknownTopicError, WaitReport
from coordinator.kernel.kafka_retry import RetryPolicy

__all__ = [
    "ERROR_RULES",
    "LEADER_ONLY_WAIT_S",
    "ErrorRule",
    "Outcome",
    "PartitionTrim",
    "TrimAdmin",
    "TrimReport",
    "TrimStatus",
    "Trimmer",
    "rule_for",
    "validate",
]

LEADER_ONLY_WAIT_S: Final = 0.25
"""The ``TimeoutMs`` of a leader-only DeleteRecords: long enough for a local truncation."""

_ROUND_RETRY: Final = RetryPolicy(
    max_tries=None,
    delay=0.3,
    backoff=1.5,
    max_delay=1.0,
    retriable=lambda exc: isinstance(exc, _StillPending),
)
"""The pauses between DeleteRecords rounds (the deadline is the trim's ``timeout``)."""


class _StillPending(Exception):
    """Some partitions answered with an error the rules retry (see :data:`ERROR_RULES`)."""


Progress = Callable[[str], None]
TP = tuple[str, int]


class Outcome(Enum):
    """What a DeleteRecords error code leads to.

    Attributes:
        RETRY: Send again (after a metadata refresh) until the timeout; then fail.
        SKIP: Leave the partition as it is and report it; the others go on.
        FAIL: The partition's trim failed; retrying cannot help.
        TIMEOUT: Not every live replica confirmed in time (see the module docstring
            for what each mode makes of it).
    """

    RETRY = "retry"
    SKIP = "skip"
    FAIL = "fail"
    TIMEOUT = "timeout"


@dataclass(frozen=True, slots=True)
class ErrorRule:
    """The outcome of one error code and what it means.

    Attributes:
        name: The protocol's name of the code.
        outcome: What the trimmer does.
        meaning: One sentence for the message.
    """

    name: str
    outcome: Outcome
    meaning: str


ERROR_RULES: Final[Mapping[int, ErrorRule]] = {
    KafkaError.OFFSET_OUT_OF_RANGE: ErrorRule(
        "OFFSET_OUT_OF_RANGE",
        Outcome.FAIL,
        "the offset is negative or past the partition's high watermark",
    ),
    KafkaError.NOT_LEADER_FOR_PARTITION: ErrorRule(
        "NOT_LEADER_FOR_PARTITION",
        Outcome.RETRY,
        "the broker asked is not the partition's leader (leadership moved)",
    ),
    KafkaError.LEADER_NOT_AVAILABLE: ErrorRule(
        "LEADER_NOT_AVAILABLE", Outcome.RETRY, "the partition has no leader right now"
    ),
    KafkaError.UNKNOWN_TOPIC_OR_PART: ErrorRule(
        "UNKNOWN_TOPIC_OR_PARTITION",
        Outcome.RETRY,
        "the leader does not know the partition (metadata not yet propagated, or the "
        "topic was deleted)",
    ),
    KafkaError._UNKNOWN_PARTITION: ErrorRule(
        "UNKNOWN_TOPIC_OR_PARTITION",
        Outcome.RETRY,
        "the client's metadata does not know the partition yet",
    ),
    KafkaError._NOENT: ErrorRule(
        "UNKNOWN_TOPIC_OR_PARTITION",
        Outcome.RETRY,
        "no leader of the partition is known (librdkafka: no leaders found)",
    ),
    KafkaError._UNKNOWN_TOPIC: ErrorRule(
        "UNKNOWN_TOPIC_OR_PARTITION",
        Outcome.RETRY,
        "the client's metadata does not know the topic yet",
    ),
    KafkaError.TOPIC_AUTHORIZATION_FAILED: ErrorRule(
        "TOPIC_AUTHORIZATION_FAILED",
        Outcome.FAIL,
        "not authorized: deleting records needs the DELETE operation on the topic "
        "(an ACL with --operation Delete --topic for this principal)",
    ),
    KafkaError.POLICY_VIOLATION: ErrorRule(
        "POLICY_VIOLATION",
        Outcome.SKIP,
        "the broker's configuration forbids deleting records of this partition (e.g. "
        "cleanup.policy=compact without delete)",
    ),
    KafkaError.KAFKA_STORAGE_ERROR: ErrorRule(
        "KAFKA_STORAGE_EXCEPTION",
        Outcome.RETRY,
        "the partition's log directory is offline on its leader (retried in case "
        "leadership moves to a healthy replica)",
    ),
    KafkaError.REQUEST_TIMED_OUT: ErrorRule(
        "REQUEST_TIMED_OUT",
        Outcome.TIMEOUT,
        "not every live replica reached the offset in time",
    ),
    KafkaError._TIMED_OUT: ErrorRule(
        "REQUEST_TIMED_OUT",
        Outcome.TIMEOUT,
        "no answer from the leader in time",
    ),
}
"""The outcome of every DeleteRecords error code (``shared/seeds`` 001) and more."""


def rule_for(error: KafkaError) -> ErrorRule:
    """The rule of ``error``'s code; an unlisted code fails, named as librdkafka names it."""
    rule = ERROR_RULES.get(error.code())
    if rule is not None:
        return rule
    return ErrorRule(error.name(), Outcome.FAIL, error.str())


class TrimStatus(Enum):
    """One partition's result.

    Attributes:
        TRIMMED: Every live replica's log start offset reached the offset.
        LEADER_TRIMMED: Leader-only: the leader truncated, followers may lag.
        DRY_RUN: Validated, nothing sent.
        SKIPPED: An error whose outcome is "skip" (see :data:`ERROR_RULES`).
        FAILED: An error whose outcome is "fail", or retries/timeout exhausted.
    """

    TRIMMED = "trimmed"
    LEADER_TRIMMED = "leader-trimmed"
    DRY_RUN = "dry-run"
    SKIPPED = "skipped"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class PartitionTrim:
    """The result of trimming one partition.

    Attributes:
        topic: The topic.
        partition: The partition.
        requested: The offset asked for (records below it are deleted).
        low_watermark: The minimum log start offset over live replicas, ``-1`` unknown.
        leader_log_start: The leader's log start offset, ``-1`` unknown.
        status: The result.
        error: The error code's name, ``None`` on success.
        message: What happened, in one sentence.
    """

    topic: str
    partition: int
    requested: int
    low_watermark: int
    leader_log_start: int
    status: TrimStatus
    error: str | None
    message: str

    @property
    def ok(self) -> bool:
        """Whether the partition is trimmed (or would be: dry run)."""
        return self.status in (TrimStatus.TRIMMED, TrimStatus.LEADER_TRIMMED, TrimStatus.DRY_RUN)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "topic": self.topic,
            "partition": self.partition,
            "requested_offset": self.requested,
            "low_watermark": self.low_watermark,
            "leader_log_start_offset": self.leader_log_start,
            "status": self.status.value,
            "error": self.error,
            "message": self.message,
        }


@dataclass(frozen=True, slots=True)
class TrimReport:
    """The results of one trim.

    Attributes:
        results: One per partition, sorted by topic and partition.
        leader_only: Whether leader-only mode was used.
        dry_run: Whether nothing was sent.
        seconds: How long it took.
    """

    results: tuple[PartitionTrim, ...]
    leader_only: bool
    dry_run: bool
    seconds: float

    @property
    def ok(self) -> bool:
        """Whether every partition is trimmed."""
        return all(r.ok for r in self.results)

    def summary(self) -> str:
        """One line naming every partition that is not trimmed, and why."""
        bad = [r for r in self.results if not r.ok]
        if not bad:
            return f"{len(self.results)} partition(s) trimmed"
        return "; ".join(f"{r.topic}[{r.partition}]: {r.message}" for r in bad)

    def to_dict(self) -> dict[str, Any]:
        """Return a JSON-ready dict."""
        return {
            "ok": self.ok,
            "leader_only": self.leader_only,
            "dry_run": self.dry_run,
            "seconds": round(self.seconds, 3),
            "partitions": [r.to_dict() for r in self.results],
        }


class TrimAdmin(Protocol):
    """What a trim needs from Kafka (:class:`~coordinator.kernel.kafka_admin.KafkaAdmin` has it)."""

    def partition_count(self, topic: str) -> int:
        """Partitions of ``topic`` in Kafka."""

    def start_offsets(self, topic: str, partitions: Any) -> dict[int, int]:
        """Log start offsets, as the leaders report them."""

    def end_offsets(self, topic: str, partitions: Any) -> dict[int, int]:
        """High watermarks."""

    def delete_records(
        self,
        offsets: Mapping[TP, int],
        operation_timeout: float,
        request_timeout: float,
        on_wait: WaitReport | None = None,
    ) -> dict[TP, DeleteOutcome]:
        """Send DeleteRecords; one outcome per partition."""


def validate(
    admin: TrimAdmin, requests: Mapping[TP, int], allow_end: bool = False
) -> dict[TP, int]:
    """Check ``requests`` against Kafka; send nothing.

    Args:
        admin: Kafka.
        requests: ``(topic, partition) -> offset``.
        allow_end: Accept ``-1`` as "the high watermark" (``kafka-delete-records``'s
            meaning); it is resolved here, so ``-1`` is never sent.

    Returns:
        The requests with every offset resolved.

    Raises:
        TrimRequestError: No partition, an unknown topic or partition, a negative
            offset, or one past the high watermark.
        OrderedKafkaError: Kafka failed.
    """
    if not requests:
        raise TrimRequestError("nothing to trim: no partition given")
    by_topic: dict[str, dict[int, int]] = {}
    for (topic, partition), offset in requests.items():
        by_topic.setdefault(topic, {})[partition] = offset
    out: dict[TP, int] = {}
    for topic, offsets in sorted(by_topic.items()):
        try:
            count = admin.partition_count(topic)
        except UnknownTopicError as exc:
            raise TrimRequestError(str(exc)) from None
        for partition, offset in sorted(offsets.items()):
            if partition < 0 or partition >= count:
                raise TrimRequestError(
                    f"{topic} has no partition {partition} (it has {count}: 0..{count - 1})"
                )
            if offset < 0 and not (allow_end and offset == -1):
                raise TrimRequestError(
                    f"{topic}[{partition}]: offset must be >= 0, got {offset}"
                    + (" (-1 means the high watermark)" if allow_end else "")
                )
        ends = admin.end_offsets(topic, offsets)
        for partition, offset in sorted(offsets.items()):
            end = ends[partition]
            if offset > end:
                raise TrimRequestError(
                    f"{topic}[{partition}]: offset {offset} is past the high watermark {end}"
                )
            out[(topic, partition)] = end if offset == -1 else offset
    return out


@dataclass
class _Pending:
    """A partition still in the retry loop."""

    offset: int
    last: DeleteOutcome | None = None
    attempts: int = 0
    notes: list[str] = field(default_factory=list)


class Trimmer:
    """Sends DeleteRecords and decides every partition's answer.

    Args:
        admin: Kafka (a :class:`TrimAdmin`; tests inject faults through it).
        progress: Called with one line at a time while waiting.
    """

    def __init__(self, admin: TrimAdmin, progress: Progress | None = None) -> None:
        self._admin = admin
        self._progress: Progress = progress or (lambda _message: None)

    def trim(
        self,
        offsets: Mapping[TP, int],
        timeout: float = 30.0,
        leader_only: bool = False,
        dry_run: bool = False,
    ) -> TrimReport:
        """Trim every ``(topic, partition)`` to its offset (already validated).

        Args:
            offsets: ``(topic, partition) -> offset``, each ``>= 0`` and at most the
                high watermark (see :func:`validate`).
            timeout: Seconds the whole trim may take (retries included); in default
                mode also how long the leader waits for its followers.
            leader_only: Succeed once the leader truncated (see the module docstring).
            dry_run: Send nothing; report what would be asked.

        Returns:
            The report; partition errors are in it, never raised.

        Raises:
            OrderedKafkaError: The request could not be sent at all.
        """
        started = time.monotonic()
        if timeout <= 0:
            raise ValueError(f"timeout must be > 0, got {timeout}")
        if dry_run:
            results = [self._dry(topic, p, o) for (topic, p), o in offsets.items()]
            return self._report(results, leader_only, True, started)
        deadline = started + timeout
        pending = {tp: _Pending(o) for tp, o in offsets.items()}
        done: dict[TP, PartitionTrim] = {}
        timed_out: dict[TP, _Pending] = {}

        def send_round() -> None:
            """One DeleteRecords for the pending partitions; raises if some are to retry."""
            nonlocal pending
            remaining = max(deadline - time.monotonic(), 0.05)
            op_timeout = min(LEADER_ONLY_WAIT_S, remaining) if leader_only else remaining
            answers = self._admin.delete_records(
                {tp: s.offset for tp, s in pending.items()},
                operation_timeout=op_timeout,
                request_timeout=op_timeout + 5.0,
                on_wait=self._waiting(offsets, timeout, leader_only),
            )
            retry: dict[TP, _Pending] = {}
            for tp, state in pending.items():
                answer = answers.get(tp) or DeleteOutcome(-1, KafkaError(KafkaError._TIMED_OUT))
                state.last, state.attempts = answer, state.attempts + 1
                if answer.error is None:
                    done[tp] = PartitionTrim(
                        tp[0],
                        tp[1],
                        state.offset,
                        answer.low_watermark,
                        -1,
                        TrimStatus.TRIMMED,
                        None,
                        "trimmed on every live replica",
                    )
                    continue
                rule = rule_for(answer.error)
                if rule.outcome is Outcome.RETRY:
                    retry[tp] = state
                elif rule.outcome is Outcome.TIMEOUT:
                    timed_out[tp] = state
                else:
                    done[tp] = self._error(tp, state, rule, timeout)
            pending = retry
            if pending:
                raise _StillPending(len(pending))

        def retrying(_exc: BaseException, _try: int, _pause: float) -> None:
            for state in pending.values():
                assert state.last is not None and state.last.error is not None
                state.notes.append(rule_for(state.last.error).name)
            self._progress(
                f"trim: retrying {len(pending)} partition(s) ("
                + ", ".join(sorted({n for s in pending.values() for n in s.notes[-1:]}))
                + ")"
            )

        policy = replace(_ROUND_RETRY, deadline=timeout)
        try:
            policy.call(send_round, on_retry=retrying)
        except _StillPending:
            # The deadline passed with partitions still refused by a retriable error.
            for tp, state in pending.items():
                assert state.last is not None and state.last.error is not None
                done[tp] = self._error(tp, state, rule_for(state.last.error), timeout)
        trimmed = {tp for tp, r in done.items() if r.status is TrimStatus.TRIMMED}
        leaders = self._leader_starts(trimmed | set(timed_out))
        for tp in trimmed:
            done[tp] = replace(done[tp], leader_log_start=leaders.get(tp, -1))
        for tp, state in timed_out.items():
            done[tp] = self._timed_out(tp, state, leader_only, timeout, leaders.get(tp, -1))
        return self._report(list(done.values()), leader_only, False, started)

    # --- results -------------------------------------------------------------------

    def _waiting(self, offsets: Mapping[TP, int], timeout: float, leader_only: bool) -> WaitReport:
        topics = ", ".join(sorted({t for t, _ in offsets}))

        def report(count: int, elapsed: float) -> None:
            who = "the leader" if leader_only else "every live replica"
            self._progress(
                f"trim: waiting for {who} of {count} partition(s) of {topics} "
                f"({elapsed:.0f} s of {timeout:g} s)"
            )

        return report

    @staticmethod
    def _dry(topic: str, partition: int, offset: int) -> PartitionTrim:
        return PartitionTrim(
            topic, partition, offset, -1, -1, TrimStatus.DRY_RUN, None, "dry run: nothing sent"
        )

    def _error(self, tp: TP, state: _Pending, rule: ErrorRule, timeout: float) -> PartitionTrim:
        status = TrimStatus.SKIPPED if rule.outcome is Outcome.SKIP else TrimStatus.FAILED
        message = f"{rule.name}: {rule.meaning}"
        if rule.name == "TOPIC_AUTHORIZATION_FAILED":
            # The exact ACL to grant, as Kafka's own tool takes it.
            principal = getattr(self._admin, "principal", None) or "<principal>"
            message += (
                f"; grant it with: kafka-acls --add --allow-principal User:{principal} "
                f"--operation Delete --topic {tp[0]}"
            )
        if rule.outcome is Outcome.RETRY:
            message += f"; still failing after {state.attempts} attempt(s) in {timeout:g} s"
        elif rule.outcome is Outcome.SKIP:
            message += "; partition skipped"
        return PartitionTrim(tp[0], tp[1], state.offset, -1, -1, status, rule.name, message)

    def _leader_starts(self, partitions: set[TP]) -> dict[TP, int]:
        """The leaders' log start offsets of ``partitions`` (absent: unreadable)."""
        by_topic: dict[str, set[int]] = {}
        for topic, p in partitions:
            by_topic.setdefault(topic, set()).add(p)
        out: dict[TP, int] = {}
        for topic, wanted in sorted(by_topic.items()):
            try:
                starts = self._admin.start_offsets(topic, wanted)
            except OrderedKafkaError as exc:
                self._progress(f"trim: cannot read the leaders' log start offsets: {exc}")
                continue
            out.update({(topic, p): o for p, o in starts.items()})
        return out

    @staticmethod
    def _timed_out(
        tp: TP, state: _Pending, leader_only: bool, timeout: float, leader: int
    ) -> PartitionTrim:
        topic, p = tp
        if leader < 0:
            return PartitionTrim(
                topic,
                p,
                state.offset,
                -1,
                -1,
                TrimStatus.FAILED,
                "REQUEST_TIMED_OUT",
                f"REQUEST_TIMED_OUT: no confirmation within {timeout:g} s and the leader's "
                "log start offset could not be read: unknown whether the leader truncated",
            )
        if leader >= state.offset:
            if leader_only:
                return PartitionTrim(
                    topic,
                    p,
                    state.offset,
                    -1,
                    leader,
                    TrimStatus.LEADER_TRIMMED,
                    None,
                    f"leader truncated (log start {leader}); followers not confirmed yet, "
                    "low watermark unknown",
                )
            return PartitionTrim(
                topic,
                p,
                state.offset,
                -1,
                leader,
                TrimStatus.FAILED,
                "REQUEST_TIMED_OUT",
                f"REQUEST_TIMED_OUT: the leader truncated (log start {leader}) but not every "
                f"live replica reached offset {state.offset} within {timeout:g} s (a follower "
                "is slow or stopped); run again later, or use --leader-only to accept the "
                "leader's truncation",
            )
        return PartitionTrim(
            topic,
            p,
            state.offset,
            -1,
            leader,
            TrimStatus.FAILED,
            "REQUEST_TIMED_OUT",
            f"REQUEST_TIMED_OUT: the leader did not truncate: its log start offset {leader} "
            f"is below {state.offset}",
        )

    @staticmethod
    def _report(
        results: list[PartitionTrim], leader_only: bool, dry_run: bool, started: float
    ) -> TrimReport:
        ordered = tuple(sorted(results, key=lambda r: (r.topic, r.partition)))
        return TrimReport(ordered, leader_only, dry_run, time.monotonic() - started)
