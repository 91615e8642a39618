"""The secure cluster with real ACLs: who may change a layout, ack a barrier, write interest.

ZooKeeper requires digest authentication and the test root carries the roles' ACL
policy (``ordered acl apply``); Kafka speaks SASL/SCRAM with ``StandardAuthorizer``.
"""

from __future__ import annotations

import dataclasses
import logging
import time

import pytest
from fixtures import consumer_config, run_in_background
from helpers import unique, wait_until
from kazoo.exceptions import NoAuthError
from secure_fixtures import Secure

from coordinator.control.controller import Controller
from coordinator.kernel.errors import StoreAuthError
from coordinator.kernel.positions import PositionService
from coordinator.kernel.store import CONSUMER_BARRIER, paths
from coordinator.kernel.store.records import AckRecord, Interest, ProducerRecord, Progress
from coordinator.kernel.zk import make_client, start_client
from coordinator.security.acl_apply import apply_policy, show_acls
from ordered import OrderedConsumer, OrderedProducer
from ordered.cli.features import set_feature
from ordered.consumer.barrier import BarrierState

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


def _adopted(secure: Secure, root: str, partitions: int = 2) -> tuple[str, Controller]:
    topic = secure.topic(partitions)
    controller = Controller(secure.store("coordinator", root), secure.admin("coordinator"))
    controller.adopt(topic)
    return topic, controller


def _snapshot(secure: Secure, root: str, topic: str) -> dict[str, bytes]:
    admin = secure.client("admin")
    out = {}
    for path in (paths.topic_path(root, topic), paths.epoch_path(root, topic, 0)):
        out[path] = admin.get(path)[0]
    return out


@pytest.mark.parametrize("user", [None, "producer", "consumer", "reader"])
def test_only_the_coordinator_modifies_topic_records_and_epochs(
    secure: Secure, secure_root: str, user: str | None
) -> None:
    topic, controller = _adopted(secure, secure_root)
    before = _snapshot(secure, secure_root, topic)
    store = secure.store(user, secure_root)
    epoch0 = controller.store.get_epoch(topic, 0)
    record, version = controller.store.get_topic_and_version(topic)
    assert record is not None

    tpath = paths.topic_path(secure_root, topic)
    epath = paths.epoch_path(secure_root, topic, 0)
    forged_epoch = dataclasses.replace(epoch0, boundaries={0: 10**9, 1: 10**9})
    with pytest.raises(StoreAuthError, match="NoAuth") as info:
        store.update_epoch(forged_epoch)
    assert epath in str(info.value)
    with pytest.raises(StoreAuthError, match="NoAuth") as info:
        store.replace_topic(dataclasses.replace(record, ordered=False), epoch0, version)
    assert tpath in str(info.value)
    with pytest.raises(StoreAuthError, match="NoAuth"):
        store.remove_topic(topic, version)
    # Nothing was written.
    assert _snapshot(secure, secure_root, topic) == before
    if user is None:
        assert "requires authentication" in str(info.value)
    else:
        assert f"digest:{user}" in str(info.value)


def test_coordinator_identity_may_change_the_layout(secure: Secure, secure_root: str) -> None:
    topic, controller = _adopted(secure, secure_root)
    result = controller.expand(topic, 3, timeout=30)
    assert result.to_active == 3
    assert controller.store.get_topic(topic).active == 3  # type: ignore[union-attr]


def _register(secure: Secure, root: str, user: str, topic: str, pid: str) -> None:
    store = secure.store(user, root)
    store.register_producer(
        topic,
        ProducerRecord(
            id=pid,
            host="h",
            pid=1,
            delivery_timeout_ms=60_000,
            registered_at=time.time(),
            client_id="",
        ),
    )


def test_a_forged_ack_is_ignored_reported_and_the_barrier_waits(
    secure: Secure, secure_root: str, caplog: pytest.LogCaptureFixture
) -> None:
    topic, controller = _adopted(secure, secure_root)
    producer = secure.store("producer", secure_root)
    producer.register_producer(
        topic,
        ProducerRecord(
            id="real",
            host="h",
            pid=1,
            delivery_timeout_ms=60_000,
            registered_at=time.time(),
            client_id="",
        ),
    )
    caplog.set_level(logging.WARNING, logger="coordinator.control.controller")
    expanding = run_in_background(controller.expand, topic, 3, timeout=60)
    wait_until(
        lambda: controller.store.get_topic(topic).pending == 1,  # type: ignore[union-attr]
        what="epoch 1 pending",
    )
    mallory = secure.store("mallory", secure_root)
    ack = AckRecord(id="real", epoch=1, last_offsets={}, acked_at=time.time())
    # Through the store, the forger cannot write the real producer's registration ...
    with pytest.raises(StoreAuthError, match="NoAuth"):
        mallory.ack(topic, 1, ack)
    # ... and a bare ack node proves nothing.
    mallory.client.create(paths.ack_path(secure_root, topic, 1, "real"), ack.to_json())
    checked = controller.store.verified_acks(topic, 1)
    assert "real" in checked.forged and "real" not in checked.genuine
    assert checked.forged["real"] == ("digest:mallory",)
    wait_until(lambda: "forged ack" in caplog.text, what="the forged ack logged")
    assert "digest:mallory" in caplog.text
    time.sleep(2.0)  # the barrier re-checks every second: it must still wait
    assert expanding.is_alive()
    assert controller.store.get_topic(topic).pending == 1  # type: ignore[union-attr]
    # The real producer acks: its node is taken, its registration proves it.
    producer.ack(topic, 1, dataclasses.replace(ack, acked_at=time.time()))
    result = expanding.join(timeout=30)
    assert result.to_active == 3 and result.producers == ("real",)


