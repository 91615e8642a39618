"""The verifiable reader: an ``OrderedConsumer`` group member that records every delivery.

Each delivered record is written to the reader's history (``dlv``: group, reader id,
pass, producer, key, sequence, partition, offset, epoch) *before* its offset is
committed, so a record the group counts as consumed is always in the history, whatever
kills the process. The reader numbers its passes: a new pass starts at every change of
its assignment and at every seek (the checker checks each pass's order on its own).

The reader also records the group's committed offsets as it learns them (``cmt``: group,
reader, topic ``t``, partition, offset, ``why``), so the checker can tell a commit that
passed a record no member delivered: ``commit`` after each of its own commits that
succeeded (what Kafka answered, per partition), ``boundary`` for each boundary commit the
consumer made on its own (its ``on_announcement`` hook), and ``read`` for the committed
offsets of its assignment, read back from Kafka as it closes (whoever committed them). A
commit is recorded once per reader and partition while its offset stays the same.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from confluent_kafka import KafkaError, KafkaException, TopicPartition

from ordered.consumer import OrderedConsumer
from ordered.verify.history import HistoryWriter, now_ns
from ordered.verify.producer import decode_value

__all__ = ["EPOCH_HEADER", "VerifiableReader"]

EPOCH_HEADER = "ordered.epoch"
"""The header the verifiable producer's records carry their routing epoch in."""

# Commit errors that a rebalance or a coordinator move explains: the next commit retries.
_RETRIED_COMMIT_ERRORS = frozenset(
    {
        KafkaError._NO_OFFSET,
        KafkaError.REBALANCE_IN_PROGRESS,
        KafkaError.ILLEGAL_GENERATION,
        KafkaError.UNKNOWN_MEMBER_ID,
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.REQUEST_TIMED_OUT,
        KafkaError._TIMED_OUT,
        KafkaError._TRANSPORT,
        KafkaError._WAIT_COORD,
        KafkaError._STATE,
        KafkaError._ASSIGNMENT_LOST,
    }
)


def _epoch_of(msg: Any) -> int:
    for name, value in msg.headers() or ():
        if name == EPOCH_HEADER and value is not None:
            try:
                return int(bytes(value))
            except ValueError:
                return -1
    return -1


class _CommitHook:
    """Records the consumer's own boundary commits (on the thread that polls)."""

    def __init__(self, reader: VerifiableReader) -> None:
        self._reader = reader

    def on_announcement(self, group: str, topic: str, partition: int, offset: int) -> None:
        self._reader.record_commit(topic, partition, offset, "boundary")


