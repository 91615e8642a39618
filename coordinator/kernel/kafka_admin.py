"""The one helper for Kafka admin calls, over confluent-kafka's ``AdminClient``.

Every admin call of the service, the ``ordered`` commands, the clients' topic-id check,
the Spark source and the tools (chaos, the demo, the dev cluster, the test rig, the
benchmarks) goes through :class:`KafkaAdmin`: topic metadata and descriptions
(partition count and Kafka's topic id), the broker count, CreateTopics and
DeleteTopics, an idempotent CreatePartitions, end, start and by-time offsets
(ListOffsets, :mod:`coordinator.kernel.kafka_offsets`), DeleteRecords, consumer groups
(their committed offsets, state and members, and setting their offsets) and the
``cleanup.policy`` of a topic. No other module makes an ``AdminClient``
(``tests/unit/test_one_admin_client.py``). Every call is bounded by the helper's
``timeout`` so a Kafka that is down fails fast. Kafka errors become
:class:`~coordinator.kernel.errors.OrderedKafkaError` keeping the original
``KafkaError`` (``_TIMED_OUT`` for an answer that did not come in time); a topic that
does not exist is an :class:`UnknownTopicError` (a usage error).
"""

from __future__ import annotations

import concurrent.futures
import logging
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from dataclasses import dataclass
from typing import Any