def test_a_producer_cannot_register_or_ack_as_another_identity(
    secure: Secure, secure_root: str
) -> None:
    topic, _controller = _adopted(secure, secure_root)
    _register(secure, secure_root, "producer", topic, "p1")
    mallory = secure.store("mallory", secure_root)
    reg = paths.producer_path(secure_root, topic, "p1")
    with pytest.raises(NoAuthError, match="NoAuth") as info:
        mallory.client.set(reg, b"{}")
    assert reg in str(info.value) and "digest:mallory" in str(info.value)
    with pytest.raises(NoAuthError, match="NoAuth"):
        mallory.client.delete(reg)
    assert secure.client("admin").exists(reg) is not None


def test_consumer_cannot_write_another_groups_interest(secure: Secure, secure_root: str) -> None:
    topic, _controller = _adopted(secure, secure_root)
    consumer = secure.store("consumer", secure_root)
    consumer.register_group("orders", topic, time.time())
    positions = PositionService(consumer.client, secure_root, "orders")
    positions.publish(topic, 0, 5)
    interest = paths.interest_member_path(secure_root, "orders", topic, "m1")
    progress = paths.progress_partition_path(secure_root, "orders", topic, 0)
    wait_until(lambda: consumer.client.exists(progress) is not None, what="progress written")
    eve = secure.store("eve", secure_root)
    record = Interest("m1", {0: 7}, time.time()).to_json()
    with pytest.raises(NoAuthError, match="NoAuth") as info:
        eve.client.create(interest, record, makepath=True)
    assert "digest:eve" in str(info.value)
    with pytest.raises(NoAuthError, match="NoAuth") as info:
        eve.client.set(progress, Progress(0, 10**9, time.time()).to_json())
    assert progress in str(info.value)
    admin = secure.client("admin")
    assert admin.exists(interest) is None
    assert Progress.from_json(admin.get(progress)[0], progress).offset == 5
    # Eve owns the groups she creates; the first consumer cannot write hers either.
    eve.register_group("audit", topic, time.time())
    with pytest.raises(NoAuthError, match="NoAuth"):
        consumer.client.create(
            paths.interest_member_path(secure_root, "audit", topic, "m"), record, makepath=True
        )


@pytest.mark.timeout(240)
def test_group_order_e2e_on_the_secure_cluster(secure: Secure, secure_root: str) -> None:
    """Expand and shrink under traffic, consumers leaving and joining: SCRAM, ACLs, ZK auth."""
    from test_consumer_group import group_through_layout_changes

    coordinator = secure.store("coordinator", secure_root)
    group = unique("g")
    consumer = {
        "bootstrap.servers": secure.bootstrap,
        **secure.kafka("consumer"),
        "ordered.zookeeper.connect": secure.zk_hosts,
        "ordered.zookeeper.root": secure_root,
        "ordered.zookeeper.auth": secure.zk_auth("consumer"),
        **secure.zk_tls_settings(),
    }
    group_through_layout_changes(
        secure.topic(2),
        Controller(coordinator, secure.admin("coordinator")),
        coordinator,
        secure.producer_config(secure_root),
        consumer_config(secure.bootstrap, secure.zk_hosts, secure_root, group, **consumer),
    )
    # Every node the clients created carries the roles' ACLs: none is open.
    admin = secure.client("admin")
    opened = [n.path for n in show_acls(admin, secure_root) if n.open]
    assert opened == []


def test_a_producer_of_an_unadopted_topic_routes_plain_then_registers_on_adoption(
    secure: Secure, secure_root: str
) -> None:
    topic = secure.topic(2)
    producer = OrderedProducer(secure.producer_config(secure_root))
    try:
        # Under ACLs the producer may not create the topic's node: plain routing.
        producer.produce(topic, b"before", b"k")
        assert producer.flush(30) == 0
        reader = secure.store("reader", secure_root)
        assert reader.producers(topic) == {}
        controller = Controller(
            secure.store("coordinator", secure_root), secure.admin("coordinator")
        )
        controller.adopt(topic)
        # The adoption's watch makes the producer register before it applies the layout.
        wait_until(lambda: producer.producer_id in reader.producers(topic), what="registration")
        result = controller.expand(topic, 3, timeout=30)
        assert producer.producer_id in result.producers and result.expired == {}
        producer.produce(topic, b"after", b"k")
        assert producer.flush(30) == 0
    finally:
        producer.close()


