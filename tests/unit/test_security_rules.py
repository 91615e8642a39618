"""Pure security logic: credentials parsing, the ACL rules by path, Java properties."""

from __future__ import annotations

from pathlib import Path

import pytest
from kazoo.security import ACL, Id, Permissions, make_digest_acl_credential

from coordinator.kernel.errors import ConfigError
from coordinator.kernel.kafka_security import load_properties, redact, translate
from coordinator.kernel.store.records import AclPolicyRecord
from coordinator.kernel.zk_acl import (
    OWNER_PERMS,
    NodeKind,
    acl_for_existing,
    acl_for_new,
    acl_text,
    classify,
    is_open,
    parse_identity,
)
from coordinator.kernel.zk_auth import NO_AUTH, ZkAuth, digest_id

C = "digest:coord:" + "a" * 27 + "="
P = "digest:prod:" + "b" * 27 + "="
Q = "digest:other:" + "c" * 27 + "="
K = "digest:cons:" + "d" * 27 + "="
POLICY = AclPolicyRecord((C,), (P, Q), (K,), (), {}, 0.0)


def test_zk_auth_parses_and_never_shows_the_password() -> None:
    auth = ZkAuth.parse("digest:alice:s3cret:with:colons")
    assert (auth.scheme, auth.user, auth.password) == ("digest", "alice", "s3cret:with:colons")
    assert "s3cret" not in repr(auth) and "s3cret" not in str(auth)
    assert auth.identity == ("digest", digest_id("alice", "s3cret:with:colons"))
    assert auth.principal == "digest:alice"
    assert ZkAuth.parse("") is NO_AUTH and not NO_AUTH
    for bad in ("plain:alice:s3cret", "digest:alice", "digest::s3cret", "s3cret"):
        with pytest.raises(ConfigError) as info:
            ZkAuth.parse(bad)
        assert "s3cret" not in str(info.value)


def test_digest_id_matches_kazoo() -> None:
    # kazoo's make_digest_acl_credential implements ZooKeeper's generateDigest.
    assert digest_id("super", "super123") == make_digest_acl_credential("super", "super123")


def test_classify_by_path() -> None:
    r = "/o"
    assert classify(r, "/x/topics") is None
    assert classify(r, "/o") == (NodeKind.OTHER, None)
    assert classify(r, "/o/topics/t/producers") == (NodeKind.PRODUCERS, None)
    assert classify(r, "/o/topics/t/producers/p1") == (NodeKind.REGISTRATION, None)
    assert classify(r, "/o/topics/t/epochs/0000000001/acks") == (NodeKind.ACKS, None)
    assert classify(r, "/o/topics/t/epochs/0000000001/acks/p1") == (NodeKind.ACK, None)
    assert classify(r, "/o/topics/t/epochs/0000000001") == (NodeKind.OTHER, None)
    assert classify(r, "/o/groups") == (NodeKind.GROUPS, None)
    assert classify(r, "/o/groups/g%2F1/interest/t/m") == (NodeKind.GROUP, "g%2F1")
    assert classify("/", "/topics/t/producers") == (NodeKind.PRODUCERS, None)
    # The consumer barrier: containers consumers create in, their own nodes, and the
    # coordinator's announcement and feature flags.
    for container in ("barrier", "barrier/topics", "barrier/members", "barrier/topics/t"):
        assert classify(r, f"/o/{container}") == (NodeKind.BARRIER, None), container
    for kind in ("consumers", "acks", "rewinds"):
        assert classify(r, f"/o/barrier/topics/t/{kind}") == (NodeKind.BARRIER, None)
        assert classify(r, f"/o/barrier/topics/t/{kind}/c1") == (NodeKind.BARRIER_NODE, None)
    assert classify(r, "/o/barrier/members/c1") == (NodeKind.BARRIER_NODE, None)
    assert classify(r, "/o/barrier/topics/t/announcement") == (NodeKind.OTHER, None)
    assert classify(r, "/o/barrier/other") == (NodeKind.OTHER, None)
    assert classify(r, "/o/features/consumer-barrier") == (NodeKind.OTHER, None)


def _perms(acls: list[ACL] | None) -> dict[str, int]:
    assert acls is not None
    return {f"{a.id.scheme}:{a.id.id}": a.perms for a in acls}