from confluent_kafka import (
    ConsumerGroupState,
    ConsumerGroupTopicPartitions,
    IsolationLevel,
    KafkaError,
    KafkaException,
    TopicCollection,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient

from coordinator.kernel.confluent_private import (
    ConfigResource,
    NewPartitions,
    NewTopic,
    ResourceType,
)
from coordinator.kernel.errors import OrderedKafkaError, UnknownTopicError
from coordinator.kernel.group_probes import GroupProbes
from coordinator.kernel.kafka_offsets import EARLIEST, LATEST, OffsetLister, Offsets, at_time
from coordinator.kernel.kafka_retry import TRANSIENT_ERRORS, RetryPolicy, kafka_error_of
from coordinator.kernel.replicas import PartitionReplicas, replicas_of

__all__ = [
    "TRANSIENT_ERRORS",
    "DeleteOutcome",
    "GroupDescription",
    "GroupMember",
    "KafkaAdmin",
    "KafkaTopic",
    "UnknownTopicError",
    "WaitReport",
]

WaitReport = Callable[[int, float], None]
"""Progress of a DeleteRecords: called with (partitions still waiting, seconds so far)."""

# librdkafka logs every refused connection; the errors that matter reach the caller as
# exceptions, so these logs go to the application's logging only if it configures it.
_rdkafka_log = logging.getLogger("coordinator.kernel.kafka_admin.librdkafka")
_rdkafka_log.addHandler(logging.NullHandler())


# Group clients kept for committed-offset reads (the position relay asks every round).
_MAX_PROBES = 64

# Topics awaited in the metadata after a CreateTopics: up to this many are asked for by
# name; more, with one request for the whole cluster's metadata.
_NAMED_TOPICS = 16


@dataclass(frozen=True)
class KafkaTopic:
    """What Kafka says about one topic.

    Attributes:
        name: The topic name.
        topic_id: Kafka's topic id (base64, as Kafka's tools print it); a topic
            deleted and created again under the same name gets a new one.
        partitions: The partition count.
        replicas: Leader, replicas and ISR per partition (``kafka-topics --describe``).
    """

    name: str
    topic_id: str
    partitions: int
    replicas: tuple[PartitionReplicas, ...] = ()


@dataclass(frozen=True, slots=True)
class DeleteOutcome:
    """What DeleteRecords answered for one partition.

    Attributes:
        low_watermark: The partition's low watermark (minimum log start offset over its
            live replicas), ``-1`` when the answer is an error.
        error: The ``KafkaError`` of the partition, ``None`` on success.
    """

    low_watermark: int
    error: KafkaError | None


@dataclass(frozen=True, slots=True)
class GroupMember:
    """One member of a consumer group.

    Attributes:
        member_id: The member id (``CONSUMER-ID`` in Kafka's tools).
        client_id: The member's ``client.id``.
        host: The host the member connected from (as the broker saw it).
        assignment: The ``(topic, partition)`` pairs assigned to it.
    """

    member_id: str
    client_id: str
    host: str
    assignment: tuple[tuple[str, int], ...]


@dataclass(frozen=True, slots=True)
class GroupDescription:
    """A consumer group's state and members.

    Attributes:
        group: The group id.
        state: ``STABLE``, ``EMPTY``, ``PREPARING_REBALANCE``, ... or ``DEAD`` (the
            group does not exist).
        members: Its members.
    """

    group: str
    state: str
    members: tuple[GroupMember, ...]


def _kafka_error(exc: BaseException) -> KafkaError | None:
    if isinstance(exc, TimeoutError):  # a future not done in time
        return KafkaError(KafkaError._TIMED_OUT)
    return kafka_error_of(exc) if isinstance(exc, KafkaException) else None


class KafkaAdmin:
    """Admin operations on one Kafka cluster.

    Args:
        bootstrap_servers: Kafka's ``bootstrap.servers``.
        timeout: Seconds any single call may take before it fails.
        config: Extra librdkafka settings for the admin client.
    """

    def __init__(
        self, bootstrap_servers: str, timeout: float = 10.0, config: dict[str, Any] | None = None
    ) -> None:
        self._bootstrap = bootstrap_servers
        self._timeout = timeout
        conf: dict[str, Any] = {
            "bootstrap.servers": bootstrap_servers,
            "socket.timeout.ms": int(timeout * 1000),
            "logger": _rdkafka_log,
        }
        conf.update(config or {})
        # Security settings (SASL, SSL) reach every client this helper makes.
        self._config = dict(config or {})
        self._conf = conf
        self._admin = AdminClient(conf)
        self._offsets = OffsetLister(self._admin, lambda: AdminClient(conf), timeout, self._fail)
        self._probes = GroupProbes(self.client_config(), timeout, _rdkafka_log, _MAX_PROBES)

    @property
    def bootstrap_servers(self) -> str:
        """Kafka's ``bootstrap.servers``."""
        return self._bootstrap

    def client_config(self) -> dict[str, Any]:
        """librdkafka settings for another client of this cluster (servers, security)."""
        return {"bootstrap.servers": self._bootstrap, **self._config}

    @property
    def principal(self) -> str | None:
        """The SASL user this helper authenticates as (``sasl.username``), if any."""
        user = self._config.get("sasl.username")
        return None if user is None else str(user)

    def _fail(self, what: str, exc: BaseException) -> OrderedKafkaError:
        error = _kafka_error(exc)
        detail = error.str() if error is not None else str(exc)
        return OrderedKafkaError(f"Kafka at {self._bootstrap}: {what}: {detail}", error)

    def partition_count(self, topic: str) -> int:
        """Return the number of partitions ``topic`` has in Kafka.

        Raises:
            UnknownTopicError: The topic does not exist.
            OrderedKafkaError: Kafka did not answer in time or reported an error.
        """
        try:
            metadata = self._admin.list_topics(topic, timeout=self._timeout)
        except KafkaException as exc:
            raise self._fail(f"cannot read metadata of topic {topic}", exc) from exc
        info = metadata.topics.get(topic)
        if info is None:
            raise UnknownTopicError(f"topic {topic} does not exist in Kafka")
        if info.error is not None:
            if info.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
                raise UnknownTopicError(f"topic {topic} does not exist in Kafka")
            raise OrderedKafkaError(
                f"Kafka at {self._bootstrap}: metadata of topic {topic}: {info.error.str()}",
                info.error,
            )
        return len(info.partitions)

    def describe_topic(self, topic: str, *, diagnose: bool = True) -> KafkaTopic:
        """Return ``topic``'s id and partition count (one DescribeTopics request).

        Args:
            topic: The topic.
            diagnose: On a timeout, make a metadata request too, whose error names the
                cause (a transport failure, say); ``False`` keeps the call within one
                ``timeout`` (clients that only retry).

        Raises:
            UnknownTopicError: The topic does not exist.
            OrderedKafkaError: Kafka did not answer in time or reported an error.
        """
        try:
            futures = self._admin.describe_topics(
                TopicCollection([topic]), request_timeout=self._timeout
            )
            description = futures[topic].result(timeout=self._timeout + 5)
        except KafkaException as exc:
            error = _kafka_error(exc)
            if error is not None and error.code() in (
                KafkaError.UNKNOWN_TOPIC_OR_PART,
                KafkaError._UNKNOWN_TOPIC,
            ):
                raise UnknownTopicError(f"topic {topic} does not exist in Kafka") from None
            if diagnose and error is not None and error.code() == KafkaError._TIMED_OUT:
                # DescribeTopics says only "timed out"; a metadata request names the
                # cause (say, a transport failure) and raises it.
                self.partition_count(topic)
            raise self._fail(f"cannot describe topic {topic}", exc) from exc
        return KafkaTopic(
            topic, str(description.topic_id), len(description.partitions), replicas_of(description)
        )

    def topic_id(self, topic: str) -> str:
        """Return Kafka's topic id of ``topic`` (see :meth:`describe_topic`)."""
        return self.describe_topic(topic).topic_id

    def create_partitions(self, topic: str, total: int) -> bool:
        """Make ``topic`` have at least ``total`` partitions (CreatePartitions).

        Idempotent: a topic that already has ``total`` or more is left alone. Returns
        once the metadata shows the new count.

        Returns:
            Whether partitions were created.

        Raises:
            UnknownTopicError: The topic does not exist.
            OrderedKafkaError: Kafka refused or did not answer in time.
        """
        if self.partition_count(topic) >= total:
            return False
        futures = self._admin.create_partitions(
            [NewPartitions(topic, total)],
            operation_timeout=self._timeout,
            request_timeout=self._timeout,
        )
        try:
            futures[topic].result(timeout=self._timeout + 5)
        except KafkaException as exc:
            error = _kafka_error(exc)
            # Another controller (or our own earlier attempt) got there first.
            already = error is not None and error.code() == KafkaError.INVALID_PARTITIONS
            if not (already and self.partition_count(topic) >= total):
                raise self._fail(f"cannot grow topic {topic} to {total} partitions", exc) from exc
        deadline = time.monotonic() + self._timeout
        while self.partition_count(topic) < total:
            if time.monotonic() > deadline:
                raise OrderedKafkaError(
                    f"Kafka at {self._bootstrap}: topic {topic} does not show {total} "
                    f"partitions {self._timeout} s after CreatePartitions"
                )
            time.sleep(0.05)
        return True

    def end_offsets(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return the end offset (high watermark) of each of ``partitions``.

        A partition whose leader is not ready yet (just created) is asked again until
        the helper's timeout.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        return self._offsets.read({topic: partitions}, {"end": LATEST})["end"][topic]

    def start_offsets(self, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return the log start offset (low watermark) of each of ``partitions``.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        return self._offsets.read({topic: partitions}, {"start": EARLIEST})["start"][topic]

    def offsets(
        self,
        partitions: Mapping[str, Iterable[int]],
        *,
        ends: bool = True,
        starts: bool = True,
        isolation_level: IsolationLevel | None = None,
    ) -> tuple[Offsets, Offsets]:
        """End and log start offsets of several topics' partitions, both asked at once.

        Both answers are in before this returns, so whatever is read afterwards (a
        layout, say) comes after the end offsets.

        Args:
            partitions: Topic -> partitions.
            ends: Ask the end offsets.
            starts: Ask the log start offsets.
            isolation_level: ``READ_COMMITTED``: the end is the last stable offset.

        Returns:
            ``(end offsets, log start offsets)``; one not asked for is empty.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        specs = {"end": LATEST} if ends else {}
        if starts:
            specs["start"] = EARLIEST
        found = self._offsets.read(partitions, specs, isolation_level)
        return found.get("end", {}), found.get("start", {})

    def topic_partitions(self, topics: Iterable[str] | None = None) -> dict[str, list[int]]:
        """The partitions of ``topics`` (every topic when ``None``), as the metadata says.

        Named topics are asked for by name, never the whole cluster's metadata (it grows
        with every topic in the cluster); a named topic that does not exist is left out,
        and not created when the client's ``allow.auto.create.topics`` is ``false``.

        Raises:
            OrderedKafkaError: Kafka did not answer in time.
        """
        listed: dict[str, Any]
        try:
            if topics is None:
                listed = dict(self._admin.list_topics(timeout=self._timeout).topics)
            else:
                listed = {
                    name: self._admin.list_topics(name, timeout=self._timeout).topics.get(name)
                    for name in topics
                }
        except KafkaException as exc:
            raise self._fail("cannot read the topic metadata", exc) from exc
        return {
            name: sorted(info.partitions)
            for name, info in listed.items()
            if info is not None and info.error is None
        }

    def broker_count(self, timeout: float | None = None) -> int:
        """Return how many brokers the cluster's metadata lists.

        Args:
            timeout: Seconds the request may take (``None``: the helper's timeout); a
                short one for a loop that waits for brokers to come up.

        Raises:
            OrderedKafkaError: Kafka did not answer in time.
        """
        wait = self._timeout if timeout is None else timeout
        try:
            metadata = self._admin.list_topics(timeout=wait)
        except KafkaException as exc:
            raise self._fail("cannot read the cluster metadata", exc) from exc
        return len(metadata.brokers)

    def create_topics(
        self,
        topics: Iterable[str],
        partitions: int,
        replication: int = 1,
        config: Mapping[str, str] | None = None,
    ) -> None:
        """Create ``topics``, each with ``partitions`` partitions (CreateTopics).

        Returns once the metadata lists every partition of each: a topic is created
        before every broker's metadata shows it. That wait is asked again under the one
        :class:`~coordinator.kernel.kafka_retry.RetryPolicy` until the helper's timeout.

        Args:
            topics: The topics' names.
            partitions: The partition count of each.
            replication: The replication factor of each.
            config: Topic settings (``cleanup.policy``, say).

        Raises:
            OrderedKafkaError: Kafka refused (a topic that exists, say), or did not
                answer or show the topics in time.
        """
        names = list(dict.fromkeys(topics))
        if not names:
            return
        new = [NewTopic(name, partitions, replication, config=dict(config or {})) for name in names]
        try:
            futures = self._admin.create_topics(
                new, operation_timeout=self._timeout, request_timeout=self._timeout
            )
            for name in names:
                futures[name].result(timeout=self._timeout + 5)
        except (KafkaException, TimeoutError) as exc:
            raise self._fail(f"cannot create topic(s) {', '.join(names)}", exc) from exc
        missing = list(names)
        policy = RetryPolicy(max_tries=None, deadline=self._timeout, delay=0.05, max_delay=0.5)
        policy.call(self._listed, missing, partitions)

    def _listed(self, missing: list[str], partitions: int) -> None:
        """Drop from ``missing`` the topics the metadata lists with ``partitions``
        partitions; a transient error while any is left."""
        named = missing if len(missing) <= _NAMED_TOPICS else None
        listed = self.topic_partitions(named)
        missing[:] = [name for name in missing if len(listed.get(name, ())) != partitions]
        if missing:
            reason = (
                f"topic(s) {', '.join(missing[:5])} not in the metadata with "
                f"{partitions} partitions yet"
            )
            raise OrderedKafkaError(
                f"Kafka at {self._bootstrap}: {reason}",
                KafkaError(KafkaError.UNKNOWN_TOPIC_OR_PART, reason),
            )

    def delete_topics(self, topics: Iterable[str]) -> None:
        """Delete ``topics`` (DeleteTopics), returning once Kafka has answered.

        Raises:
            UnknownTopicError: A topic does not exist.
            OrderedKafkaError: Kafka refused or did not answer in time.
        """
        names = list(dict.fromkeys(topics))
        if not names:
            return
        futures = self._admin.delete_topics(
            names, operation_timeout=self._timeout, request_timeout=self._timeout
        )
        for name in names:
            try:
                futures[name].result(timeout=self._timeout + 5)
            except (KafkaException, TimeoutError) as exc:
                error = _kafka_error(exc)
                if error is not None and error.code() == KafkaError.UNKNOWN_TOPIC_OR_PART:
                    raise UnknownTopicError(f"topic {name} does not exist in Kafka") from None
                raise self._fail(f"cannot delete topic {name}", exc) from exc

    def alter_group_offsets(
        self, group: str, offsets: Mapping[tuple[str, int], int]
    ) -> dict[tuple[str, int], KafkaError]:
        """Set ``group``'s committed offsets (AlterConsumerGroupOffsets), never joining it.

        Kafka refuses while the group has members. Errors of single partitions are
        returned, never raised, so the caller decides each one.

        Args:
            group: The group id.
            offsets: ``(topic, partition)`` -> the offset to commit.

        Returns:
            The partitions Kafka refused, with its error (empty: all set).

        Raises:
            OrderedKafkaError: The request failed or was not answered in time (a
                ``KafkaError`` of its own: ``_TIMED_OUT`` for no answer).
        """
        if not offsets:
            return {}
        request = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        try:
            futures = self._admin.alter_consumer_group_offsets(
                [ConsumerGroupTopicPartitions(group, request)], request_timeout=self._timeout
            )
            answer = futures[group].result(timeout=self._timeout + 5)
        except (KafkaException, TimeoutError) as exc:
            raise self._fail(f"cannot set the offsets of group {group}", exc) from exc
        return {
            (str(tp.topic), int(tp.partition)): tp.error
            for tp in (answer.topic_partitions or ())
            if tp.error is not None
        }

    def committed_offsets(
        self, group: str, topic: str, partitions: Iterable[int]
    ) -> dict[int, int]:
        """Return ``group``'s committed offset of each of ``partitions`` that has one.

        Read with an OffsetFetch of a client that never joins the group, so the group's
        members are not disturbed; the client is kept for the next call (:meth:`close`).
        Calls for different groups may run in parallel threads.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        return self.committed_offsets_of(group, {topic: partitions}).get(topic, {})

    def committed_offsets_of(
        self, group: str, wanted: Mapping[str, Iterable[int]]
    ) -> dict[str, dict[int, int]]:
        """:meth:`committed_offsets` of several topics (topic -> partitions), one request.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        wanted = {t: sorted(set(parts)) for t, parts in wanted.items() if parts}
        if not wanted:
            return {}
        try:
            got = self._probes.committed(group, wanted)
        except KafkaException as exc:
            what = f"cannot read the offsets group {group} committed on {', '.join(sorted(wanted))}"
            raise self._fail(what, exc) from exc
        out: dict[str, dict[int, int]] = {}
        for tp in got:
            if tp.error is not None:
                raise OrderedKafkaError(
                    f"Kafka at {self._bootstrap}: offset of group {group} on "
                    f"{tp.topic}[{tp.partition}]: {tp.error.str()}",
                    tp.error,
                )
            if tp.offset >= 0:
                out.setdefault(str(tp.topic), {})[tp.partition] = int(tp.offset)
        return out

    def list_groups(self) -> dict[str, str]:
        """Return every consumer group of the cluster and its state (``EMPTY``, ``STABLE``...).

        Raises:
            OrderedKafkaError: Kafka failed, or some broker's groups could not be listed
                (a partial list would let a group's commits go unseen).
        """
        try:
            result = self._admin.list_consumer_groups(request_timeout=self._timeout).result(
                timeout=self._timeout + 5
            )
        except KafkaException as exc:
            raise self._fail("cannot list the consumer groups", exc) from exc
        if result.errors:
            first = result.errors[0]
            error = first if isinstance(first, KafkaError) else _kafka_error(first)
            raise OrderedKafkaError(
                f"Kafka at {self._bootstrap}: cannot list the consumer groups of every "
                f"broker: {error.str() if error is not None else first}",
                error,
            )
        out: dict[str, str] = {}
        for listing in result.valid:
            state = listing.state
            out[str(listing.group_id)] = (
                state.name if isinstance(state, ConsumerGroupState) else str(state)
            )
        return out

    def group_offsets(self, group: str, topic: str, partitions: Iterable[int]) -> dict[int, int]:
        """Return ``group``'s committed offsets on ``partitions`` of ``topic``.

        Partitions without a commit are left out. Read as :meth:`committed_offsets`
        reads them (an OffsetFetch of a cached client that never joins the group), not
        with the admin API's ``list_consumer_group_offsets``: in librdkafka 2.16 a
        timed-out ``list_consumer_group_offsets`` while a broker restarts crashes the
        process (an ``rd_kafka_enq_once_del_source_return`` assertion or a segfault),
        and the coordinator daemon's sweep asks for every group every few seconds.

        Raises:
            OrderedKafkaError: Kafka failed or reported an error for a partition.
        """
        return self.committed_offsets(group, topic, partitions)

    def offsets_for_time(
        self, topic: str, partitions: Iterable[int], timestamp_ms: int
    ) -> dict[int, int]:
        """Return, per partition, the offset of the first record at or after ``timestamp_ms``.

        ListOffsets by timestamp; a partition with no such record gets its end offset
        (every record in it is older).

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        wanted = sorted(set(partitions))
        found = self._offsets.read({topic: wanted}, {"time": at_time(timestamp_ms)})["time"][topic]
        missing = [p for p in wanted if found.get(p, -1) < 0]
        if missing:
            found.update(self.end_offsets(topic, missing))
        return found

    def delete_records(
        self,
        offsets: Mapping[tuple[str, int], int],
        operation_timeout: float,
        request_timeout: float,
        on_wait: WaitReport | None = None,
    ) -> dict[tuple[str, int], DeleteOutcome]:
        """Send DeleteRecords for each ``(topic, partition) -> offset``; one answer each.

        ``operation_timeout`` is the request's ``TimeoutMs``: how long the leader waits
        for every live replica's log start offset to reach the offset. Errors are
        returned per partition (never raised), so the caller decides each one.
        ``on_wait`` is called about once a second while answers are outstanding.

        Raises:
            OrderedKafkaError: The request could not be sent at all.
        """
        if not offsets:
            return {}
        request = [TopicPartition(t, p, o) for (t, p), o in sorted(offsets.items())]
        started = time.monotonic()
        try:
            futures: dict[TopicPartition, Future[Any]] = self._admin.delete_records(
                request, request_timeout=request_timeout, operation_timeout=operation_timeout
            )
        except KafkaException as exc:
            raise self._fail("cannot send DeleteRecords", exc) from exc
        by_future = {f: (tp.topic, tp.partition) for tp, f in futures.items()}
        pending = set(by_future)
        limit = started + request_timeout + 10
        while pending:
            _done, pending = concurrent.futures.wait(pending, timeout=1.0)
            if pending and on_wait is not None:
                on_wait(len(pending), time.monotonic() - started)
            if pending and time.monotonic() > limit:
                break  # librdkafka fails each future by request_timeout; a safety net
        out: dict[tuple[str, int], DeleteOutcome] = {}
        for future, key in by_future.items():
            if future in pending:
                out[key] = DeleteOutcome(-1, KafkaError(KafkaError._TIMED_OUT))
                continue
            try:
                deleted = future.result(timeout=0)
                out[key] = DeleteOutcome(int(deleted.low_watermark), None)
            except KafkaException as exc:
                error = _kafka_error(exc) or KafkaError(KafkaError._FAIL, str(exc))
                out[key] = DeleteOutcome(-1, error)
        return out

    def describe_group(self, group: str) -> GroupDescription:
        """Return ``group``'s state and members (DescribeGroups), as
        ``kafka-consumer-groups --describe --members`` shows them.

        A group Kafka does not know comes back in state ``DEAD`` with no members.

        Raises:
            OrderedKafkaError: Kafka failed or did not answer in time.
        """
        try:
            futures = self._admin.describe_consumer_groups([group], request_timeout=self._timeout)
            got = futures[group].result(timeout=self._timeout + 5)
        except KafkaException as exc:
            error = _kafka_error(exc)
            if error is not None and error.code() == KafkaError.GROUP_ID_NOT_FOUND:
                return GroupDescription(group, "DEAD", ())
            raise self._fail(f"cannot describe group {group}", exc) from exc
        state = got.state
        members = tuple(
            GroupMember(
                member_id=str(m.member_id),
                client_id=str(m.client_id),
                host=str(m.host),
                assignment=tuple(
                    (str(tp.topic), int(tp.partition))
                    for tp in (m.assignment.topic_partitions if m.assignment else ())
                ),
            )
            for m in got.members
        )
        name = state.name if isinstance(state, ConsumerGroupState) else str(state)
        return GroupDescription(group, name, members)

    def close(self) -> None:
        """Close the cached group clients (the admin client needs no closing)."""
        self._probes.close()

    def is_compacted(self, topic: str) -> bool:
        """Return whether ``topic``'s ``cleanup.policy`` includes ``compact``.

        Raises:
            OrderedKafkaError: Kafka reported an error or did not answer in time.
        """
        resource = ConfigResource(ResourceType.TOPIC, topic)
        try:
            futures = self._admin.describe_configs([resource], request_timeout=self._timeout)
            entries = next(iter(futures.values())).result(timeout=self._timeout + 5)
        except KafkaException as exc:
            raise self._fail(f"cannot read the configuration of topic {topic}", exc) from exc
        entry = entries.get("cleanup.policy")
        value = "" if entry is None or entry.value is None else str(entry.value)
        return "compact" in {v.strip() for v in value.split(",")}
