"""``describe --group``: each member's language, host and client id (text and JSON)."""

from __future__ import annotations

from coordinator.groups.group_status import GroupStatus, PartitionStatus, member_languages
from coordinator.kernel.kafka_admin import GroupMember
from coordinator.kernel.store import GroupMemberRecord
from ordered.cli.describe import _group_text


def _record(client_id: str, language: str, member: str = "m") -> GroupMemberRecord:
    return GroupMemberRecord(
        member=member,
        group="g",
        client_id=client_id,
        host="h",
        pid=1,
        language=language,
        registered_at=1.0,
    )


PY = GroupMember("rdkafka-1", "py-reader", "/10.0.0.1", (("t", 0),))
JAVA = GroupMember("java-reader-2", "java-reader", "/10.0.0.2", (("t", 1), ("u", 0)))
PLAIN = GroupMember("plain-3", "plain", "/10.0.0.3", ())


def test_languages_match_kafka_members_by_client_id() -> None:
    records = [_record("py-reader", "python"), _record("java-reader", "java", "m2")]
    assert member_languages([PY, JAVA, PLAIN], records) == {
        "rdkafka-1": "python",
        "java-reader-2": "java",
    }
    # Records of one client id that disagree name no language.
    both = [_record("py-reader", "python"), _record("py-reader", "java", "m2")]
    assert member_languages([PY], both) == {}


def _status() -> GroupStatus:
    parts = tuple(
        PartitionStatus(p, "active", None, 0, 0, "open", None, None, (), None, None, m, lang)
        for p, m, lang in ((0, PY, "python"), (1, JAVA, "java"))
    )
    languages = {"rdkafka-1": "python", "java-reader-2": "java"}
    return GroupStatus("t", "g", 2, 0, parts, "STABLE", (PY, JAVA, PLAIN), languages)


def test_each_member_line_names_its_language_host_and_client_id() -> None:
    lines = [line.split() for line in _group_text(_status(), 0.0).splitlines()]
    assert ["CONSUMER-ID", "LANGUAGE", "HOST", "CLIENT-ID", "PARTITIONS"] in lines
    assert ["java-reader-2", "java", "/10.0.0.2", "java-reader", "1"] in lines
    assert ["plain-3", "-", "/10.0.0.3", "plain", "-"] in lines
    assert ["rdkafka-1", "python", "/10.0.0.1", "py-reader", "0"] in lines


def test_json_names_each_member_language() -> None:
    payload = _status().to_dict()
    members = {m["consumer_id"]: m for m in payload["members"]}
    assert members["java-reader-2"]["language"] == "java"
    assert members["java-reader-2"]["partitions"] == [1]
    assert members["rdkafka-1"]["language"] == "python"
    assert members["plain-3"]["language"] is None
    assert [p["language"] for p in payload["partitions"]] == ["python", "java"]