def test_sasl_identities_get_their_role(secure: Secure) -> None:
    """ZooKeeper's SASL (DIGEST-MD5) login: the identity is ``sasl:USER``."""
    root = "/" + unique("sasl")
    admin = secure.client("admin")
    policy = dataclasses.replace(secure.policy(), coordinator=("sasl:coordinator",))
    apply_policy(admin, root, policy)
    try:
        sasl = f"sasl:coordinator:{secure.password('coordinator')}"
        client = make_client(secure.zk_hosts, auth=sasl, acl_root=root, tls=secure.zk_tls)
        start_client(client, 15.0)
        secure.clients.append(client)
        node = paths.topics_path(root) + "/t"
        client.create(node, b"")
        assert ("sasl", "coordinator") in {(a.id.scheme, a.id.id) for a in client.get_acls(node)[0]}
        # The digest login of the same user is another identity: not a coordinator here.
        with pytest.raises(NoAuthError, match="NoAuth"):
            secure.client("coordinator", root).set(node, b"x")
        with pytest.raises(StoreAuthError, match="SASL"):
            wrong = "sasl:coordinator:wrong"
            start_client(make_client(secure.zk_hosts, auth=wrong, tls=secure.zk_tls), 15.0)
    finally:
        admin.delete(root, recursive=True)


def test_a_forged_ack_of_a_producer_gone_does_not_cut_its_expiry_short(
    secure: Secure, secure_root: str
) -> None:
    topic, controller = _adopted(secure, secure_root)
    gone = secure.store("producer", secure_root)
    gone.register_producer(
        topic,
        ProducerRecord(
            id="gone",
            host="h",
            pid=1,
            delivery_timeout_ms=4000,
            registered_at=time.time(),
            client_id="",
        ),
    )
    expanding = run_in_background(controller.expand, topic, 3, timeout=60)
    wait_until(
        lambda: controller.store.get_topic(topic).pending == 1,  # type: ignore[union-attr]
        what="epoch 1 pending",
    )
    gone.client.stop()  # its session ends: records it sent may land for 4 s more
    mallory = secure.store("mallory", secure_root)
    ack = AckRecord(id="gone", epoch=1, last_offsets={}, acked_at=time.time())
    mallory.client.create(paths.ack_path(secure_root, topic, 1, "gone"), ack.to_json())
    forged_at = time.monotonic()
    result = expanding.join(timeout=60)
    # Unprovable without its registration: the barrier waited out the expiry.
    assert time.monotonic() - forged_at >= 3.5
    assert "gone" in result.expired


@pytest.mark.timeout(180)
def test_the_consumer_barrier_comes_into_force_under_the_acl_policy(
    secure: Secure, secure_root: str
) -> None:
    """A consumer creates and owns its barrier nodes; another consumer cannot remove them."""
    coordinator = secure.store("coordinator", secure_root)
    set_feature(coordinator, CONSUMER_BARRIER, True)
    topic, controller = _adopted(secure, secure_root)
    settings = {
        **secure.kafka("consumer"),
        "ordered.zookeeper.auth": secure.zk_auth("consumer"),
        **secure.zk_tls_settings(),
    }
    config = consumer_config(
        secure.bootstrap, secure.zk_hosts, secure_root, unique("g"), **settings
    )
    consumer = OrderedConsumer(config)
    try:
        consumer.subscribe([topic])
        barrier = consumer._layouts.barrier

        def in_force() -> bool:
            consumer.poll(0.2)
            return bool(consumer.assignment()) and barrier.state is BarrierState.IN_FORCE

        wait_until(in_force, 60.0, what="the barrier in force")
        controller.expand(topic, 3)  # waits for the consumer's ack
        announcement, _ = coordinator.get_announcement(topic)
        assert announcement is not None
        assert coordinator.barrier_acks(topic)[barrier.id].announcement == announcement.id
        eve = secure.store("eve", secure_root)
        for path in (
            paths.barrier_consumer_path(secure_root, topic, barrier.id),
            paths.barrier_member_path(secure_root, barrier.id),
        ):
            with pytest.raises(NoAuthError, match="NoAuth"):
                eve.client.delete(path)
            assert coordinator.client.exists(path) is not None
        opened = [n.path for n in show_acls(secure.client("admin"), secure_root) if n.open]
        assert opened == []
    finally:
        consumer.close()
