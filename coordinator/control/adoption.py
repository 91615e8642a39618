"""Adopting and un-adopting topics: the part of the controller that starts and ends a layout.

:class:`Adoption` is a base of :class:`~coordinator.control.controller.Controller`; it reads and
writes through the controller's store and Kafka admin.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from coordinator.control.transition import (
    _id_text,
)
from coordinator.kernel.errors import (
    LayoutError,
    StoreError,
    TransitionInProgressError,
)
from coordinator.kernel.kafka_admin import KafkaAdmin, KafkaTopic, UnknownTopicError
from coordinator.kernel.store import EpochRecord, LayoutStore, TopicRecord
from coordinator.kernel.topic_ids import check_topic_id
from linear_hash import ALGORITHMS

__all__ = ["Adoption", "adopted_topic_deleted"]

Progress = Callable[[str], None]


def adopted_topic_deleted(topic: str) -> UnknownTopicError:
    """The error for an adopted ``topic`` that Kafka no longer has: it says what to do."""
    return UnknownTopicError(
        f"topic {topic} does not exist in Kafka, but a layout of it is adopted (the "
        f"topic was deleted?): remove the layout with `ordered unadopt {topic}`, or "
        f"create the topic again and run `ordered adopt {topic} --replace`"
    )


class Adoption:
    """Adoption and un-adoption (methods of :class:`~coordinator.control.controller.Controller`)."""

    _store: LayoutStore
    _admin: KafkaAdmin
    _progress: Progress

    # --- adoption ------------------------------------------------------------------

    def adopt(
        self,
        topic: str,
        algorithm: str = "murmur3",
        ordered: bool = True,
        replace_existing: bool = False,
    ) -> TopicRecord:
        """Adopt ``topic`` with its current partition count as ``initial``.

        The layout is bound to Kafka's topic id of ``topic``
        (:attr:`TopicRecord.topic_id`). Idempotent: adopting again with the same
        algorithm and ``ordered`` returns the existing record. A record of an older
        version (no topic id) with the same settings is bound to the topic's current
        id, unless Kafka's topic has fewer partitions than the layout (then it cannot
        be the adopted topic).

        With ``replace_existing`` (``ordered adopt --replace``), an existing layout of
        another topic id or other settings is replaced: every epoch is dropped and
        the topic adopted afresh, with an epoch numbered after the old last one.
        Refused while an epoch of the adopted topic is pending; a pending epoch of a
        topic that was deleted (another id in Kafka now) does not hold it up.

        Raises:
            LayoutError: Unknown algorithm, or adopted already with other settings.
            TopicIdMismatchError: Adopted for another topic id (without
                ``replace_existing``).
            TransitionInProgressError: An epoch is pending (``replace_existing``), or
                the record changed meanwhile.
            UnknownTopicError: The topic does not exist in Kafka.
            OrderedKafkaError: Kafka failed.
            StoreError: ZooKeeper failed or holds a bad record.
        """
        if algorithm not in ALGORITHMS:
            raise LayoutError(
                f"unknown algorithm {algorithm!r} (known: {', '.join(sorted(ALGORITHMS))})"
            )
        kafka = self._kafka_topic(topic)
        existing, version = self._store.get_topic_and_version(topic)
        if existing is not None:
            same = existing.algorithm == algorithm and existing.ordered == ordered
            if same and existing.topic_id == kafka.topic_id:
                return existing
            if not replace_existing:
                return self._adopt_again(existing, version, kafka, same)
            self._check_no_live_pending(existing, kafka, "re-adopt")
        compacted = self._admin.is_compacted(topic)
        now = time.time()
        # An epoch number never names two layouts of one topic name, so a new adoption
        # continues after the old epochs (a client that missed the change still sees
        # a newer record, and no cached gate of an old epoch matches a new one).
        first = self._store.first_epoch(topic) if existing is None else existing.epoch + 1
        record = TopicRecord(
            topic=topic,
            topic_id=kafka.topic_id,
            initial=kafka.partitions,
            active=kafka.partitions,
            epoch=first,
            pending=None,
            physical=kafka.partitions,
            algorithm=algorithm,
            ordered=ordered,
            compacted=compacted,
            adopted_at=now,
        )
        epoch = EpochRecord(
            topic=topic,
            epoch=first,
            initial=kafka.partitions,
            from_active=kafka.partitions,
            to_active=kafka.partitions,
            state="sealed",
            edges=(),
            boundaries={},
            producers=(),
            expired={},
            created_at=now,
            sealed_at=now,
        )
        if existing is None:
            self._store.create_topic(record, epoch)
            self._progress(f"adopted {topic}: {kafka.partitions} partitions, {algorithm}")
        else:
            self._store.replace_topic(record, epoch, version)
            self._progress(
                f"re-adopted {topic} (topic id {kafka.topic_id}): {kafka.partitions} "
                f"partitions, {algorithm}, from epoch {first}; the layout of "
                f"{_id_text(existing.topic_id)} is gone"
            )
        result = self._store.get_topic(topic)
        if result is None:
            raise StoreError(f"topic {topic} vanished right after its adoption")
        return result

    def _kafka_topic(self, topic: str) -> KafkaTopic:
        """Kafka's description of ``topic``; a deleted adopted topic says what to do."""
        try:
            return self._admin.describe_topic(topic)
        except UnknownTopicError:
            if self._store.get_topic(topic) is None:
                raise
            raise adopted_topic_deleted(topic) from None

    def _adopt_again(
        self, existing: TopicRecord, version: int, kafka: KafkaTopic, same: bool
    ) -> TopicRecord:
        """``adopt`` of an adopted topic without ``--replace``: bind, or refuse."""
        topic = existing.topic
        check_topic_id(existing, kafka.topic_id)
        if not same:
            raise LayoutError(
                f"topic {topic} is already adopted with algorithm {existing.algorithm}, "
                f"ordered {str(existing.ordered).lower()} (re-adopt it with other settings: "
                f"ordered adopt {topic} --replace)"
            )
        # A record of an older version: bind it to the topic Kafka has now, if it can be
        # the adopted one (Kafka never takes partitions away).
        if kafka.partitions < existing.physical:
            raise LayoutError(
                f"topic {topic} has {kafka.partitions} partitions in Kafka, fewer than the "
                f"{existing.physical} of its layout: it is not the topic that was adopted "
                f"(deleted and created again?); re-adopt it with `ordered adopt {topic} "
                f"--replace` or remove the layout with `ordered unadopt {topic}`"
            )
        bound = self._store.bind_topic_id(topic, kafka.topic_id, version)
        self._progress(f"bound the layout of {topic} to topic id {kafka.topic_id}")
        return bound

    def _check_no_live_pending(
        self, record: TopicRecord, kafka: KafkaTopic | None, what: str
    ) -> None:
        """Refuse to ``what`` a topic whose pending epoch belongs to the live topic."""
        if record.pending is None:
            return
        gone = kafka is None or (record.topic_id is not None and record.topic_id != kafka.topic_id)
        if gone:
            return  # the pending epoch's topic was deleted: nothing to wait for
        raise TransitionInProgressError(
            f"cannot {what} {record.topic}: epoch {record.pending} (to {record.active} "
            f"partitions) is pending; it completes with `ordered coordinator` running, or "
            f"run `ordered expand {record.topic} --to {record.active}` (or shrink) to "
            "complete it first"
        )

    def unadopt(self, topic: str) -> TopicRecord | None:
        """Remove ``topic``'s layout: its record and every epoch (``ordered unadopt``).

        Producers then route the topic as plain Kafka does and consumers read it
        without gates. Idempotent: a topic not adopted is left alone. Refused while an
        epoch of the adopted topic is pending; Kafka is asked only then, and a topic
        gone from Kafka (or created again, with another id) does not hold it up.

        Returns:
            The record removed, ``None`` when the topic was not adopted.

        Raises:
            TransitionInProgressError: An epoch is pending, or the record changed
                meanwhile.
            OrderedKafkaError: Kafka failed (asked only when an epoch is pending).
            StoreError: ZooKeeper failed or holds a bad record.
        """
        existing, version = self._store.get_topic_and_version(topic)
        if existing is None:
            return None
        if existing.pending is not None:
            kafka: KafkaTopic | None
            try:
                kafka = self._admin.describe_topic(topic)
            except UnknownTopicError:
                kafka = None
            self._check_no_live_pending(existing, kafka, "unadopt")
        self._store.remove_topic(topic, version)
        self._progress(f"unadopted {topic}: its layout (up to epoch {existing.epoch}) is gone")
        return existing
