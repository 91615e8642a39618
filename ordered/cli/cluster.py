"""``ordered cluster fetch|up|status|down``: the local development cluster."""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path

from coordinator.kernel.errors import ClusterError
from ordered import devcluster
from ordered.cli import cluster_env
from ordered.cli.options import IntArg, cluster_dir_arguments, seconds
from ordered.cli.output import emit, progress, warn
from ordered.devcluster import ensemble, secure
from ordered.devcluster.cluster import ClusterState

__all__ = ["add_parser"]


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Register the ``cluster`` command and its subcommands on ``sub``."""
    cluster = sub.add_parser("cluster", help="a local Kafka (KRaft) + ZooKeeper for development")
    actions = cluster.add_subparsers(dest="action", required=True, metavar="ACTION")

    fetch = actions.add_parser("fetch", help="resolve the pinned Kafka and ZooKeeper jars")
    fetch.add_argument("--json", action="store_true", help="print JSON")
    fetch.set_defaults(func=_files(_fetch))
    cluster_env.add_parser(actions)

    up = actions.add_parser(
        "up",
        help="start ZooKeeper and Kafka and print the settings; a stopped cluster restarts "
        "on its previous ports, a partly running one gets its dead processes restarted",
    )
    cluster_dir_arguments(up)
    up.add_argument("--brokers", type=int, choices=(1, 3), default=1, help="Kafka nodes")
    up.add_argument(
        "--zookeepers",
        type=_zookeepers,
        default=None,
        metavar="{1,3,5}",
        help="ZooKeeper servers: 1, or an ensemble of 3 or 5 in quorum mode (members "
        "zookeeper-1...; up waits for a leader); default: as many as the --dir's cluster "
        "has, else 1",
    )
    up.add_argument(
        "--kafka-port",
        type=_port,
        default=None,
        help="first broker port (default: the previous port, else a free one)",
    )
    up.add_argument(
        "--zookeeper-port",
        type=_port,
        default=None,
        help="ZooKeeper client port, the first member's of an ensemble (the others follow; "
        "default: the previous ports, else free ones)",
    )
    up.add_argument("--timeout", type=seconds, default=120.0, help="seconds to wait for start")
    up.add_argument(
        "--secure",
        action="store_true",
        help="Kafka with SASL/SCRAM-SHA-512 and ACLs, ZooKeeper with digest auth over TLS "
        "only; writes <dir>/client.properties for --command-config",
    )
    up.set_defaults(func=_files(_up))

    st = actions.add_parser(
        "status",
        help="print the settings and which processes run; exit code 0 only when every process runs",
    )
    cluster_dir_arguments(st)
    st.set_defaults(func=_files(_status))

    down = actions.add_parser(
        "down",
        help="stop exactly the processes `up` started (a stopped cluster: nothing to do, exit 0)",
    )
    cluster_dir_arguments(down)
    down.set_defaults(func=_files(_down))


def _files(action: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Report a file-system error (a --dir that cannot be created, say) as a ClusterError."""

    def run(args: argparse.Namespace) -> int:
        try:
            return action(args)
        except OSError as exc:
            where = f" {exc.filename}" if exc.filename else ""
            raise ClusterError(f"cannot use{where}: {exc.strerror or exc}") from None

    return run


_port = IntArg(1, 65535, "a port")


def _zookeepers(text: str) -> int:
    """``--zookeepers``: 1, 3 or 5 (argparse turns the ValueError into a usage error)."""
    try:
        count = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 1, 3 or 5, got {text!r}") from None
    if count not in ensemble.SIZES:
        raise argparse.ArgumentTypeError(
            f"expected 1, 3 or 5, got {count}: an ensemble needs an odd number of servers "
            "(a majority must survive the loss of a minority)"
        )
    return count


def _zookeeper_modes(state: ClusterState) -> dict[str, str]:
    """Each ZooKeeper server's mode (leader, follower, standalone, not serving, down)."""
    roles = ensemble.member_roles(state.zookeepers)
    return ensemble.modes(state.zookeeper_connect, roles)


