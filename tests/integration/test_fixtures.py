"""The fixtures module's ZooKeeper helpers do what they say, against the real server."""

from __future__ import annotations

from collections.abc import Callable

import pytest
from fixtures import expire_session, lose_connection
from helpers import wait_until
from kazoo.client import KazooClient

pytestmark = [pytest.mark.integration, pytest.mark.timeout(60)]


def test_lose_connection_keeps_the_session_and_expire_session_ends_it(
    kazoo_factory: Callable[..., KazooClient],
) -> None:
    client = kazoo_factory()
    states: list[str] = []
    client.add_listener(states.append)
    session = client.client_id[0]

    lose_connection(client)
    wait_until(lambda: client.connected, timeout=15, what="the reconnect")
    assert "SUSPENDED" in states and "LOST" not in states
    assert client.client_id[0] == session

    listeners = set(client.state_listeners)
    expire_session(client)
    assert client.connected  # it returns once the client has a new session
    assert set(client.state_listeners) == listeners  # and removed its listener
    assert "LOST" in states
    assert client.client_id[0] != session
