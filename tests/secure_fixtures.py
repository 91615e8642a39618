"""Fixtures of the secure cluster (``ordered cluster up --secure``): users, Kafka ACLs, roots.

``secure`` (session) grants each role its Kafka ACLs once: on topics prefixed
``st-`` the producer may write, the consumer and reader read, the coordinator
describe, alter and delete; on topics prefixed ``nd-`` the coordinator lacks DELETE.
``secure_root`` (per test) applies the ZooKeeper ACL policy of the roles to a fresh
root; besides the cluster's users it lists two ZooKeeper-only identities, ``mallory``
(a second producer) and ``eve`` (a second consumer), to play the other party.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka.admin import (
    AclBinding,
    AclOperation,
    AclPermissionType,
    AdminClient,
    ResourcePatternType,
    ResourceType,
)
from helpers import create_topic, unique

from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import LayoutStore
from coordinator.kernel.store.records import AclPolicyRecord
from coordinator.kernel.zk import close_client, make_client, start_client
from coordinator.kernel.zk_auth import ZkAuth
from coordinator.kernel.zk_client import AuthClient
from coordinator.kernel.zk_tls import CA, ENABLE, ZkTls
from coordinator.security.acl_apply import apply_policy
from ordered.devcluster import secure as devsecure
from ordered.devcluster.cluster import ClusterState

__all__ = ["ALLOWED", "NO_DELETE", "Secure", "secure", "secure_root"]

ALLOWED = "st-"
"""Topic prefix on which every role has its Kafka ACLs."""

NO_DELETE = "nd-"
"""Topic prefix on which the coordinator lacks DELETE (a trim must fail)."""

EXTRA = {"mallory": "mallory-password", "eve": "eve-password"}
"""ZooKeeper-only identities: another producer and another consumer."""


@dataclass
class Secure:
    """The secure cluster and how each user reaches it."""

    state: ClusterState
    creds: devsecure.Credentials
    clients: list[AuthClient] = field(default_factory=list)

    @property
    def bootstrap(self) -> str:
        """Kafka's bootstrap servers."""
        return self.state.bootstrap_servers

    @property
    def zk_hosts(self) -> str:
        """ZooKeeper's connect string."""
        return self.state.zookeeper_connect

    def password(self, user: str) -> str:
        """The password of ``user`` (cluster users and :data:`EXTRA`)."""
        return EXTRA.get(user) or self.creds.password(user)

    def kafka(self, user: str) -> dict[str, str]:
        """librdkafka SASL settings of ``user``."""
        return {
            "security.protocol": "SASL_PLAINTEXT",
            "sasl.mechanism": "SCRAM-SHA-512",
            "sasl.username": user,
            "sasl.password": self.password(user),
        }

    @property
    def zk_tls(self) -> ZkTls:
        """ZooKeeper over TLS, trusting the cluster's CA (the only way in)."""
        return ZkTls.of(True, str(devsecure.ca_path(Path(self.state.directory))))

    def zk_tls_settings(self) -> dict[str, str]:
        """The ``ordered.zookeeper.ssl.*`` settings of a client of this cluster."""
        return {ENABLE: "true", CA: self.zk_tls.ca_location}

    def zk_auth(self, user: str) -> str:
        """``ordered.zookeeper.auth`` of ``user``."""
        return f"digest:{user}:{self.password(user)}"

    def identity(self, user: str) -> str:
        """The ZooKeeper ACL id of ``user``."""
        ident = ZkAuth.parse(self.zk_auth(user)).identity
        assert ident is not None
        return f"{ident[0]}:{ident[1]}"

    def properties(self, user: str) -> Path:
        """The Java client properties file of ``user`` (cluster users only)."""
        return devsecure.properties_path(Path(self.state.directory), user)

    def client(self, user: str | None, root: str | None = None) -> AuthClient:
        """A started ZooKeeper client as ``user`` (None: unauthenticated), closed at teardown."""
        client = make_client(
            self.zk_hosts,
            session_timeout_s=6.0,
            command_deadline_s=10.0,
            auth=self.zk_auth(user) if user else None,
            acl_root=root,
            tls=self.zk_tls,
        )
        start_client(client, 15.0)
        self.clients.append(client)
        return client

    def store(self, user: str | None, root: str) -> LayoutStore:
        """A layout store under ``root`` as ``user``."""
        return LayoutStore(self.client(user, root), root)

    def admin(self, user: str) -> KafkaAdmin:
        """Kafka admin helpers as ``user``."""
        return KafkaAdmin(self.bootstrap, timeout=10.0, config=self.kafka(user))

    def topic(self, partitions: int, prefix: str = ALLOWED) -> str:
        """Create a uuid-named topic (as admin) and return its name."""
        return create_topic(
            self.bootstrap, unique(prefix + "t"), partitions, 1, security=self.kafka("admin")
        )

    def producer_config(self, root: str, user: str = "producer", **extra: Any) -> dict[str, Any]:
        """An ``OrderedProducer`` configuration as ``user`` under ``root``."""
        return {
            "bootstrap.servers": self.bootstrap,
            **self.kafka(user),
            "ordered.zookeeper.connect": self.zk_hosts,
            "ordered.zookeeper.root": root,
            "ordered.zookeeper.auth": self.zk_auth(user),
            **self.zk_tls_settings(),
            **extra,
        }

    def policy(self) -> AclPolicyRecord:
        """The roles' ACL policy of the tests."""
        return AclPolicyRecord(
            coordinator=(self.identity("coordinator"),),
            producers=(self.identity("producer"), self.identity("mallory")),
            consumers=(self.identity("consumer"), self.identity("eve")),
            readers=(self.identity("reader"),),
            groups={},
            applied_at=0.0,
        )


