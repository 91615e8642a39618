"""Session-scoped real servers and per-test names for the integration tests.

The one-broker cluster starts on first use and serves every test of the session; the
three-broker cluster starts only when a test asks for it. Set ORDERED_TEST_CLUSTER_DIR
to the directory of a running ``ordered cluster up`` to reuse it across runs. The
secure cluster (``up --secure``: SASL/SCRAM Kafka with ACLs, digest ZooKeeper) starts
only for the tests that ask for ``secure_cluster``; ORDERED_TEST_SECURE_CLUSTER_DIR
reuses a running one.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import fixtures
import pytest
import secure_fixtures
from helpers import create_topic, unique
from kazoo.client import KazooClient
from kit import Kit
from worker_groups import queue_rank, worker_group

from coordinator.control.controller import Controller
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store import CONSUMER_BARRIER, FeatureRecord, LayoutStore
from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster
from ordered.devcluster.cluster import ClusterState

_capture: Any = None

FIXTURES_PLUGIN = "ordered-test-fixtures"
"""The plugin name of ``tests/fixtures.py``. It is registered here, not listed in
``pytest_plugins``: pytest reserves the plugin name ``fixtures`` (its own
``_pytest.fixtures``), so ``pytest_plugins = ["fixtures"]`` would silently load nothing."""

SECURE_PLUGIN = "ordered-test-secure-fixtures"
"""The plugin name of ``tests/secure_fixtures.py`` (the secure cluster's fixtures)."""


def pytest_configure(config: pytest.Config) -> None:
    """Register the fixtures module as a plugin; keep the capture manager."""
    global _capture
    if config.pluginmanager.get_plugin(FIXTURES_PLUGIN) is None:
        config.pluginmanager.register(fixtures, FIXTURES_PLUGIN)
    if config.pluginmanager.get_plugin(SECURE_PLUGIN) is None:
        config.pluginmanager.register(secure_fixtures, SECURE_PLUGIN)
    _capture = config.pluginmanager.get_plugin("capturemanager")


def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: one scope per :func:`worker_group`, queued in collection order.

    A scheduler rather than ``xdist_group`` marks: the marks work by renaming node ids,
    which pytest 9.2's node ids no longer allow.
    """
    if config.getvalue("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class GroupScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return worker_group(nodeid)

    return GroupScheduling(config, log)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """In xdist's workers, queue the heavy groups first (the controller keeps this order)."""
    # Workers run with ``dist`` "no" and ``loadgroup`` set from the controller's option.
    if not getattr(config.option, "loadgroup", False):
        return
    order = {id(item): index for index, item in enumerate(items)}
    items.sort(key=lambda item: (queue_rank(item.nodeid), order[id(item)]))


def _say(message: str) -> None:
    # The CI log must show which servers were started and used, whatever the capture.
    if _capture is None:
        print(f"[cluster] {message}", file=sys.stderr, flush=True)
        return
    with _capture.global_and_fixture_disabled():
        print(f"[cluster] {message}", file=sys.stderr, flush=True)


def _start(tmp: Path, brokers: int, secured: bool = False) -> Iterator[ClusterState]:
    reuse = os.environ.get(
        "ORDERED_TEST_SECURE_CLUSTER_DIR" if secured else "ORDERED_TEST_CLUSTER_DIR"
    )
    if reuse and brokers == 1:
        state = devcluster.status(Path(reuse))
        if state.running():
            _say(f"reusing Kafka {state.kafka_version} at {state.bootstrap_servers}")
            yield state
            return
    started = time.monotonic()
    state = devcluster.up(tmp, brokers=brokers, progress=_say, secured=secured)
    _say(
        ("secure " if secured else "")
        + f"Kafka {state.kafka_version} ({brokers} broker(s)) at {state.bootstrap_servers}, "
        f"ZooKeeper {state.zookeeper_version} at {state.zookeeper_connect}, "
        f"up in {time.monotonic() - started:.1f} s"
    )
    try:
        yield state
    finally:
        _, killed = devcluster.down(tmp)
        _say(f"stopped the {brokers}-broker cluster" + (f" (killed {killed})" if killed else ""))


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    """A running one-broker Kafka (KRaft) and a ZooKeeper, for the whole session."""
    yield from _start(tmp_path_factory.mktemp("cluster1"), 1)


@pytest.fixture(scope="session")
def cluster3(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    """A running three-broker Kafka (KRaft quorum of three) and a ZooKeeper."""
    yield from _start(tmp_path_factory.mktemp("cluster3"), 3)


@pytest.fixture(scope="session")
def secure_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterState]:
    """A running secure one-broker cluster (``ordered cluster up --secure``)."""
    yield from _start(tmp_path_factory.mktemp("secure"), 1, secured=True)


@pytest.fixture
def bootstrap(cluster: ClusterState) -> str:
    """``bootstrap.servers`` of the one-broker cluster."""
    return cluster.bootstrap_servers


@pytest.fixture
def zk_hosts(cluster: ClusterState) -> str:
    """The ZooKeeper connect string (no chroot) of the session cluster."""
    return cluster.zookeeper_connect


@pytest.fixture
def zk_root(zk_hosts: str) -> Iterator[str]:
    """A fresh ZooKeeper root path for this test, deleted afterwards.

    ``ORDERED_TEST_CONSUMER_BARRIER=1``: the root starts with the consumer barrier on
    (``docs/consumer-barrier.md``), so that every test runs with it unchanged.
    """
    root = "/" + unique("test")
    if os.environ.get("ORDERED_TEST_CONSUMER_BARRIER"):
        client = start_client(make_client(zk_hosts), 15.0)
        try:
            record = FeatureRecord(
                feature=CONSUMER_BARRIER, enabled=True, changed_at=time.time(), changed_by="test"
            )
            LayoutStore(client, root).set_feature(record)
        finally:
            close_client(client)
    yield root
    client = start_client(make_client(zk_hosts), 15.0)
    try:
        client.delete(root, recursive=True)
    finally:
        close_client(client)


@pytest.fixture
def zk_connect(zk_hosts: str, zk_root: str) -> str:
    """A connect string chrooted at this test's fresh root (the root node exists)."""
    client = start_client(make_client(zk_hosts), 15.0)
    try:
        client.ensure_path(zk_root)
    finally:
        close_client(client)
    return zk_hosts + zk_root


@pytest.fixture
def kazoo(zk_connect: str) -> Iterator[KazooClient]:
    """A started kazoo client chrooted at this test's root."""
    client = start_client(make_client(zk_connect), 15.0)
    yield client
    close_client(client)


@pytest.fixture
def store(zk_hosts: str, zk_root: str) -> Iterator[LayoutStore]:
    """A layout store under this test's root, over its own kazoo client."""
    client = start_client(
        make_client(zk_hosts, session_timeout_s=6.0, command_deadline_s=10.0), 10.0
    )
    try:
        yield LayoutStore(client, zk_root)
    finally:
        close_client(client)


@pytest.fixture
def controller(store: LayoutStore, bootstrap: str) -> Controller:
    """A controller over ``store`` and the one-broker cluster."""
    return Controller(store, KafkaAdmin(bootstrap, timeout=10.0))


@pytest.fixture
def topic_factory(bootstrap: str) -> Callable[..., str]:
    """Create uuid-named topics in the one-broker cluster: ``topic_factory(partitions)``."""

    def make(partitions: int = 4, config: dict[str, str] | None = None, prefix: str = "t") -> str:
        return create_topic(bootstrap, unique(prefix), partitions, 1, config)

    return make


@pytest.fixture
def group_factory() -> Callable[[], str]:
    """Return uuid-named consumer group ids."""
    return lambda: unique("g")


@pytest.fixture
def kit(request: pytest.FixtureRequest) -> Kit:
    """This test's common fixtures under one name (:class:`kit.Kit`), each set up on first use."""
    return Kit(request)
