"""Values a client cannot take are refused by its constructor, which returns (issue 29).

``"ordered.zookeeper.session.timeout.ms": 10**12`` passed validation; kazoo's thread died
packing it into a 32-bit int, and ``OrderedProducer(...)`` waited for a connection that
never came (killed after 90 s). Each constructor runs in a thread with a deadline, so a
hang fails the test instead of holding the suite.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from coordinator.kernel.errors import ConfigError
from ordered import OrderedConsumer, OrderedProducer

DEADLINE_S = 20.0

# Nothing listens here: a constructor that got past its checks would wait to connect.
_BASE = {"bootstrap.servers": "127.0.0.1:9", "ordered.zookeeper.connect": "127.0.0.1:9"}


def _construct(make: Callable[[], Any]) -> BaseException | None:
    """Run ``make`` in a thread; return what it raised. Fails the test on a hang."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            client = make()
        except BaseException as exc:  # the test inspects it
            outcome.append(exc)
        else:
            outcome.append(None)
            client.close()

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(DEADLINE_S)
    assert not thread.is_alive(), f"the constructor still runs after {DEADLINE_S:g} s"
    return outcome[0]


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ordered.zookeeper.session.timeout.ms", 10**12),
        ("ordered.zookeeper.session.timeout.ms", 2**31),
        ("ordered.zookeeper.session.timeout.ms", "99999999999999999999999"),
    ],
)
def test_the_producer_refuses_a_session_timeout_kazoo_cannot_send(key: str, value: Any) -> None:
    raised = _construct(lambda: OrderedProducer({**_BASE, key: value}))
    assert isinstance(raised, ConfigError), raised
    assert key in str(raised) and "2147483647" in str(raised)


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("ordered.zookeeper.session.timeout.ms", 10**12),
        ("ordered.gate.poll.interval.ms", 10**12),
        ("ordered.audit.every", 2**40),
        ("ordered.zookeeper.connect", "host:notaport"),
    ],
)
def test_the_consumer_refuses_values_out_of_range(key: str, value: Any) -> None:
    config = {**_BASE, "group.id": "g", key: value}
    raised = _construct(lambda: OrderedConsumer(config))
    assert isinstance(raised, ConfigError), raised
    assert key in str(raised)