def _grant(admin: AdminClient) -> None:
    def acl(
        user: str,
        op: AclOperation,
        kind: ResourceType = ResourceType.TOPIC,
        name: str = ALLOWED,
        pattern: ResourcePatternType = ResourcePatternType.PREFIXED,
    ) -> AclBinding:
        return AclBinding(kind, name, pattern, f"User:{user}", "*", op, AclPermissionType.ALLOW)

    any_group = {"kind": ResourceType.GROUP, "name": "*", "pattern": ResourcePatternType.LITERAL}
    bindings = [
        acl("producer", AclOperation.WRITE),
        acl("producer", AclOperation.DESCRIBE),
        acl(
            "producer",
            AclOperation.IDEMPOTENT_WRITE,
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
        ),
        acl("consumer", AclOperation.READ),
        acl("consumer", AclOperation.DESCRIBE),
        acl("consumer", AclOperation.READ, **any_group),
        acl("reader", AclOperation.READ),
        acl("reader", AclOperation.DESCRIBE),
        acl("reader", AclOperation.READ, **any_group),
        acl(
            "coordinator",
            AclOperation.DESCRIBE,
            ResourceType.BROKER,
            "kafka-cluster",
            ResourcePatternType.LITERAL,
        ),
        acl("coordinator", AclOperation.DESCRIBE, **any_group),
    ]
    for prefix in (ALLOWED, NO_DELETE):
        for op in (
            AclOperation.DESCRIBE,
            AclOperation.ALTER,
            AclOperation.READ,
            AclOperation.DESCRIBE_CONFIGS,
        ):
            bindings.append(acl("coordinator", op, name=prefix))
    bindings.append(acl("coordinator", AclOperation.DELETE))
    for future in admin.create_acls(bindings, request_timeout=30).values():
        future.result(timeout=60)


@pytest.fixture(scope="session")
def secure(secure_cluster: ClusterState) -> Iterator[Secure]:
    """The secure cluster with the roles' Kafka ACLs granted."""
    creds = devsecure.load_credentials(Path(secure_cluster.directory))
    assert creds is not None
    sec = Secure(secure_cluster, creds)
    _grant(AdminClient({"bootstrap.servers": sec.bootstrap, **sec.kafka("admin")}))
    yield sec
    for client in sec.clients:
        close_client(client)


@pytest.fixture
def secure_root(secure: Secure) -> Iterator[str]:
    """A fresh root with the roles' ACL policy applied (by the ZooKeeper super user)."""
    root = "/" + unique("sec")
    admin = secure.client("admin")
    apply_policy(admin, root, secure.policy())
    yield root
    admin.delete(root, recursive=True)
