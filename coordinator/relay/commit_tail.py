"""Learn of consumer group commits as they happen: tail Kafka's ``__consumer_offsets``.

Kafka keeps every group's commits as records of its internal ``__consumer_offsets``
topic; tools such as Burrow read them to see commits without asking each group. The
position relay (:mod:`coordinator.relay.position_relay`) does the same to learn *when* to look:
a commit record of a partition someone waits on makes the relay read that group's
committed offsets (an OffsetFetch) at once, instead of at its next periodic round. The
record itself is only a trigger; what the relay publishes is what OffsetFetch returns.

The tail never joins a group and never commits (an assign-only client), starts at the
end of each partition, and reads with librdkafka's default ``read_committed`` (a
transaction's offsets show when it commits). Only the key of each record is parsed: key
versions 0 and 1 are offset commits (``group``, ``topic``, ``partition``); others (group
metadata) are skipped. When the topic cannot be read (not created yet, or an ACL
forbids it) the tail says so once and the relay keeps its periodic rounds.
"""

from __future__ import annotations

import logging
import struct
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

from confluent_kafka import OFFSET_END, Consumer, KafkaError, KafkaException, TopicPartition

from coordinator.kernel.kafka_retry import RetryPolicy
from coordinator.kernel.supervise import Heartbeat

__all__ = ["OFFSETS_TOPIC", "CommitTail", "parse_commit_key"]

_log = logging.getLogger(__name__)
_rdkafka_log = logging.getLogger(f"{__name__}.librdkafka")

OFFSETS_TOPIC: Final = "__consumer_offsets"
"""Kafka's internal topic of group commits."""

# The pauses between tries to assign the topic (up to 5 s; checked against stop).
_ASSIGN_RETRY: Final = RetryPolicy(max_tries=None, delay=1.0, backoff=2.0, max_delay=5.0)
_FATAL: Final = {
    KafkaError.TOPIC_AUTHORIZATION_FAILED,
    KafkaError.GROUP_AUTHORIZATION_FAILED,
    KafkaError.CLUSTER_AUTHORIZATION_FAILED,
}


def parse_commit_key(key: bytes | None) -> tuple[str, str, int] | None:
    """``(group, topic, partition)`` of an offset-commit key, ``None`` for any other key.

    The key is Kafka's ``OffsetCommitKey``: an int16 version (0 or 1), then the group and
    the topic as int16-length UTF-8 strings, then the int32 partition.
    """
    if key is None or len(key) < 2:
        return None
    try:
        (version,) = struct.unpack_from(">h", key, 0)
        if version not in (0, 1):
            return None
        (length,) = struct.unpack_from(">h", key, 2)
        group = key[4 : 4 + length].decode()
        at = 4 + length
        (length,) = struct.unpack_from(">h", key, at)
        topic = key[at + 2 : at + 2 + length].decode()
        at += 2 + length
        (partition,) = struct.unpack_from(">i", key, at)
    except (struct.error, UnicodeDecodeError):
        return None
    if len(key) != at + 4:
        return None
    return group, topic, partition


def _sleep_unless(stop: Callable[[], bool], seconds: float) -> None:
    """Sleep ``seconds``, waking every 0.2 s to return early once ``stop()`` is true."""
    until = time.monotonic() + seconds
    while not stop() and (left := until - time.monotonic()) > 0:
        time.sleep(min(0.2, left))


class CommitTail:
    """Call ``on_commit(group, topic, partition)`` for every commit, soon after it is made.

    Args:
        config: librdkafka settings of a client of the cluster (``bootstrap.servers``
            and the security settings).
        on_commit: Called on the tail's thread; must be quick.
        progress: Called with one line when the tail cannot read the topic.
        timeout: Seconds a metadata request may take.
    """

    def __init__(
        self,
        config: Mapping[str, Any],
        on_commit: Callable[[str, str, int], None],
        progress: Callable[[str], None] | None = None,
        timeout: float = 10.0,
    ) -> None:
        self._config = dict(config)
        self._on_commit = on_commit
        self._progress = progress or (lambda _message: None)
        self._timeout = timeout
        self._said = ""
        self.healthy = False
        """Whether the tail is reading the topic now (assigned, no fatal error)."""
        self.seen = 0
        """Commit records read (for tests)."""

    def run(self, stop: Callable[[], bool], beat: Heartbeat | None = None) -> None:
        """Tail the topic until ``stop()`` is true (checked every 0.2 s).

        An unexpected error is let out to the supervisor that runs this (the relay's:
        logged, counted and restarted); ``beat`` hears of each round's progress.
        """

        def stopped() -> bool:
            if beat is not None:
                beat.beat()
            return stop()

        consumer = Consumer(
            {
                "group.id": "ordered-coordinator-commit-tail",  # never joined
                "enable.auto.commit": False,
                "enable.partition.eof": False,
                "fetch.wait.max.ms": 100,
                "socket.timeout.ms": int(self._timeout * 1000),
                "logger": _rdkafka_log,
                **self._config,
            }
        )
        pauses = _ASSIGN_RETRY.pauses()
        try:
            while not stopped():
                if self._assign(consumer):
                    self.healthy = True
                    try:
                        self._tail(consumer, stopped)
                    finally:
                        self.healthy = False
                    return
                _sleep_unless(stop, next(pauses))
        finally:
            consumer.close()

    def _say(self, message: str) -> None:
        if message != self._said:
            self._progress(f"position relay: {message}")
        self._said = message

    def _assign(self, consumer: Any) -> bool:
        try:
            metadata = consumer.list_topics(OFFSETS_TOPIC, timeout=self._timeout)
        except KafkaException as exc:
            self._say(f"cannot read {OFFSETS_TOPIC} ({exc}): relaying every interval only")
            return False
        found = metadata.topics.get(OFFSETS_TOPIC)
        if found is None or found.error is not None or not found.partitions:
            error = found.error if found is not None else None
            self._say(
                f"cannot read {OFFSETS_TOPIC} ({error.str() if error else 'no partitions'}): "
                "relaying every interval only"
            )
            return False
        consumer.assign([TopicPartition(OFFSETS_TOPIC, p, OFFSET_END) for p in found.partitions])
        return True

    def _tail(self, consumer: Any, stop: Callable[[], bool]) -> None:
        while not stop():
            first = consumer.poll(0.2)
            if first is None:
                continue
            # Drain what else is there without waiting: one wake-up per batch.
            for message in [first, *consumer.consume(500, 0)]:
                error = message.error()
                if error is not None:
                    if error.code() in _FATAL:
                        self._say(f"cannot read {OFFSETS_TOPIC}: {error.str()}")
                        return
                    _log.debug("commit tail: %s", error.str())
                    continue
                commit = parse_commit_key(message.key())
                if commit is not None:
                    self.seen += 1
                    self._on_commit(*commit)
