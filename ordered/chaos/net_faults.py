"""Network faults of ``ordered chaos --network-faults``: cuts, blackholes and latency.

The run starts a :class:`~ordered.chaos.netproxy.ProxyHost` before the cluster and
routes every producer, reader, exactly-once stage and coordinator daemon of the run
through fault proxies; the run's own commands (layout changes, trims, probes) stay
direct, as an operator's would.

* **Kafka**: one proxy per broker. Kafka's clients follow the *advertised* address of
  each broker, so a proxy in front of the bootstrap alone would be bypassed: each broker
  gets a second listener, ``CLIENT``, whose advertised port is its proxy's
  (``devcluster.up(client_listeners=...)``); inter-broker and controller traffic stay
  on the direct listeners. A Kafka fault hits every client of that broker at once.
* **ZooKeeper**: one proxy per process slot (and per ZooKeeper server, for an ensemble),
  made when the slot first starts and kept for its later incarnations. So one
  coordinator (the leader, say) can be cut off while the other keeps its session and
  takes over, or one producer while the others write on: a proxy shared by all would
  only repeat what ``zookeeper-restart`` already does to everyone.

Each fault lasts a seeded 2-20 s (latency: 50-500 ms each way), then its proxies return
to ``pass``. A fault on a proxy that still serves an earlier one ends the earlier one
first (the earlier restore becomes a no-op).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from ordered.chaos.netproxy import HOST, FaultProxy, Mode, ProxyHost
from ordered.chaos.schedule import FaultKind, ScheduledFault
from ordered.devcluster.process import free_ports

__all__ = ["KAFKA_KINDS", "NET_KINDS", "ZOOKEEPER_KINDS", "NetFaults", "NetProxies", "totals"]

KAFKA_KINDS = frozenset({FaultKind.KAFKA_CUT, FaultKind.KAFKA_BLACKHOLE, FaultKind.KAFKA_LATENCY})
ZOOKEEPER_KINDS = frozenset(
    {FaultKind.ZOOKEEPER_CUT, FaultKind.ZOOKEEPER_BLACKHOLE, FaultKind.ZOOKEEPER_LATENCY}
)
NET_KINDS = KAFKA_KINDS | ZOOKEEPER_KINDS

_MODES = {
    FaultKind.KAFKA_CUT: Mode.CUT,
    FaultKind.KAFKA_BLACKHOLE: Mode.BLACKHOLE,
    FaultKind.KAFKA_LATENCY: Mode.LATENCY,
    FaultKind.ZOOKEEPER_CUT: Mode.CUT,
    FaultKind.ZOOKEEPER_BLACKHOLE: Mode.BLACKHOLE,
    FaultKind.ZOOKEEPER_LATENCY: Mode.LATENCY,
}


class NetProxies:
    """The run's proxies: one per broker's client listener, one per (slot, ZooKeeper server).

    Args:
        brokers: The run's Kafka brokers; their proxies start at once, so their ports
            can be advertised before the brokers start.
    """

    def __init__(self, brokers: int) -> None:
        self.host = ProxyHost()
        self._listen = free_ports(brokers)
        self.kafka = [
            self.host.add(f"broker-{i + 1}", (HOST, port)) for i, port in enumerate(self._listen)
        ]
        self._zookeeper: list[tuple[str, int]] = []
        self._chroot = ""
        self.by_slot: dict[str, list[FaultProxy]] = {}
        self._lock = threading.Lock()

    @property
    def client_listeners(self) -> list[tuple[int, int]]:
        """Per broker: the port of its ``CLIENT`` listener and the port it advertises there."""
        return [
            (listen, proxy.port) for listen, proxy in zip(self._listen, self.kafka, strict=True)
        ]

    @property
    def bootstrap(self) -> str:
        """``bootstrap.servers`` through the proxies."""
        return ",".join(f"{HOST}:{proxy.port}" for proxy in self.kafka)

    def set_zookeeper(self, connect: str) -> None:
        """The cluster's ZooKeeper connect string (``host:port[,host:port...][/chroot]``)."""
        hosts, slash, chroot = connect.partition("/")
        self._chroot = slash + chroot
        self._zookeeper = [
            (host, int(port)) for host, port in (h.rsplit(":", 1) for h in hosts.split(","))
        ]

    def zookeeper_for(self, slot: str) -> str:
        """The connect string of ``slot``'s own proxies (made on the slot's first start)."""
        with self._lock:
            proxies = self.by_slot.get(slot)
            if proxies is None:
                proxies = [
                    self.host.add(f"zookeeper-{slot}-{i + 1}", server)
                    for i, server in enumerate(self._zookeeper)
                ]
                self.by_slot[slot] = proxies
        return ",".join(f"{HOST}:{p.port}" for p in proxies) + self._chroot

    def targets(self, fault: ScheduledFault) -> list[FaultProxy]:
        """The proxies a fault acts on (none when its slot never started)."""
        if fault.kind in KAFKA_KINDS:
            index = int(fault.target.rsplit("-", 1)[1]) - 1
            return [self.kafka[index]] if 0 <= index < len(self.kafka) else list(self.kafka)
        with self._lock:
            return list(self.by_slot.get(fault.target, []))

    def stats(self) -> dict[str, dict[str, int]]:
        """Per proxy: connections accepted and reset, bytes forwarded each way."""
        return {p.name: dict(vars(p.stats)) for p in self.host.proxies}

    def close(self) -> None:
        """Stop every proxy."""
        self.host.close()


