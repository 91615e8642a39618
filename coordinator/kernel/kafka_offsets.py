"""ListOffsets for the admin helper: end, start and by-time offsets, asked until answered.

Every offset read of Kafka (the controller's boundaries, the trims, the position relay,
the Spark source's plans) is one :meth:`OffsetLister.read`: every kind asked (end,
start, by time) is in flight at once, partitions answered stay answered, and the rest
are asked again under the one :class:`~coordinator.kernel.kafka_retry.RetryPolicy`
until the helper's timeout. Asked again are a partition whose leader is not ready yet
(just created), an answer that holds no offset (OFFSET_INVALID while a broker
restarts) and librdkafka's "No leaders found", which also replaces the client (see
:meth:`OffsetLister.read`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Future
from typing import Any, Final

from confluent_kafka import IsolationLevel, KafkaError, KafkaException, TopicPartition

from coordinator.kernel.confluent_private import OffsetSpec
from coordinator.kernel.errors import OrderedKafkaError
from coordinator.kernel.kafka_retry import RetryPolicy, kafka_error_of, kafka_retriable

__all__ = ["EARLIEST", "LATEST", "OffsetLister", "Offsets", "at_time"]

Offsets = dict[str, dict[int, int]]
"""Offsets by topic, then partition."""

LATEST: Final[OffsetSpec] = OffsetSpec.latest()  # type: ignore[no-untyped-call]
"""The end offset (high watermark, or last stable offset under read_committed)."""

EARLIEST: Final[OffsetSpec] = OffsetSpec.earliest()  # type: ignore[no-untyped-call]
"""The log start offset (low watermark)."""


def at_time(timestamp_ms: int) -> OffsetSpec:
    """The offset of the first record at or after ``timestamp_ms`` (``-1``: none)."""
    spec: OffsetSpec = OffsetSpec.for_timestamp(timestamp_ms)
    return spec


Fail = Callable[[str, BaseException], OrderedKafkaError]


def _no_offset(what: str, tp: TopicPartition, offset: int) -> KafkaException:
    """The retriable error of an answer that holds no offset."""
    reason = f"no {what} offset of {tp.topic}[{tp.partition}] in Kafka's answer ({offset})"
    return KafkaException(KafkaError(KafkaError.OFFSET_NOT_AVAILABLE, reason, retriable=True))


class OffsetLister:
    """ListOffsets through one admin client, replaced when its metadata goes stale.

    Args:
        client: The admin client asked first.
        new_client: Makes another client of the same cluster and settings.
        timeout: Seconds one request may take, and the deadline of one :meth:`list`.
        fail: Makes the error raised (``what``, the cause).
    """

    def __init__(
        self, client: Any, new_client: Callable[[], Any], timeout: float, fail: Fail
    ) -> None:
        self._client = client
        self._new_client = new_client
        self._timeout = timeout
        self._fail = fail

    def read(
        self,
        wanted: Mapping[str, Iterable[int]],
        specs: Mapping[str, OffsetSpec],
        isolation_level: IsolationLevel | None = None,
    ) -> dict[str, Offsets]:
        """Ask each of ``specs`` (a name such as ``"end"`` -> spec) for ``wanted``.

        A negative offset answers a by-time spec (no record that late); for
        :data:`LATEST` and :data:`EARLIEST` it is no answer and is asked again.

        Returns:
            Per name of ``specs``, the offsets of every wanted partition.

        Raises:
            OrderedKafkaError: Kafka reported an error that is not transient, or the
                partitions were not all answered within the timeout.
        """
        asked = {t: sorted(set(parts)) for t, parts in wanted.items()}
        found: dict[str, Offsets] = {name: {t: {} for t in asked} for name in specs}
        # A partition created a moment ago may have no leader yet: asked again.
        policy = RetryPolicy(max_tries=None, deadline=self._timeout, delay=0.1, max_delay=1.0)
        return policy.call(self._ask_missing, asked, specs, isolation_level, found)

    def _ask_missing(
        self,
        asked: Mapping[str, list[int]],
        specs: Mapping[str, OffsetSpec],
        isolation_level: IsolationLevel | None,
        found: dict[str, Offsets],
    ) -> dict[str, Offsets]:
        """One round: every spec's request for what is not answered yet, all in flight."""
        client = self._client
        kwargs: dict[str, Any] = {"request_timeout": self._timeout}
        if isolation_level is not None:
            kwargs["isolation_level"] = isolation_level
        pending: list[tuple[str, dict[TopicPartition, Future[Any]]]] = []
        for name, spec in specs.items():
            request = {
                TopicPartition(t, p): spec
                for t, parts in asked.items()
                for p in parts
                if p not in found[name][t]
            }
            if not request:
                continue
            try:
                pending.append((name, client.list_offsets(request, **kwargs)))
            except KafkaException as exc:
                raise self._fail(f"cannot list the {name} offsets", exc) from exc
        retry: KafkaException | None = None
        for name, futures in pending:
            must_answer = specs[name] is LATEST or specs[name] is EARLIEST
            for tp, future in futures.items():
                try:
                    offset = int(future.result(timeout=self._timeout + 5).offset)
                    if offset < 0 and must_answer:
                        # OFFSET_INVALID (-1001) and no error, seen while a broker
                        # restarts: not an end that went back.
                        raise _no_offset(name, tp, offset)
                except KafkaException as exc:
                    if not kafka_retriable(exc):
                        what = f"cannot list the {name} offset of {tp.topic}[{tp.partition}]"
                        raise self._fail(what, exc) from exc
                    retry = exc
                    error = kafka_error_of(exc)
                    if error is not None and error.code() == KafkaError._NOENT:
                        self._renew(client)
                    continue
                found[name][tp.topic][tp.partition] = offset
        if retry is not None:
            # The answered partitions stay in ``found``: the next round asks the rest.
            raise self._fail(f"cannot list the offsets of {', '.join(sorted(asked))}", retry)
        return found

    def _renew(self, stale: Any) -> None:
        # "No leaders found": on three brokers one broker's metadata was seen to lag by
        # over a minute, and a client whose cache it filled kept missing the partitions
        # created a moment ago, forced refreshes notwithstanding. A new client starts
        # from a fresh cache (and most likely asks another broker); it is kept for the
        # calls after this one, which the stale cache would fail in the same way.
        if self._client is stale:
            self._client = self._new_client()
