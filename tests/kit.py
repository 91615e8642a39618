"""The ``kit`` fixture's object: one test's servers, store root and client factories.

Most integration tests need the same handful of fixtures (the cluster's addresses, this
test's store root, its controller, topic, group, producer and consumer factories);
``kit`` gives them under one name, so a test's signature lists only what is particular
to it. Each attribute is the very fixture of the same name, set up on first use: a test
that never touches ``kit.store`` opens no store client.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import pytest
from helpers import closed_port

if TYPE_CHECKING:
    # Types only: the kit works whatever module path these classes live at.
    from kazoo.client import KazooClient

    from coordinator.control.controller import Controller
    from coordinator.kernel.store import LayoutStore
    from ordered import OrderedProducer
    from ordered.consumer import OrderedConsumer

__all__ = ["Kit"]

T = TypeVar("T")


class _Fixture(Generic[T]):
    """A :class:`Kit` attribute: the test's fixture of the attribute's name."""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name

    def __get__(self, kit: Kit, owner: type | None = None) -> T:
        value: T = kit.request.getfixturevalue(self.name)
        return value


class Kit:
    """The common fixtures of one test, by name (``kit.bootstrap``, ``kit.controller``, ...)."""

    bootstrap: _Fixture[str] = _Fixture()
    """``bootstrap.servers`` of the one-broker cluster."""
    zk_hosts: _Fixture[str] = _Fixture()
    """The session ZooKeeper's connect string (no chroot)."""
    zk_root: _Fixture[str] = _Fixture()
    """This test's fresh store root."""
    store: _Fixture[LayoutStore] = _Fixture()
    """A layout store under this test's root."""
    controller: _Fixture[Controller] = _Fixture()
    """A controller over :attr:`store` and the one-broker cluster."""
    zk: _Fixture[KazooClient] = _Fixture()
    """A started kazoo client on the session ZooKeeper (no chroot)."""
    kazoo_factory: _Fixture[Callable[..., KazooClient]] = _Fixture()
    """Make started kazoo clients, each closed at teardown."""
    topic_factory: _Fixture[Callable[..., str]] = _Fixture()
    """Create uuid-named topics: ``topic_factory(partitions, config=None, prefix="t")``."""
    group_factory: _Fixture[Callable[[], str]] = _Fixture()
    """Return uuid-named consumer group ids."""
    make_producer: _Fixture[Callable[..., OrderedProducer]] = _Fixture()
    """Make ``OrderedProducer``s on this test's root: ``make_producer(**extra)``."""
    make_consumer: _Fixture[Callable[..., OrderedConsumer]] = _Fixture()
    """Make ``OrderedConsumer``s on this test's root: ``make_consumer(group, **extra)``."""
    ordered_cli: _Fixture[Callable[..., Any]] = _Fixture()
    """Run the ``ordered`` CLI under this test's root: ``ordered_cli(*args)``."""

    def __init__(self, request: pytest.FixtureRequest) -> None:
        self.request = request

    @property
    def cli_servers(self) -> list[str]:
        """The ``ordered`` CLI's server arguments for this test's cluster and store root."""
        servers = ("--zookeeper", self.zk_hosts, "--bootstrap-servers", self.bootstrap)
        return [*servers, "--root", self.zk_root]

    def adopted_topic(self, partitions: int = 4, **adopt: Any) -> str:
        """A new topic of ``partitions``, adopted by :attr:`controller` (``adopt``: its options)."""
        topic = self.topic_factory(partitions)
        self.controller.adopt(topic, **adopt)
        return topic

    def unreachable_producer(self, **extra: Any) -> OrderedProducer:
        """An ``OrderedProducer`` on this test's ZooKeeper root whose Kafka never answers.

        Its ``bootstrap.servers`` is a loopback port nothing listens on; ``extra``: more
        configuration (``message.timeout.ms``...). The caller closes it.
        """
        from ordered import OrderedProducer  # at call time: the kit imports no project module

        config: dict[str, Any] = {
            "bootstrap.servers": f"127.0.0.1:{closed_port()}",
            "ordered.zookeeper.connect": self.zk_hosts,
            "ordered.zookeeper.root": self.zk_root,
            "log_level": 0,
        }
        return OrderedProducer({**config, **extra})