class NetFaults:
    """Injects the network fault kinds of a chaos run and restores them on time.

    Args:
        proxies: The run's proxies.
        say: Prints a line of the fault log (a fault that finds no proxy is skipped).
    """

    def __init__(self, proxies: NetProxies, say: Callable[[str], None]) -> None:
        self.proxies = proxies
        self.say = say
        self._generation: dict[str, int] = {}
        self._lock = threading.Lock()

    def inject(
        self,
        fault: ScheduledFault,
        record: Callable[[FaultKind, str, str], None],
        later: Callable[[float, str, Callable[[], None]], None],
    ) -> None:
        """Put ``fault``'s proxies in its mode; ``later`` restores them after ``down_s``.

        Args:
            fault: One of :data:`NET_KINDS`.
            record: Logs the fault (kind, target, detail) in the run's history.
            later: Schedules a call on the run's clock (delay, label, call).
        """
        targets = self.proxies.targets(fault)
        if not targets:
            self.say(f"{fault.kind.value}: no proxy for {fault.target} (never started), skipped")
            return
        mode = _MODES[fault.kind]
        latency = float(fault.params.get("latency_ms", 0.0))
        down = float(fault.params["down_s"])
        tokens: dict[str, int] = {}
        with self._lock:
            for proxy in targets:
                if proxy.mode is not Mode.PASS:
                    proxy.set_mode(Mode.PASS)  # a new fault ends the earlier one
                proxy.set_mode(mode, latency)
                tokens[proxy.name] = self._generation.get(proxy.name, 0) + 1
                self._generation[proxy.name] = tokens[proxy.name]
        how = f"{latency:g} ms each way" if mode is Mode.LATENCY else mode.value
        names = ", ".join(p.name for p in targets)
        record(fault.kind, fault.target, f"{how} for {down} s ({names})")
        later(down, f"restore {fault.target}", lambda: self._restore(targets, tokens))

    def _restore(self, targets: list[FaultProxy], tokens: dict[str, int]) -> None:
        with self._lock:
            for proxy in targets:
                if self._generation.get(proxy.name) == tokens[proxy.name]:
                    proxy.set_mode(Mode.PASS)

    def restore_all(self) -> None:
        """Every proxy back to ``pass`` (the drain: no fault outlives the schedule)."""
        with self._lock:
            for proxy in self.proxies.host.proxies:
                self._generation[proxy.name] = self._generation.get(proxy.name, 0) + 1
                if proxy.mode is not Mode.CLOSED:
                    proxy.set_mode(Mode.PASS)


def totals(stats: dict[str, dict[str, int]]) -> dict[str, Any]:
    """Totals over every proxy of a run (for the result JSON)."""
    keys = ("accepted", "reset", "upstream_failed", "bytes_up", "bytes_down")
    return {k: sum(s.get(k, 0) for s in stats.values()) for k in keys}