def _settings_text(state: ClusterState, zk_modes: dict[str, str]) -> str:
    alive = {p.role for p in state.running()}
    lines = [
        f"bootstrap.servers={state.bootstrap_servers}",
        f"zookeeper.connect={state.zookeeper_connect}",
        f"kafka.version={state.kafka_version}",
        f"zookeeper.version={state.zookeeper_version}",
        f"brokers={state.brokers}",
        f"zookeepers={state.zookeepers}",
        f"directory={state.directory}",
    ]
    if state.secure:
        lines.append(f"command.config={state.client_properties}")
        lines.append(f"zookeeper.ssl.ca.location={secure.ca_path(Path(state.directory))}")
    for p in state.processes:
        mode = f" ({zk_modes[p.role]})" if p.role in zk_modes and p.role in alive else ""
        state_word = "running" if p.role in alive else "stopped"
        lines.append(f"process {p.role} pid {p.pid} {state_word}{mode}")
    return "\n".join(lines)


def _payload(state: ClusterState, zk_modes: dict[str, str]) -> dict[str, object]:
    return {**state.to_settings(), "zookeeper.modes": zk_modes}


def _fetch(args: argparse.Namespace) -> int:
    resolved = devcluster.fetch(progress)
    payload = {
        r.component: {
            "version": r.version,
            "directory": str(r.directory),
            "fetched": r.fetched,
            "seconds": round(r.seconds, 2),
        }
        for r in resolved
    }
    text = "\n".join(
        f"{r.component} {r.version}: {'fetched' if r.fetched else 'cached'} in "
        f"{r.seconds:.1f} s ({r.directory})"
        for r in resolved
    )
    emit(payload, text, args.json)
    return 0


def _up(args: argparse.Namespace) -> int:
    state = devcluster.up(
        args.dir,
        brokers=args.brokers,
        kafka_port=args.kafka_port,
        zookeeper_port=args.zookeeper_port,
        timeout=args.timeout,
        progress=progress,
        secured=args.secure,
        zookeepers=args.zookeepers,
    )
    zk = "ZooKeeper" if state.zookeepers == 1 else f"a {state.zookeepers}-server ZooKeeper ensemble"
    progress(
        f"Kafka {state.kafka_version} ({state.brokers} broker(s)) and {zk} "
        f"{state.zookeeper_version} up in {state.start_seconds:.1f} s"
    )
    zk_modes = _zookeeper_modes(state)
    emit(_payload(state, zk_modes), _settings_text(state, zk_modes), args.json)
    return 0


def _status(args: argparse.Namespace) -> int:
    state = devcluster.status(args.dir)
    alive = {p.role for p in state.running()}
    stopped = [p.role for p in state.processes if p.role not in alive]
    healthy = bool(state.processes) and not stopped
    zk_modes = _zookeeper_modes(state)
    payload = _payload(state, zk_modes)
    payload["running"] = healthy
    payload["stopped"] = stopped
    emit(payload, _settings_text(state, zk_modes), args.json)
    if not healthy:
        what = ", ".join(stopped) if alive else "every process"
        warn(
            f"the cluster in {state.directory} is not running ({what} stopped); "
            "`ordered cluster up` starts what is stopped"
        )
    return 0 if healthy else 1


def _down(args: argparse.Namespace) -> int:
    before = devcluster.status(args.dir)
    running = [p.role for p in before.running()]
    state, killed = devcluster.down(args.dir)
    note = f" ({', '.join(killed)} needed SIGKILL)" if killed else ""
    text = (
        f"stopped the cluster in {state.directory}{note}"
        if running
        else f"the cluster in {state.directory} is not running; nothing to stop"
    )
    emit(
        {"stopped": running, "killed": killed, "directory": state.directory},
        text,
        args.json,
    )
    return 0
