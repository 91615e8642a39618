"""The coordinator daemon's ``/metrics``: its events, the topics' state, group lag.

:class:`DaemonMetrics` owns a registry with

* the events of the daemon, its controller, sweeper and relay, through
  :class:`~coordinator.kernel.prometheus.PrometheusHooks` (leadership, ZooKeeper session
  state, epochs published and sealed, barrier durations, trims, relay rounds), and
* :class:`StateCollector`, read at each scrape: every adopted topic's epoch, active
  partitions, epochs held (what history compaction left) and pending barrier (its age
  and the producers it still waits for), and, while this daemon leads, the lag of
  every interested group per partition (``ordered_consumergroup_lag``,
  kafka_exporter's ``kafka_consumergroup_lag``), read in the background at most every
  :data:`LAG_TTL_S` (a scrape serves the last reading).

It serves them over HTTP (:mod:`coordinator.metrics.server`: ``/metrics``, and
``/healthz`` from the daemon's supervised loops, whose last progress and health are
also gauges here), by default on loopback (:data:`DEFAULT_METRICS_ADDRESS`); the address
is bound when it is opened, so a port in use is an error at start.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from typing import Final

from prometheus_client import CollectorRegistry
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from coordinator.groups.interest import InterestSettings, topic_interest
from coordinator.kernel.errors import ConfigError, OrderedError
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.prometheus import PrometheusHooks
from coordinator.kernel.store import LayoutStore
from coordinator.metrics.server import HealthSource, MetricsServer

__all__ = [
    "DEFAULT_METRICS_ADDRESS",
    "LAG_TTL_S",
    "DaemonMetrics",
    "StateCollector",
    "open_metrics",
    "parse_metrics_address",
]

_log = logging.getLogger(__name__)

DEFAULT_METRICS_ADDRESS: Final = "127.0.0.1:9465"
"""Where ``ordered coordinator`` serves ``/metrics`` unless told otherwise."""

LAG_TTL_S: Final = 5.0
"""A lag reading older than this is read again, in the background (it asks Kafka about
every group): a scrape serves the last reading and never waits for Kafka, whose answer
grows with the cluster's groups (seconds with 1,500 of them, past a scraper's timeout)."""

_OFF: Final = frozenset({"off", "none", "no", "false", "0", ""})


def parse_metrics_address(text: str) -> tuple[str, int] | None:
    """Parse ``--metrics-address``: ``HOST:PORT`` (port 0: any free port), or ``off``.

    Raises:
        ConfigError: Not ``off`` nor ``HOST:PORT`` with a port 0-65535.
    """
    value = text.strip()
    if value.lower() in _OFF:
        return None
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")  # an IPv6 literal in brackets
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise ConfigError(
            f"--metrics-address: expected HOST:PORT (port 0 for any free port) or off, got {text!r}"
        )
    return host, int(port)


class _Disconnected(Exception):
    """The ZooKeeper session is not connected: no state is read this scrape."""


class StateCollector(Collector):
    """Scrape-time gauges read from ZooKeeper (every daemon) and Kafka (the leader).

    Args:
        store: The layout store.
        admin: Kafka admin helpers.
        leading: Whether this daemon leads now (only the leader reports lag, so each
            partition's lag has one series however many daemons run).
        interest: Which groups count as interested.
    """

    def __init__(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        leading: Callable[[], bool],
        interest: InterestSettings | None = None,
    ) -> None:
        self._store = store
        self._admin = admin
        self._leading = leading
        self._interest = interest or InterestSettings()
        self._errors = 0
        self._lag: list[tuple[str, str, int, int, int]] = []  # group, topic, p, offset, lag
        self._lag_at = -LAG_TTL_S
        self._lag_reader: threading.Thread | None = None
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        """Read the state now (called by the registry at each scrape)."""
        with self._lock:  # two scrapes at once would ask Kafka twice
            yield from self._collect()

    def _collect(self) -> Iterator[Metric]:
        epoch = GaugeMetricFamily(
            "ordered_coordinator_topic_epoch",
            "Newest epoch of the adopted topic (pending or sealed).",
            labels=["topic"],
        )
        active = GaugeMetricFamily(
            "ordered_coordinator_topic_active_partitions",
            "Active partitions of the adopted topic's newest layout.",
            labels=["topic"],
        )
        pending = GaugeMetricFamily(
            "ordered_coordinator_pending_barriers",
            "Epochs published and not yet sealed, over every adopted topic.",
        )
        age = GaugeMetricFamily(
            "ordered_coordinator_pending_barrier_age_seconds",
            "Seconds since the topic's pending epoch was published.",
            labels=["topic"],
        )
        waiting = GaugeMetricFamily(
            "ordered_coordinator_barrier_waiting_producers",
            "Producers listed in the topic's pending epoch that have not acked it.",
            labels=["topic"],
        )
        history = GaugeMetricFamily(
            "ordered_coordinator_topic_history_epochs",
            "Epochs of the adopted topic's layout history held in ZooKeeper.",
            labels=["topic"],
        )
        topics: list[str] = []
        count = 0
        try:
            if not self._store.client.connected:
                # A read would wait out the daemon's long retries: the session gauge
                # already says why the state is missing.
                raise _Disconnected()
            topics = self._store.list_topics()
            now = time.time()
            for topic in topics:
                record = self._store.get_topic(topic)
                if record is None:
                    continue
                epoch.add_metric([topic], record.epoch)
                active.add_metric([topic], record.active)
                history.add_metric([topic], len(self._store.epoch_numbers(topic)))
                if record.pending is None:
                    continue
                count += 1
                info = self._store.get_epoch(topic, record.pending)
                age.add_metric([topic], max(0.0, now - info.created_at))
                acked = set(self._store.acks(topic, record.pending))
                waiting.add_metric([topic], len(set(info.producers) - acked))
        except _Disconnected:
            pass
        except Exception as exc:  # ZooKeeper failed: the scrape still answers
            self._failed("topic state", exc)
        pending.add_metric([], count)
        yield from (epoch, active, history, pending, age, waiting)
        yield from self._lag_families(topics)
        yield CounterMetricFamily(
            "ordered_coordinator_collect_errors",
            "Scrapes that could not read part of the state (ZooKeeper or Kafka failed).",
            value=self._errors,
        )

    def _lag_families(self, topics: list[str]) -> Iterator[Metric]:
        lag = GaugeMetricFamily(
            "ordered_consumergroup_lag",
            "Records of the partition the interested group has not committed yet.",
            labels=["group", "topic", "partition"],
        )
        offset = GaugeMetricFamily(
            "ordered_consumergroup_current_offset",
            "The interested group's committed offset of the partition.",
            labels=["group", "topic", "partition"],
        )
        if self._leading():
            self._refresh_lag(topics)
            for group, topic, partition, committed, behind in self._lag:
                labels = [group, topic, str(partition)]
                lag.add_metric(labels, behind)
                offset.add_metric(labels, committed)
        yield from (lag, offset)

    def _refresh_lag(self, topics: list[str]) -> None:
        """Start one background reading of the lag when the last is older than the TTL."""
        reader = self._lag_reader
        if reader is not None and reader.is_alive():
            return
        if time.monotonic() - self._lag_at < LAG_TTL_S:
            return

        def read() -> None:
            reading = self._read_lag(topics)
            # One assignment: a scrape reads either the old list or the new one.
            self._lag, self._lag_at = reading, time.monotonic()

        self._lag_reader = threading.Thread(target=read, name="metrics-lag", daemon=True)
        self._lag_reader.start()

    def _read_lag(self, topics: list[str]) -> list[tuple[str, str, int, int, int]]:
        out: list[tuple[str, str, int, int, int]] = []
        try:
            listed = self._admin.list_groups()
            for topic in topics:
                partitions = range(self._admin.partition_count(topic))
                interest = topic_interest(
                    self._store, self._admin, topic, partitions, self._interest, listed=listed
                )
                ends = self._admin.end_offsets(topic, partitions)
                for hold in interest.groups:
                    for partition, committed in sorted(hold.committed.items()):
                        behind = max(0, ends.get(partition, committed) - committed)
                        out.append((hold.group, topic, partition, committed, behind))
        except Exception as exc:
            self._failed("group lag", exc)
        return out

    def _failed(self, what: str, exc: BaseException) -> None:
        self._errors += 1
        _log.warning("metrics: cannot read the %s: %s", what, exc)


class DaemonMetrics:
    """The daemon's registry, served over HTTP from the moment it is made.

    Args:
        address: ``(host, port)`` to bind (port 0: any free port).
        registry: The registry (default: a new one, so nothing else leaks in).

    Attributes:
        hooks: The :class:`PrometheusHooks` to give the daemon (its events).
        address: The bound ``(host, port)``.

    Raises:
        OSError: The address cannot be bound (in use, not local, ...).
    """

    def __init__(self, address: tuple[str, int], registry: CollectorRegistry | None = None) -> None:
        self.registry = registry if registry is not None else CollectorRegistry()
        self.hooks = PrometheusHooks(self.registry)
        self._collector: StateCollector | None = None
        self._server = MetricsServer(address, self.registry)
        self.address: tuple[str, int] = self._server.address
        self.registry.register(_LoopCollector(self._server))

    @property
    def url(self) -> str:
        """``http://HOST:PORT/metrics``."""
        host, port = self.address
        return f"http://{f'[{host}]' if ':' in host else host}:{port}/metrics"

    @property
    def health_url(self) -> str:
        """``http://HOST:PORT/healthz``."""
        return self.url.rsplit("/", 1)[0] + "/healthz"

    def attach(
        self,
        store: LayoutStore,
        admin: KafkaAdmin,
        leading: Callable[[], bool],
        interest: InterestSettings | None = None,
        health: HealthSource | None = None,
    ) -> None:
        """Add the scrape-time state of ``store`` (once), and what ``/healthz`` reports."""
        if health is not None:
            self._server.health = health
        if self._collector is None:
            self._collector = StateCollector(store, admin, leading, interest)
            self.registry.register(self._collector)

    def close(self) -> None:
        """Stop serving (idempotent)."""
        self._server.close()


class _LoopCollector(Collector):
    """Scrape-time gauges of the supervised loops: healthy, and their last progress."""

    def __init__(self, server: MetricsServer) -> None:
        self._server = server

    def collect(self) -> Iterator[Metric]:
        """Read every loop's health now."""
        healthy = GaugeMetricFamily(
            "ordered_thread_healthy",
            "1 while the supervised loop is alive and progressing, 0 when failing, stuck "
            "or dead (what /healthz reports).",
            labels=["thread"],
        )
        progress = GaugeMetricFamily(
            "ordered_thread_last_progress_timestamp_seconds",
            "Unix time of the supervised loop's last progress (its last round).",
            labels=["thread"],
        )
        for health in self._server.health():
            healthy.add_metric([health.name], 1 if health.healthy else 0)
            progress.add_metric([health.name], health.last_progress)
        yield from (healthy, progress)


def open_metrics(text: str | None, progress: Callable[[str], None]) -> DaemonMetrics | None:
    """Serve the daemon's metrics as ``--metrics-address`` says; report where.

    Args:
        text: The option's value; ``None`` (not given) means
            :data:`DEFAULT_METRICS_ADDRESS`, on a best-effort basis: if that port is
            taken (say, by another daemon on this host) the daemon runs without
            ``/metrics`` and says so. An address given explicitly must be bound.
        progress: Called with one line (where the metrics are, or why they are not).

    Returns:
        The served metrics, or ``None`` (``off``, or the default address was taken).

    Raises:
        ConfigError: A malformed address.
        OrderedError: An explicit address cannot be bound.
    """
    explicit = text is not None
    address = parse_metrics_address(text if text is not None else DEFAULT_METRICS_ADDRESS)
    if address is None:
        return None
    where = f"{address[0]}:{address[1]}"
    try:
        metrics = DaemonMetrics(address)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        if explicit:
            raise OrderedError(f"cannot serve metrics on {where}: {reason}") from None
        progress(
            f"metrics: cannot serve on {where} ({reason}); running without /metrics "
            "(--metrics-address HOST:PORT chooses another address, port 0 any free port)"
        )
        return None
    progress(f"metrics: serving {metrics.url}")
    return metrics
