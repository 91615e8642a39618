"""The layout store's records: JSON round trip, sorted keys, strict checks on read."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from coordinator.kernel.errors import StoreError
from coordinator.kernel.store import paths
from coordinator.kernel.store.records import (
    RECORD_VERSION,
    AckRecord,
    EpochRecord,
    EpochsRecord,
    GroupMemberRecord,
    ProducerRecord,
    TopicRecord,
)

PATH = "/ordered/topics/t/x"


def topic_record(**over: Any) -> TopicRecord:
    base: dict[str, Any] = {
        "topic": "t",
        "initial": 4,
        "active": 6,
        "epoch": 2,
        "pending": 2,
        "physical": 8,
        "algorithm": "murmur3",
        "ordered": True,
        "compacted": False,
        "adopted_at": 1700000000.5,
    }
    base.update(over)
    return TopicRecord(**base)


def epoch_record(**over: Any) -> EpochRecord:
    base: dict[str, Any] = {
        "topic": "t",
        "epoch": 2,
        "initial": 4,
        "from_active": 4,
        "to_active": 6,
        "state": "pending",
        "edges": [[0, 4], [1, 5]],
        "boundaries": {"4": 0, 5: 10},
        "producers": ["p1", "p2"],
        "expired": {"p2": 1700000001.0},
        "created_at": 1700000000,
        "sealed_at": None,
    }
    base.update(over)
    return EpochRecord(**base)


def producer_record(**over: Any) -> ProducerRecord:
    base: dict[str, Any] = {
        "id": "p1",
        "host": "h",
        "pid": 42,
        "delivery_timeout_ms": 120000,
        "registered_at": 1.0,
        "client_id": "rdkafka",
    }
    base.update(over)
    return ProducerRecord(**base)


def ack_record(**over: Any) -> AckRecord:
    base: dict[str, Any] = {"id": "p1", "epoch": 2, "last_offsets": {0: 7}, "acked_at": 3.0}
    base.update(over)
    return AckRecord(**base)


def epochs_record(**over: Any) -> EpochsRecord:
    base: dict[str, Any] = {"topic": "t", "last_epoch": 4}
    base.update(over)
    return EpochsRecord(**base)


MAKERS = [topic_record, epoch_record, producer_record, ack_record, epochs_record]


@pytest.mark.parametrize("make", MAKERS)
def test_round_trip(make: Any) -> None:
    record = make()
    data = record.to_json()
    assert type(record).from_json(data, PATH) == record
    assert type(record).from_json(data, PATH).to_json() == data


@pytest.mark.parametrize("make", MAKERS)
def test_sorted_keys_and_version(make: Any) -> None:
    data = make().to_json()
    raw = json.loads(data)
    assert list(raw) == sorted(raw)
    assert raw["version"] == type(make()).VERSION
    assert data == json.dumps(raw, sort_keys=True, separators=(",", ":")).encode()


def test_partition_maps_use_int_keys_in_python_and_strings_in_json() -> None:
    epoch = epoch_record()
    assert epoch.boundaries == {4: 0, 5: 10}
    assert epoch.edges == ((0, 4), (1, 5))
    assert epoch.producers == ("p1", "p2")
    assert json.loads(epoch.to_json())["boundaries"] == {"4": 0, "5": 10}
    assert json.loads(ack_record().to_json())["last_offsets"] == {"0": 7}


def _mutate(record: Any, change: Any) -> bytes:
    raw = json.loads(record.to_json())
    change(raw)
    return json.dumps(raw).encode()


@pytest.mark.parametrize(
    ("make", "change", "message"),
    [
        (topic_record, lambda r: r.update(version=3), "has version 3, newer than 2"),
        (topic_record, lambda r: r.update(version="2"), "version '2'"),
        (topic_record, lambda r: r.update(topic_id=""), "topic id"),
        (topic_record, lambda r: r.update(topic_id=7), "topic_id"),
        (topic_record, lambda r: r.pop("topic_id"), "missing field(s) topic_id"),
        (topic_record, lambda r: r.pop("version"), "no 'version'"),
        (topic_record, lambda r: r.pop("active"), "missing field(s) active"),
        (topic_record, lambda r: r.update(extra=1), "unknown field(s) extra"),
        (topic_record, lambda r: r.update(active="6"), "active"),
        (topic_record, lambda r: r.update(ordered=1), "ordered"),
        (topic_record, lambda r: r.update(initial=True), "initial"),
        (topic_record, lambda r: r.update(algorithm="md5"), "unknown algorithm"),
        (topic_record, lambda r: r.update(active=3), "below initial"),
        (topic_record, lambda r: r.update(physical=5), "physical"),
        (topic_record, lambda r: r.update(pending=1), "pending"),
        (epoch_record, lambda r: r.update(state="done"), "unknown epoch state"),
        (epoch_record, lambda r: r.update(edges=[[0]]), "edge"),
        (epoch_record, lambda r: r.update(boundaries={"x": 1}), "partition number"),
        (epoch_record, lambda r: r.update(boundaries={"1": 1.5}), "integer"),
        (epoch_record, lambda r: r.update(producers="p1"), "list of strings"),
        (epoch_record, lambda r: r.update(state="sealed"), "sealed_at"),
        (epoch_record, lambda r: r.update(created_at="now"), "unix time"),
        (producer_record, lambda r: r.update(pid=-1), ">= 0"),
        (ack_record, lambda r: r.update(last_offsets=[1]), "partition -> offset"),
        (epochs_record, lambda r: r.update(last_epoch=-1), ">= 0"),
    ],
)
def test_bad_records_raise_store_error_naming_the_path(
    make: Any, change: Any, message: str
) -> None:
    record = make()
    with pytest.raises(StoreError) as info:
        type(record).from_json(_mutate(record, change), PATH)
    assert PATH in str(info.value)
    assert message in str(info.value)


@pytest.mark.parametrize("data", [b"", b"garbage", b"\xff\xfe", b"[1, 2]", b"null"])
def test_garbage_raises_store_error(data: bytes) -> None:
    with pytest.raises(StoreError, match=PATH):
        TopicRecord.from_json(data, PATH)


def test_record_versions() -> None:
    # Unchanged records are at the first version; TopicRecord added topic_id in 2,
    # ProducerRecord added language in 2.
    for make in (epoch_record, ack_record):
        assert json.loads(make().to_json())["version"] == RECORD_VERSION == 1
    assert json.loads(producer_record().to_json())["version"] == ProducerRecord.VERSION == 2
    bound = topic_record(topic_id="q1w2e3r4t5y6u7i8o9p0aa")
    raw = json.loads(bound.to_json())
    assert raw["version"] == TopicRecord.VERSION == 2
    assert raw["topic_id"] == "q1w2e3r4t5y6u7i8o9p0aa"
    assert TopicRecord.from_json(bound.to_json(), PATH) == bound


def test_version_1_topic_record_reads_as_unbound() -> None:
    # What an older ordered wrote: version 1, no topic_id.
    raw = json.loads(topic_record().to_json())
    raw.pop("topic_id")
    raw["version"] = 1
    old = TopicRecord.from_json(json.dumps(raw).encode(), PATH)
    assert old.topic_id is None
    assert old == topic_record()
    # Written back at the current version, still unbound.
    assert json.loads(old.to_json())["version"] == 2
    assert json.loads(old.to_json())["topic_id"] is None
    # A version 1 record with any extra field is still refused.
    raw["extra"] = 1
    with pytest.raises(StoreError, match="unknown field"):
        TopicRecord.from_json(json.dumps(raw).encode(), PATH)
    # Other records have no older version to read.
    ack = json.loads(ack_record().to_json())
    ack["version"] = 0
    with pytest.raises(StoreError, match="version 0; this ordered reads version 1"):
        AckRecord.from_json(json.dumps(ack).encode(), PATH)


def test_constructor_checks_fields() -> None:
    with pytest.raises(ValueError, match="initial"):
        topic_record(initial=0, active=0, physical=0)
    with pytest.raises(ValueError, match="expected an integer"):
        ack_record(epoch="2")


@given(
    initial=st.integers(1, 64),
    grow=st.integers(0, 64),
    extra=st.integers(0, 8),
    offsets=st.dictionaries(st.integers(0, 1000), st.integers(-1, 2**62)),
)
def test_round_trip_property(initial: int, grow: int, extra: int, offsets: dict[int, int]) -> None:
    t = topic_record(initial=initial, active=initial + grow, physical=initial + grow + extra)
    assert TopicRecord.from_json(t.to_json(), PATH) == t
    e = epoch_record(boundaries=offsets)
    assert EpochRecord.from_json(e.to_json(), PATH).boundaries == dict(sorted(offsets.items()))


def test_paths() -> None:
    assert paths.topic_path("/ordered", "t") == "/ordered/topics/t"
    assert paths.epoch_path("/ordered/", "t", 3) == "/ordered/topics/t/epochs/0000000003"
    assert paths.ack_path("/r", "t", 3, "p") == "/r/topics/t/epochs/0000000003/acks/p"
    assert paths.producer_path("/r", "t", "p") == "/r/topics/t/producers/p"
    assert paths.lock_path("/r", "t") == "/r/topics/t/lock"
    assert paths.election_path("/r") == "/r/coordinator/election"
    assert paths.groups_path("/r") == "/r/groups"
    assert paths.group_path("/", "g 1/x") == "/groups/g%201%2Fx"
    assert paths.interest_topics_path("/r", "g") == "/r/groups/g/interest"
    assert paths.interest_path("/r", "g", "t") == "/r/groups/g/interest/t"
    assert paths.interest_member_path("/r", "g", "t", "h-1/2") == "/r/groups/g/interest/t/h-1%2F2"
    assert paths.progress_path("/r/", "g", "t") == "/r/groups/g/progress/t"
    assert paths.progress_partition_path("/r", "g", "t", 3) == "/r/groups/g/progress/t/3"
    for bad_call in (
        lambda: paths.group_path("/r", ""),
        lambda: paths.interest_member_path("/r", "g", "t", ""),
        lambda: paths.progress_partition_path("/r", "g", "t", -1),
        lambda: paths.progress_path("/r", "g", "a/b"),
    ):
        with pytest.raises(ValueError):
            bad_call()
    for bad in ("a/b", "", "..", "x" * 250):
        with pytest.raises(ValueError):
            paths.topic_path("/r", bad)
    with pytest.raises(ValueError):
        paths.topic_path("relative", "t")


def test_version_2_producer_record_round_trips_with_its_language() -> None:
    for language in ("python", "java"):
        record = producer_record(language=language)
        raw = json.loads(record.to_json())
        assert raw["version"] == 2
        assert raw["language"] == language
        assert ProducerRecord.from_json(record.to_json(), PATH) == record
    # The default is what every Python producer writes.
    assert producer_record().language == "python"


def test_version_1_producer_record_reads_as_python() -> None:
    # What a producer of an older ordered wrote: version 1, no language.
    raw = json.loads(producer_record(language="python").to_json())
    raw.pop("language")
    raw["version"] = 1
    old = ProducerRecord.from_json(json.dumps(raw).encode(), PATH)
    assert old.language == "python"
    assert old == producer_record()
    assert json.loads(old.to_json())["version"] == 2
    # A version 1 record with any extra field is still refused.
    raw["extra"] = 1
    with pytest.raises(StoreError, match="unknown field"):
        ProducerRecord.from_json(json.dumps(raw).encode(), PATH)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(version=3), "ProducerRecord has version 3, newer than 2"),
        (lambda r: r.update(language="cobol"), "unknown producer language 'cobol'"),
        (lambda r: r.update(language=1), "language"),
        (lambda r: r.pop("language"), "missing field(s) language"),
    ],
)
def test_bad_producer_records_are_refused(change: Any, message: str) -> None:
    with pytest.raises(StoreError) as info:
        ProducerRecord.from_json(_mutate(producer_record(language="java"), change), PATH)
    assert PATH in str(info.value)
    assert message in str(info.value)


def group_member_record(**over: Any) -> GroupMemberRecord:
    base: dict[str, Any] = {
        "member": "h-42-0000abcd",
        "group": "g",
        "client_id": "svc",
        "host": "h",
        "pid": 42,
        "language": "java",
        "registered_at": 1700000000.5,
    }
    base.update(over)
    return GroupMemberRecord(**base)


def test_group_member_record_reads_what_the_java_consumer_writes() -> None:
    # Records.groupMemberRecord's output (JsonAndRecordsTest.groupMemberRecordVersion1).
    java = (
        b'{"client_id":"svc","group":"g","host":"h","language":"java",'
        b'"member":"h-42-0000abcd","pid":42,"registered_at":1700000000.5,"version":1}'
    )
    record = GroupMemberRecord.from_json(java, PATH)
    assert record == group_member_record()
    assert json.loads(record.to_json()) == json.loads(java)
    python = group_member_record(language="python")
    assert GroupMemberRecord.from_json(python.to_json(), PATH) == python


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda r: r.update(version=2), "GroupMemberRecord has version 2, newer than 1"),
        (lambda r: r.update(language="cobol"), "unknown consumer language 'cobol'"),
        (lambda r: r.pop("language"), "missing field(s) language"),
        (lambda r: r.pop("client_id"), "missing field(s) client_id"),
    ],
)
def test_bad_group_member_records_are_refused(change: Any, message: str) -> None:
    with pytest.raises(StoreError) as info:
        GroupMemberRecord.from_json(_mutate(group_member_record(), change), PATH)
    assert message in str(info.value)


def test_group_member_path() -> None:
    assert paths.group_member_path("/r", "a/b", "h-1 x") == "/r/groups/a%2Fb/members/h-1%20x"
    with pytest.raises(ValueError):
        paths.group_member_path("/r", "g", "")
