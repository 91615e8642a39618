"""What a client says when it meets a record written by a newer release.

In a rolling upgrade a client not yet upgraded may read a record whose ``version`` is
newer than any it knows (``docs/operations.md``, "Upgrading"). Its error must say so in
words an operator acts on: the record kind, the version found, the newest version this
client reads, and to upgrade the client, not merely that the record is corrupt.
"""

from __future__ import annotations

import json

import pytest

from coordinator.kernel.errors import RecordCorruptError, StoreError
from coordinator.kernel.store.records import EpochsRecord, ProducerRecord, TopicRecord

TOPIC_PATH = "/ordered/topics/orders"


def _topic_json(version: object) -> bytes:
    record = TopicRecord(
        topic="orders",
        initial=2,
        active=4,
        epoch=3,
        pending=None,
        physical=4,
        algorithm="murmur3",
        ordered=True,
        compacted=False,
        adopted_at=1700000000.0,
    )
    raw = json.loads(record.to_json())
    raw["version"] = version
    return json.dumps(raw).encode()


def test_a_newer_topic_record_names_kind_versions_and_the_way_out() -> None:
    with pytest.raises(RecordCorruptError) as info:
        TopicRecord.from_json(_topic_json(3), TOPIC_PATH)
    assert str(info.value) == (
        "/ordered/topics/orders: TopicRecord has version 3, newer than 2, the newest this "
        "ordered-kafka reads: a newer ordered-kafka wrote it; upgrade this client "
        '(see "Upgrading" in docs/operations.md)'
    )
    # Callers that handle every store failure alike still catch it.
    assert isinstance(info.value, StoreError)


@pytest.mark.parametrize(
    ("kind", "newest"), [(ProducerRecord, 2), (EpochsRecord, 1), (TopicRecord, 2)]
)
def test_every_record_kind_names_its_own_newest_version(kind: type, newest: int) -> None:
    raw = {"version": newest + 5}
    with pytest.raises(RecordCorruptError) as info:
        kind.from_json(json.dumps(raw).encode(), "/x")
    message = str(info.value)
    assert message.startswith(f"/x: {kind.__name__} has version {newest + 5}, ")
    assert f"newer than {newest}, the newest this ordered-kafka reads" in message
    assert "upgrade this client" in message


@pytest.mark.parametrize("version", [0, -1, "3", True, 2.5])
def test_a_version_that_is_not_newer_is_damage_not_an_upgrade(version: object) -> None:
    # Not a newer release's record: an older version no longer read, or no version
    # number at all. Telling the operator to upgrade would be wrong.
    with pytest.raises(RecordCorruptError) as info:
        TopicRecord.from_json(_topic_json(version), TOPIC_PATH)
    message = str(info.value)
    assert f"TopicRecord record has version {version!r}; this ordered reads version 1, 2" in message
    assert "upgrade" not in message