class VerifiableReader:
    """A member of consumer group ``group`` that records what it delivers.

    Args:
        config: ``OrderedConsumer`` configuration; ``group.id`` is set to ``group``,
            ``enable.auto.commit`` to false (the reader commits after recording).
        group: The consumer group.
        reader_id: This reader's id in the history (unique per process incarnation).
        topic: The topic to subscribe to.
        history: The history file to append deliveries to.
        commit_interval: Seconds between commits; 0 (the default) commits after every
            batch. A longer interval is how auto-commit behaves: a rewind then runs
            ahead of the group's committed offsets for a while.
    """

    def __init__(
        self,
        config: dict[str, Any],
        group: str,
        reader_id: str,
        topic: str,
        history: str | Path,
        *,
        commit_interval: float = 0.0,
    ) -> None:
        self.group = group
        self.commit_interval = commit_interval
        self._next_commit = 0.0
        self.reader_id = reader_id
        self.topic = topic
        self.delivered = 0
        self.pass_no = 0
        self._history = HistoryWriter(history)
        self._committed: dict[tuple[str, int], int] = {}
        hooks = [*config.get("ordered.hooks", ()), _CommitHook(self)]
        self._consumer = OrderedConsumer(
            {**config, "group.id": group, "enable.auto.commit": False, "ordered.hooks": hooks}
        )
        self._new_pass("start")

    @property
    def consumer(self) -> OrderedConsumer:
        """The wrapped ``OrderedConsumer``."""
        return self._consumer

    def _new_pass(self, why: str, partitions: list[Any] | None = None) -> None:
        if why != "start":
            self.pass_no += 1
        event: dict[str, Any] = {"ev": "pass", "g": self.group, "r": self.reader_id}
        event.update(n=self.pass_no, why=why)
        if partitions is not None:
            event["parts"] = sorted(tp.partition for tp in partitions)
        self._history.write(event)

    def _on_assign(self, _consumer: Any, partitions: list[Any]) -> None:
        self._new_pass("assign", partitions)

    def _on_revoke(self, _consumer: Any, partitions: list[Any]) -> None:
        self._new_pass("revoke", partitions)

    def _on_lost(self, _consumer: Any, partitions: list[Any]) -> None:
        self._new_pass("lost", partitions)

    def subscribe(self) -> None:
        """Subscribe to the topic (passes follow the assignment)."""
        self._consumer.subscribe(
            [self.topic],
            on_assign=self._on_assign,
            on_revoke=self._on_revoke,
            on_lost=self._on_lost,
        )

    def poll_once(self, timeout: float = 0.5, batch: int = 500) -> int:
        """Consume one batch, record it, commit it; return how many records came."""
        msgs = self._consumer.consume(batch, timeout=timeout)
        count = 0
        ts = now_ns()
        for msg in msgs:
            if msg.error() is not None:
                continue
            found = decode_value(msg.value())
            if found is None:
                continue
            key = msg.key().decode() if msg.key() is not None else ""
            self._history.add(
                {
                    "ev": "dlv",
                    "g": self.group,
                    "r": self.reader_id,
                    "n": self.pass_no,
                    "p": found[0],
                    "k": key,
                    "s": found[1],
                    "tp": msg.partition(),
                    "o": msg.offset(),
                    "e": _epoch_of(msg),
                    "ts": ts,
                }
            )
            count += 1
        # Recorded before committed: whatever the group counts as consumed is in the history.
        self._history.flush()
        self.delivered += count
        if msgs and time.monotonic() >= self._next_commit:
            self._next_commit = time.monotonic() + self.commit_interval
            self.commit()
        return count

    def commit(self) -> None:
        """Commit what was delivered (synchronously); errors a rebalance explains are ignored.

        Each partition the commit answered for (no error, an offset) is recorded (``cmt``).
        """
        try:
            result = self._consumer.commit(asynchronous=False)
        except KafkaException as exc:
            if exc.args[0].code() not in _RETRIED_COMMIT_ERRORS:
                raise
            return
        for tp in result or ():
            if tp.error is None:
                self.record_commit(tp.topic, tp.partition, tp.offset, "commit")
        self._history.flush()

    def record_commit(self, topic: str, partition: int, offset: int, why: str) -> None:
        """Queue a ``cmt`` event: the group's committed ``offset`` of ``partition``.

        Nothing is queued for an offset that is not one (negative: nothing committed),
        nor for a commit of the offset this reader recorded last for the partition: the
        earlier event says more (a commit is checked against what was delivered before
        its time). What the reader reads back (``read``) is always recorded.
        """
        if offset < 0:
            return
        if why != "read" and self._committed.get((topic, partition)) == offset:
            return
        self._committed[(topic, partition)] = offset
        event: dict[str, Any] = {"ev": "cmt", "g": self.group, "r": self.reader_id, "t": topic}
        event.update(tp=partition, o=offset, why=why)
        self._history.add(event)

    def _record_committed(self, timeout: float = 5.0) -> None:
        """Record the committed offsets of the assignment as Kafka has them (``read``)."""
        try:
            assigned = self._consumer.assignment()
            if not assigned:
                return
            wanted = [TopicPartition(tp.topic, tp.partition) for tp in assigned]
            found = self._consumer.committed(wanted, timeout=timeout)
        except (KafkaException, RuntimeError):
            return  # a reader that cannot ask any more has nothing more to record
        for tp in found or ():
            if tp.error is None:
                self.record_commit(tp.topic, tp.partition, tp.offset, "read")
        self._history.flush()

    def seek_to_beginning(self) -> list[int]:
        """Seek every assigned partition back to its log start; a new pass. Returns them."""
        assigned = self._consumer.assignment()
        self._new_pass("seek", assigned)
        sought = []
        for tp in assigned:
            low, _high = self._consumer.get_watermark_offsets(
                TopicPartition(tp.topic, tp.partition), timeout=10
            )
            try:
                self._consumer.seek(TopicPartition(tp.topic, tp.partition, max(low, 0)))
            except KafkaException:
                continue  # not fetching yet: it starts from the committed offset anyway
            sought.append(tp.partition)
        return sought

    def run(self, stop: Callable[[], bool], idle_exit: float | None = None) -> None:
        """Consume until ``stop()``, or until nothing came for ``idle_exit`` seconds."""
        quiet_since = time.monotonic()
        while not stop():
            if self.poll_once():
                quiet_since = time.monotonic()
            elif idle_exit is not None and time.monotonic() - quiet_since > idle_exit:
                return

    def close(self) -> None:
        """Record the assignment's committed offsets, close the consumer and the history."""
        try:
            self._record_committed()
            self._consumer.close()
        finally:
            self._history.close()
