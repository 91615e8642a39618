"""The dev cluster's ZooKeeper ensemble, without servers: sizes, roles, config lines,
ports read back, the state file, and the checks ``up`` makes before starting anything."""

from __future__ import annotations

from pathlib import Path

import pytest

from coordinator.kernel.errors import ClusterError, UsageError
from ordered.devcluster import cluster, ensemble
from ordered.devcluster.cluster import up
from ordered.devcluster.ensemble import MemberPorts
from ordered.devcluster.process import ProcessRecord
from ordered.devcluster.restart import roles_of
from ordered.devcluster.state import STATE_FILE, ClusterState, load_state

NO_PID = 2**31 - 1  # above any pid_max: no process, nothing that a stray signal could reach


def _state(directory: Path, zookeepers: int) -> ClusterState:
    roles = ensemble.member_roles(zookeepers)
    return ClusterState(
        directory=str(directory),
        cluster_id="c1",
        brokers=1,
        bootstrap_servers="127.0.0.1:9092",
        zookeeper_connect=",".join(f"127.0.0.1:{2181 + i}" for i in range(zookeepers)),
        kafka_version="4.3.1",
        zookeeper_version="3.9.5",
        processes=tuple(ProcessRecord(role, NO_PID, 0, "log") for role in [*roles, "broker-1"]),
        zookeepers=zookeepers,
    )


def test_sizes_are_one_or_an_odd_ensemble() -> None:
    for good in (1, 3, 5):
        ensemble.check_size(good)
    for bad in (0, 2, 4, 6, 7, -1):
        with pytest.raises(UsageError, match="must be 1, 3 or 5"):
            ensemble.check_size(bad)


def test_roles_of_a_single_server_and_of_members() -> None:
    assert ensemble.member_roles(1) == ["zookeeper"]
    assert ensemble.member_roles(3) == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    for role in ("zookeeper", "zookeeper-1", "zookeeper-12"):
        assert ensemble.is_zookeeper(role)
    for role in ("broker-1", "zookeeper-", "zookeeper-x", "xzookeeper"):
        assert not ensemble.is_zookeeper(role)


def test_every_member_lists_the_whole_ensemble_and_ports_read_back(tmp_path: Path) -> None:
    ports = [MemberPorts(2181 + i, 3000 + i, 4000 + i) for i in range(3)]
    lines = ensemble.quorum_lines(ports)
    assert lines == [
        "server.1=127.0.0.1:3000:4000",
        "server.2=127.0.0.1:3001:4001",
        "server.3=127.0.0.1:3002:4002",
    ]
    assert ensemble.quorum_lines([MemberPorts(2181)]) == []
    for i, role in enumerate(ensemble.member_roles(3)):
        if i == 2:
            continue  # a member whose config was never written
        (tmp_path / role).mkdir()
        (tmp_path / role / "zoo.cfg").write_text(
            "\n".join(["tickTime=500", f"clientPort={ports[i].client}", *lines, ""])
        )
    assert ensemble.previous_ports(tmp_path, 3) == [ports[0], ports[1], None]


def test_the_state_file_records_the_count_and_older_files_mean_one(tmp_path: Path) -> None:
    state = _state(tmp_path, 3)
    again = ClusterState.from_json(state.to_json())
    assert again == state and again.zookeepers == 3
    assert state.to_settings()["zookeepers"] == 3
    old = state.to_json().replace('"zookeepers": 3', '"unrelated": 0')
    assert ClusterState.from_json(old).zookeepers == 1


def test_up_refuses_before_starting_anything(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def no_servers() -> str:
        raise AssertionError("up went on to start servers")

    monkeypatch.setattr(cluster, "find_java", no_servers)
    with pytest.raises(UsageError, match="--zookeepers must be 1, 3 or 5, not 2"):
        up(tmp_path / "fresh", zookeepers=2)
    assert not (tmp_path / "fresh").exists()
    directory = tmp_path / "c"
    directory.mkdir()
    (directory / STATE_FILE).write_text(_state(directory, 3).to_json())
    # No process has NO_PID: the recorded cluster is stopped, so only its shape is checked.
    with pytest.raises(ClusterError, match=r"3 ZooKeeper server.*--zookeepers 3"):
        up(directory, zookeepers=1)
    assert load_state(directory) == _state(directory, 3)


def test_zookeeper_stands_for_every_member(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text(_state(tmp_path, 3).to_json())
    assert roles_of(tmp_path, "zookeeper") == ["zookeeper-1", "zookeeper-2", "zookeeper-3"]
    assert roles_of(tmp_path, "zookeeper-2") == ["zookeeper-2"]
    assert roles_of(tmp_path, "broker-1") == ["broker-1"]
    with pytest.raises(ClusterError, match="no zookeeper-4"):
        roles_of(tmp_path, "zookeeper-4")
    single = tmp_path / "single"
    single.mkdir()
    (single / STATE_FILE).write_text(_state(single, 1).to_json())
    assert roles_of(single, "zookeeper") == ["zookeeper"]


def test_ports_asked_for_else_kept_from_the_previous_run_else_free(tmp_path: Path) -> None:
    state = _state(tmp_path, 3)  # clients 2181..2183, broker 9092
    peers = [MemberPorts(2181 + i, 3000 + i, 4000 + i) for i in range(3)]
    for i, role in enumerate(ensemble.member_roles(3)):
        (tmp_path / role).mkdir()
        config = [f"clientPort={peers[i].client}", *ensemble.quorum_lines(peers), ""]
        (tmp_path / role / "zoo.cfg").write_text("\n".join(config))
    (tmp_path / "kafka-1").mkdir()
    (tmp_path / "kafka-1" / "server.properties").write_text(
        "listeners=PLAINTEXT://127.0.0.1:9092,CONTROLLER://127.0.0.1:9093\n"
    )
    # A restart keeps every port; a second broker (no previous one) takes free ones.
    zk, kafka = cluster._ports(tmp_path, state, 2, None, None, 3)
    assert zk == peers
    assert kafka[0] == (9092, 9093)
    assert len(set(kafka[1]) | {9092, 9093}) == 4
    # Asked-for first ports win over the previous ones, one more per server.
    zk, kafka = cluster._ports(tmp_path, state, 2, 19092, 12181, 3)
    assert [p.client for p in zk] == [12181, 12182, 12183]
    assert [(p.peer, p.election) for p in zk] == [(p.peer, p.election) for p in peers]
    assert [b for b, _c in kafka] == [19092, 19093]
    assert kafka[0][1] == 9093
    # A fresh cluster: all free and distinct; a single ZooKeeper has only a client port.
    zk, kafka = cluster._ports(tmp_path / "fresh", None, 2, None, None, 1)
    assert zk[0].peer == zk[0].election == 0
    assert len({zk[0].client, *kafka[0], *kafka[1]}) == 5
