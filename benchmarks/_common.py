"""What the Kafka benchmarks share: their servers, a scratch store root, the run's facts."""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import platform
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import confluent_kafka
from kazoo.client import KazooClient

from coordinator.kernel.zk import close_client, make_client, start_client
from ordered import devcluster

__all__ = [
    "environment",
    "parser",
    "scratch_root",
    "servers",
    "set_consumer_barrier",
    "write_results",
]


@contextlib.contextmanager
def servers(args: argparse.Namespace, name: str) -> Iterator[tuple[str, str]]:
    """Yield (bootstrap, zookeeper): ``--bootstrap``/``--zookeeper``, or a cluster of our own."""
    if args.bootstrap and args.zookeeper:
        yield args.bootstrap, args.zookeeper
        return
    with tempfile.TemporaryDirectory(prefix=f"bench-{name}-") as tmp:
        state = devcluster.up(Path(tmp), progress=lambda m: print(f"[cluster] {m}", flush=True))
        try:
            yield state.bootstrap_servers, state.zookeeper_connect
        finally:
            devcluster.down(Path(tmp))


@contextlib.contextmanager
def scratch_root(zookeeper: str) -> Iterator[tuple[KazooClient, str]]:
    """Yield a started kazoo client and a fresh store root, deleted afterwards."""
    root = f"/bench-{uuid.uuid4().hex[:8]}"
    client = start_client(make_client(zookeeper, command_deadline_s=10.0), 15.0, "--zookeeper")
    try:
        yield client, root
    finally:
        with contextlib.suppress(Exception):
            client.delete(root, recursive=True)
        close_client(client)


def environment(benchmark: str) -> dict[str, Any]:
    """The facts every result file starts with."""
    version = confluent_kafka.version()  # a tuple before 2.16, the version string since
    return {
        "benchmark": benchmark,
        "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "confluent_kafka": version[0] if isinstance(version, tuple) else version,
        "librdkafka": confluent_kafka.libversion()[0],
    }


def parser(doc: str | None) -> argparse.ArgumentParser:
    """The benchmark's argument parser (described by ``doc``'s first line), with the
    ``--bootstrap``/``--zookeeper`` options that :func:`servers` reads."""
    out = argparse.ArgumentParser(description=doc.splitlines()[0] if doc else "")
    out.add_argument("--bootstrap", help="bootstrap.servers of a running Kafka")
    out.add_argument("--zookeeper", help="ZooKeeper connect string of a running ZooKeeper")
    out.add_argument(
        "--consumer-barrier",
        nargs="?",
        choices=["on", "off", "default"],
        const="on",
        default="default",
        help="the consumer-barrier feature in the scratch root, written before its first "
        "adoption (default: what that adoption leaves; docs/consumer-barrier.md)",
    )
    return out


def set_consumer_barrier(client: KazooClient, root: str, choice: str) -> None:
    """Write the consumer barrier's flag under ``root`` unless ``choice`` is ``default``
    (imported here: a benchmark run against an ordered without the barrier, for a
    before/after pair, never imports it)."""
    if choice == "default":
        return
    from coordinator.kernel.store import CONSUMER_BARRIER, FeatureRecord, LayoutStore

    record = FeatureRecord(
        feature=CONSUMER_BARRIER,
        enabled=choice == "on",
        changed_at=time.time(),
        changed_by="bench",
    )
    LayoutStore(client, root).set_feature(record)


def write_results(path: Path, results: dict[str, Any]) -> None:
    """Write ``results`` to ``path`` as sorted, indented JSON (making its folder)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(results, indent=2, sort_keys=True) + "\n")
