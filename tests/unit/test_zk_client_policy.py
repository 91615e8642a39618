"""The ACL policy watch of ``AuthClient`` when a re-read fails (pure: no server)."""

from __future__ import annotations

import logging

import pytest
from kazoo.exceptions import ConnectionLoss
from kazoo.protocol.states import KeeperState

from coordinator.kernel.zk_auth import ZkAuth
from coordinator.kernel.zk_client import AuthClient


class _Failed:
    """A kazoo async result that failed with ``exc``."""

    def __init__(self, exc: Exception) -> None:
        self._exc = exc

    def get(self) -> object:
        raise self._exc


def _client() -> AuthClient:
    # Never started: only the callback's handling of a failed read is exercised.
    return AuthClient(auth=ZkAuth(), acl_root="/root", hosts="127.0.0.1:1")


def test_a_read_failed_by_the_client_closing_is_not_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    client = _client()
    assert client.client_state == KeeperState.CLOSED  # as kazoo sets it when stopping
    with caplog.at_level(logging.WARNING, logger="coordinator.kernel.zk_client"):
        client._on_policy_read(_Failed(ConnectionLoss()), "/root/acl")
    assert caplog.records == []


def test_a_read_failed_while_connected_is_reported(caplog: pytest.LogCaptureFixture) -> None:
    client = _client()
    client._state = KeeperState.CONNECTED  # kazoo's own field behind client_state
    with caplog.at_level(logging.WARNING, logger="coordinator.kernel.zk_client"):
        client._on_policy_read(_Failed(ConnectionLoss()), "/root/acl")
    assert [r.getMessage() for r in caplog.records] == [
        "cannot re-read the ACL policy at /root/acl: ConnectionLoss"
    ]