def test_new_nodes_by_role() -> None:
    topic = _perms(acl_for_new(POLICY, "/o", "/o/topics/t"))
    assert topic == {C: Permissions.ALL, P: Permissions.READ, Q: Permissions.READ, K: 1}
    assert _perms(acl_for_new(POLICY, "/o", "/o/topics/t/producers"))[P] == (
        Permissions.READ | Permissions.CREATE
    )
    assert _perms(acl_for_new(POLICY, "/o", "/o/groups"))[K] == Permissions.READ | 4
    ack = _perms(acl_for_new(POLICY, "/o", "/o/topics/t/epochs/0000000001/acks/p1"))
    assert ack["auth:"] == OWNER_PERMS and not OWNER_PERMS & Permissions.ADMIN
    assert ack[P] == Permissions.READ
    owned = AclPolicyRecord((C,), (P,), (K, Q), (), {"g": (Q,)}, 0.0)
    group = _perms(acl_for_new(owned, "/o", "/o/groups/g/interest/t/m"))
    assert group[Q] & Permissions.WRITE and not group[K] & Permissions.WRITE
    assert "auth:" not in group
    assert acl_for_new(POLICY, "/o", "/elsewhere") is None
    # Consumers create their barrier nodes, own them, and cannot delete another's.
    acks = _perms(acl_for_new(POLICY, "/o", "/o/barrier/topics/t/acks"))
    assert acks[K] == Permissions.READ | Permissions.CREATE and acks[P] == Permissions.READ
    member = _perms(acl_for_new(POLICY, "/o", "/o/barrier/members/c1"))
    assert member["auth:"] == OWNER_PERMS and member[K] == Permissions.READ
    announcement = _perms(acl_for_new(POLICY, "/o", "/o/barrier/topics/t/announcement"))
    assert announcement[K] == Permissions.READ and announcement[C] == Permissions.ALL
    # The daemon relays progress into a group: its consumers can still write it ...
    relayed = _perms(acl_for_new(POLICY, "/o", "/o/groups/g/progress/t/0", creator=C))
    assert relayed[K] == OWNER_PERMS and "auth:" not in relayed
    # ... but not the seen records that decide when a group is stale.
    seen = _perms(acl_for_new(POLICY, "/o", "/o/groups/g/seen/t", creator=C))
    assert seen[K] == Permissions.READ


def test_existing_nodes_keep_their_owner_and_open_ones_are_closed() -> None:
    reg = "/o/topics/t/producers/p1"
    owned = [ACL(Permissions.ALL, Id("digest", C[7:])), ACL(OWNER_PERMS, Id("digest", P[7:]))]
    after, note = acl_for_existing(POLICY, "/o", reg, owned)
    assert _perms(after)[P] == OWNER_PERMS and _perms(after)[Q] == Permissions.READ
    assert note == ""
    world = [ACL(Permissions.ALL, Id("world", "anyone"))]
    assert is_open(world) and not is_open(after)
    after, note = acl_for_existing(POLICY, "/o", reg, world)
    assert all(p == Permissions.READ for k, p in _perms(after).items() if k != C)
    assert "no owner" in note
    after, note = acl_for_existing(POLICY, "/o", "/o/groups/g", world)
    assert _perms(after)[K] == OWNER_PERMS and "shared" in note
    assert acl_text(after)[0].startswith("digest:")
    after, note = acl_for_existing(POLICY, "/o", "/o/barrier/topics/t/consumers/c1", world)
    assert not is_open(after) and "consumer must register again" in note


def test_identities() -> None:
    assert parse_identity(C) == C
    assert parse_identity("sasl:bob") == "sasl:bob"
    for bad in ("bob", "digest:bob", "digest:bob:password", "foo:bar"):
        with pytest.raises(ValueError):
            parse_identity(bad)


def test_java_properties_translated_for_librdkafka(tmp_path: Path) -> None:
    path = tmp_path / "client.properties"
    path.write_text(
        "# comment\n"
        "bootstrap.servers = b:9092\n"
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism: SCRAM-SHA-512\n"
        "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule \\\n"
        '    required username="alice" password="p=w;d";\n'
        "ssl.truststore.type=PEM\n"
        "ssl.truststore.location=/ca.pem\n"
        "ssl.endpoint.identification.algorithm=\n"
        "ordered.zookeeper.auth=digest:alice:zk\n"
    )
    kafka, ordered = translate(load_properties(path))
    assert kafka == {
        "bootstrap.servers": "b:9092",
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice",
        "sasl.password": "p=w;d",
        "ssl.ca.location": "/ca.pem",
        "ssl.endpoint.identification.algorithm": "none",
    }
    assert ordered == {"ordered.zookeeper.auth": "digest:alice:zk"}
    assert redact(kafka)["sasl.password"] == "***"


def test_unsupported_java_security_is_named_without_the_secret() -> None:
    with pytest.raises(ConfigError, match="JKS"):
        translate({"ssl.truststore.location": "/t.jks"})
    with pytest.raises(ConfigError, match=r"sasl\.jaas\.config") as info:
        translate(
            {
                "sasl.jaas.config": "com.sun.security.auth.module.Krb5LoginModule "
                'required key="s3cret";'
            }
        )
    assert "s3cret" not in str(info.value)
