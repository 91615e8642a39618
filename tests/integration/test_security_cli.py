"""The CLI and the daemon against the secure cluster with ``--command-config``.

Each command authenticates as a role from the dev cluster's property files (SCRAM for
Kafka, digest for ZooKeeper); no output and no log ever shows a password.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Producer
from helpers import run_cli, unique, wait_until
from secure_fixtures import NO_DELETE, Secure

from coordinator.control.controller import Controller
from coordinator.kernel.errors import ConfigError, StoreAuthError
from coordinator.kernel.kafka_security import client_config
from coordinator.kernel.store.records import AckRecord, ProducerRecord
from coordinator.kernel.zk_auth import ZkAuth
from coordinator.security.acl_apply import apply_policy
from ordered import OrderedProducer

pytestmark = [pytest.mark.integration, pytest.mark.timeout(150)]

ROOT = Path(__file__).resolve().parents[2]


def _cli(secure: Secure, user: str, *args: str, root: str) -> Any:
    return run_cli(
        *args, "--root", root, "--command-config", str(secure.properties(user)), timeout=90
    )


def _no_secret(secure: Secure, *texts: str) -> None:
    for user in ("admin", "coordinator", "producer", "consumer", "reader"):
        password = secure.password(user)
        for text in texts:
            assert password not in text, f"{user}'s password leaked"


def _fill(secure: Secure, topic: str, count: int) -> None:
    producer = Producer({"bootstrap.servers": secure.bootstrap, **secure.kafka("admin")})
    for i in range(count):
        producer.produce(topic, value=b"v", partition=0, key=f"k{i}")
    assert producer.flush(30) == 0


def test_cli_and_daemon_with_command_config(secure: Secure, secure_root: str) -> None:
    topic = secure.topic(2)
    adopted = _cli(secure, "coordinator", "adopt", topic, "--json", root=secure_root)
    assert adopted.returncode == 0, adopted.stderr
    producer = secure.store("producer", secure_root)
    producer.register_producer(
        topic,
        ProducerRecord(
            id="p1",
            host="h",
            pid=1,
            delivery_timeout_ms=60_000,
            registered_at=time.time(),
            client_id="",
        ),
    )
    # The barrier times out (p1 does not ack yet): epoch 1 stays pending.
    expand = _cli(
        secure, "coordinator", "expand", topic, "--to", "3", "--timeout", "1", root=secure_root
    )
    assert expand.returncode == 1 and "still pending" in expand.stderr, expand.stderr
    daemon = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "ordered.cli",
            "coordinator",
            "--root",
            secure_root,
            "--command-config",
            str(secure.properties("coordinator")),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    try:
        time.sleep(1.0)
        producer.ack(topic, 1, AckRecord(id="p1", epoch=1, last_offsets={}, acked_at=time.time()))
        reader = secure.store("reader", secure_root)
        # The daemon completes the pending epoch with the coordinator's credentials.
        wait_until(
            lambda: reader.get_topic(topic).pending is None,  # type: ignore[union-attr]
            timeout=60,
            what="the daemon sealing epoch 1",
        )
        assert reader.get_topic(topic).active == 3  # type: ignore[union-attr]
    finally:
        daemon.send_signal(signal.SIGTERM)
        out, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, err
    assert "NoAuth" not in err
    described = _cli(secure, "reader", "describe", topic, root=secure_root)
    assert described.returncode == 0, described.stderr
    assert "open" not in described.stdout
    as_json = _cli(secure, "reader", "describe", topic, "--json", root=secure_root)
    assert json.loads(as_json.stdout)["security"]["open"] is False
    # A producer may not change the layout: the CLI names NoAuth and the path.
    refused = _cli(secure, "producer", "expand", topic, "--to", "4", root=secure_root)
    assert refused.returncode == 1
    assert "NoAuth" in refused.stderr and f"{secure_root}/topics/{topic}" in refused.stderr
    assert "Traceback" not in refused.stderr
    _no_secret(secure, out, err, *(r.stdout + r.stderr for r in (adopted, expand, described)))
    _no_secret(secure, as_json.stdout, refused.stderr)


def test_describe_warns_when_the_tree_is_open(secure: Secure) -> None:
    root = "/" + unique("open")
    topic = secure.topic(1)
    adopted = _cli(secure, "admin", "adopt", topic, root=root)
    assert adopted.returncode == 0, adopted.stderr
    described = _cli(secure, "admin", "describe", topic, root=root)
    assert "WARNING: the tree under " + root + " is open" in described.stdout
    admin = secure.client("admin")
    apply_policy(admin, root, secure.policy())
    again = _cli(secure, "admin", "describe", topic, root=root)
    assert "is open" not in again.stdout
    admin.delete(root, recursive=True)


def _trim_first_five(secure: Secure, topic: str, root: str) -> Any:
    """``ordered coordinator trim TOPIC --partition 0 --before 5 --json`` as the coordinator."""
    return _cli(
        secure,
        "coordinator",
        "trim",
        topic,
        "--partition",
        "0",
        "--before",
        "5",
        "--json",
        root=root,
    )


def test_a_trim_without_delete_names_the_acl(secure: Secure, secure_root: str) -> None:
    refused_topic = secure.topic(1, prefix=NO_DELETE)
    allowed_topic = secure.topic(1)
    for topic in (refused_topic, allowed_topic):
        _fill(secure, topic, 10)
    refused = _trim_first_five(secure, refused_topic, secure_root)
    assert refused.returncode == 1, refused.stdout + refused.stderr
    text = refused.stdout + refused.stderr
    assert "TOPIC_AUTHORIZATION_FAILED" in text
    assert (
        f"kafka-acls --add --allow-principal User:coordinator --operation Delete "
        f"--topic {refused_topic}" in text
    )
    # The same user trims a topic where it holds DELETE: the authorizer decided.
    done = _trim_first_five(secure, allowed_topic, secure_root)
    assert done.returncode == 0, done.stdout + done.stderr
    assert json.loads(done.stdout)["partitions"][0]["status"] == "trimmed"


def test_credentials_never_shown(
    secure: Secure, secure_root: str, caplog: pytest.LogCaptureFixture
) -> None:
    password = secure.password("producer")
    caplog.set_level(1)  # everything, kazoo's BLATHER included
    topic = secure.topic(2)
    Controller(secure.store("coordinator", secure_root), secure.admin("coordinator")).adopt(topic)
    # As an application would: the properties file `cluster up --secure` wrote.
    config = {**client_config(secure.properties("producer")), "ordered.zookeeper.root": secure_root}
    producer = OrderedProducer(config)
    producer.produce(topic, b"v", b"k")
    assert producer.flush(30) == 0
    texts = [caplog.text, repr(producer.zookeeper)]
    producer.close()
    # A malformed value is refused without echoing it.
    with pytest.raises(ConfigError) as bad:
        ZkAuth.parse(f"digest-{password}")
    texts.append(str(bad.value))
    # A refusal names the identity, never the secret.
    with pytest.raises(StoreAuthError) as refused:
        secure.store("producer", secure_root).remove_topic(topic, 0)
    texts.append(str(refused.value))
    assert "digest:producer" in str(refused.value)
    texts.append(caplog.text)
    for text in texts:
        assert password not in text


def test_the_secure_cluster_requires_authentication(secure: Secure, tmp_path: Path) -> None:
    from confluent_kafka import KafkaException
    from confluent_kafka.admin import AdminClient

    for user in ("admin", "coordinator", "producer", "consumer", "reader"):
        assert secure.properties(user).stat().st_mode & 0o777 == 0o600
    status = run_cli("cluster", "status", "--dir", secure.state.directory, "--json")
    assert json.loads(status.stdout)["command.config"] == str(secure.properties("admin"))
    # Kafka: no SASL, or a wrong password, gets nothing.
    for extra in ({}, {**secure.kafka("reader"), "sasl.password": "wrong"}):
        admin = AdminClient({"bootstrap.servers": secure.bootstrap, **extra, "log_level": 0})
        with pytest.raises(KafkaException):
            admin.list_topics(timeout=3)
    # The state file says how it was started: `up` without --secure is refused.
    copy = tmp_path / "c"
    copy.mkdir()
    state = json.loads((Path(secure.state.directory) / "cluster.json").read_text())
    state.update(directory=str(copy), processes=[])
    (copy / "cluster.json").write_text(json.dumps(state))
    refused = run_cli("cluster", "up", "--dir", str(copy))
    assert refused.returncode == 1 and "holds a secure cluster" in refused.stderr


def test_acl_apply_is_idempotent_and_dry_run_writes_nothing(secure: Secure) -> None:
    root = "/" + unique("acl")
    admin = secure.client("admin")
    # A tree written before any ACL: an open group node and an open topic.
    admin.create(f"{root}/groups/old-group/topics/t", b"", makepath=True)
    admin.create(f"{root}/topics/t", b"", makepath=True)
    flags = [
        "--coordinator",
        f"@{secure.properties('coordinator')}",
        "--producers",
        f"@{secure.properties('producer')}",
        "--consumers",
        f"@{secure.properties('consumer')}",
        "--readers",
        f"@{secure.properties('reader')}",
        "--json",
    ]
    try:
        dry = _cli(secure, "admin", "acl", "apply", *flags, "--dry-run", root=root)
        assert dry.returncode == 0, dry.stderr
        planned = json.loads(dry.stdout)
        assert planned["dry_run"] and planned["changes"]
        assert admin.exists(f"{root}/acl") is None  # nothing written
        assert admin.get_acls(f"{root}/topics/t")[0][0].id.scheme == "world"
        done = _cli(secure, "admin", "acl", "apply", *flags, root=root)
        applied = json.loads(done.stdout)
        assert {c["path"] for c in applied["changes"]} == {c["path"] for c in planned["changes"]}
        notes = {c["path"]: c["note"] for c in applied["changes"]}
        assert "shared" in notes[f"{root}/groups/old-group"]
        assert f"{root}/topics/t/producers" in notes  # created for the producers
        again = json.loads(_cli(secure, "admin", "acl", "apply", *flags, root=root).stdout)
        assert again["changes"] == []
        shown = json.loads(_cli(secure, "admin", "acl", "show", "--json", root=root).stdout)
        assert shown["nodes"] and not any(n["open"] for n in shown["nodes"])
        assert again["unchanged"] == len(shown["nodes"])
        ident = _cli(secure, "producer", "acl", "id", root=root)
        assert ident.stdout.strip() == secure.identity("producer")
        _no_secret(secure, dry.stdout, done.stdout, json.dumps(shown), ident.stdout)
    finally:
        admin.delete(root, recursive=True)
