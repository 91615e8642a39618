"""The sink's row loop (``spark_source.sink._produce_pairs``) against a fake producer.

Pure logic: which rows reach ``produce``, in which order, when librdkafka's queue is
full (``BufferError``) at any row, and where the loop stops after a failed delivery.
"""

from __future__ import annotations

from typing import Any

import pytest

sink = pytest.importorskip("spark_source.sink")


class FakeProducer:
    """``produce`` refuses the calls whose numbers are in ``full``; ``poll`` may report."""

    def __init__(self, full: set[int], fail_at_poll: int | None = None) -> None:
        self.full = full
        self.calls = 0
        self.queued: list[tuple[Any, Any]] = []
        self.polls = 0
        self.fail_at_poll = fail_at_poll
        self.failures: list[str] = []

    def produce(self, topic: str, value: Any, key: Any) -> None:
        assert topic == "t"
        self.calls += 1
        if self.calls in self.full:
            raise BufferError("Local: Queue full")
        self.queued.append((value, key))

    def poll(self, _timeout: float) -> int:
        self.polls += 1
        if self.polls == self.fail_at_poll:
            self.failures.append("_MSG_TIMED_OUT")
        return 0


def rows(n: int) -> tuple[list[bytes], list[bytes | None]]:
    return [f"v{i}".encode() for i in range(n)], [
        f"k{i}".encode() if i % 5 else None for i in range(n)
    ]


@pytest.mark.parametrize(
    "full",
    [
        set(),
        {1},  # the first row
        {2, 3, 4},  # one row refused three times
        {1024, 1025},  # the last row of the first chunk, then its retry
        {1025},  # the first row of the second chunk
        {7, 9, 2500, 2502, 3000},  # several, across chunks
    ],
)
def test_every_row_is_queued_once_in_order_whatever_the_queue_refuses(full: set[int]) -> None:
    values, keys = rows(3001)
    producer = FakeProducer(full)
    sink._produce_pairs(producer, producer.failures, "t", values, keys)
    assert producer.queued == list(zip(values, keys, strict=True))
    assert producer.calls == len(values) + len(full)


def test_a_failure_served_by_poll_stops_the_loop() -> None:
    values, keys = rows(5000)
    producer = FakeProducer({100, 101}, fail_at_poll=2)
    sink._produce_pairs(producer, producer.failures, "t", values, keys)
    # The row refused twice is queued after the second poll, which served the failure:
    # nothing after it.
    assert producer.queued == list(zip(values[:100], keys[:100], strict=True))
    assert producer.failures == ["_MSG_TIMED_OUT"]


def test_columns_of_different_lengths_are_refused() -> None:
    producer = FakeProducer(set())
    with pytest.raises(ValueError, match="2 values but 1 keys"):
        sink._produce_pairs(producer, producer.failures, "t", [b"a", b"b"], [b"k"])


class RecordingProducer:
    """Records every ``produce`` call's topic, value, key and partition."""

    def __init__(self) -> None:
        self.sent: list[tuple[Any, ...]] = []

    def produce(
        self, topic: str, value: Any, key: Any, partition: int = -1, headers: Any = None
    ) -> None:
        self.sent.append((topic, value, key, partition))

    def poll(self, _timeout: float) -> int:
        return 0


@pytest.mark.parametrize("kind", ["string", "large_string"])
@pytest.mark.parametrize("with_partition", [False, True])
def test_string_keys_and_values_are_sent_as_their_utf8_bytes(
    kind: str, with_partition: bool
) -> None:
    # Spark's Kafka sink writes a string column's UTF-8 bytes; the Arrow view hands
    # confluent the same bytes without a str in between (non-ASCII and nulls kept).
    pa = pytest.importorskip("pyarrow")
    keys = ["k1", "clé", None]
    values = ["v1", "été", "x" * 100]
    columns = [pa.array(keys, type=getattr(pa, kind)()), pa.array(values, type=pa.string())]
    names = ["KEY", "value"]
    if with_partition:
        columns.append(pa.array([0, 1, 2], type=pa.int32()))
        names.append("partition")
    batch = pa.record_batch(columns, names=names)
    producer = RecordingProducer()
    options = sink.SinkOptions(topic="t", producer={})
    sink._produce_rows(producer, [], options, batch)
    assert [(v, k) for _t, v, k, _p in producer.sent] == [
        (b"v1", b"k1"),
        ("été".encode(), "clé".encode()),
        (b"x" * 100, None),
    ]
    assert all(type(v) is bytes for _t, v, _k, _p in producer.sent)


def test_binary_columns_and_other_columns_are_left_as_they_are() -> None:
    pa = pytest.importorskip("pyarrow")
    batch = pa.record_batch(
        [pa.array([b"\xff\x00"], type=pa.binary()), pa.array(["t"])], names=["value", "topic"]
    )
    assert sink._column(batch, "value", as_bytes=True) == [b"\xff\x00"]
    assert sink._column(batch, "topic") == ["t"]
    assert sink._column(batch, "key", as_bytes=True) is None
