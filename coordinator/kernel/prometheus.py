"""Prometheus metrics as one implementation of the hooks (:mod:`coordinator.kernel.hooks`).

:class:`PrometheusHooks` receives the events of the consumer, the producer, the
controller and the daemon and keeps them as ``prometheus_client`` metrics in one
registry, which the application serves (``start_http_server``) or the coordinator
daemon serves on ``/metrics`` (:mod:`coordinator.metrics.daemon_metrics`). Names follow
Prometheus' conventions: an ``ordered_`` prefix, base units, ``_total`` for counters,
``_seconds`` for durations; labels ``group``, ``topic`` and ``partition``. Every metric,
its type, labels and meaning: ``docs/metrics.md``.

One instance per registry (``prometheus_client`` refuses a metric name twice in one
registry); share it between every client of the process::

    metrics = PrometheusHooks(registry)
    OrderedConsumer({..., "ordered.hooks": [metrics]})
"""

from __future__ import annotations

from typing import Final

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

__all__ = [
    "ACK_BUCKETS",
    "BARRIER_BUCKETS",
    "GATE_WAIT_BUCKETS",
    "SESSION_STATES",
    "PrometheusHooks",
]

GATE_WAIT_BUCKETS: Final = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
"""Buckets (seconds) of ``ordered_consumer_gate_wait_seconds``."""

ACK_BUCKETS: Final = (0.001, 0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 60.0)
"""Buckets (seconds) of ``ordered_producer_barrier_ack_seconds``."""

BARRIER_BUCKETS: Final = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 600.0)
"""Buckets (seconds) of ``ordered_coordinator_barrier_seconds``."""

SESSION_STATES: Final = ("connected", "suspended", "lost")
"""The values of the ``state`` label of ``ordered_coordinator_zookeeper_session_state``."""


class PrometheusHooks:
    """Every event of :mod:`coordinator.kernel.hooks` as a Prometheus metric.

    Args:
        registry: Where the metrics are registered (default: ``prometheus_client``'s
            global ``REGISTRY``).
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        reg = REGISTRY if registry is None else registry
        self.registry = reg
        gt = ("group", "topic")
        gtp = ("group", "topic", "partition")
        # --- consumer
        self.consumer_epoch = Gauge(
            "ordered_consumer_epoch",
            "Newest layout epoch of the topic that the consumer knows.",
            gt,
            registry=reg,
        )
        self.layout_reloads = Counter(
            "ordered_consumer_layout_reloads_total",
            "Layout histories read from ZooKeeper.",
            gt,
            registry=reg,
        )
        self.blocked_partitions = Gauge(
            "ordered_consumer_blocked_partitions",
            "Assigned partitions held at a closed gate now.",
            gt,
            registry=reg,
        )
        self.gate_blocks = Counter(
            "ordered_consumer_gate_blocks_total",
            "Times a partition stopped at a closed gate.",
            gtp,
            registry=reg,
        )
        self.gate_checks = Counter(
            "ordered_consumer_gate_checks_total",
            "Gate evaluations against the group's committed offsets.",
            gt,
            registry=reg,
        )
        self.gate_wait = Histogram(
            "ordered_consumer_gate_wait_seconds",
            "How long a partition was held at a closed gate before it opened.",
            gt,
            registry=reg,
            buckets=GATE_WAIT_BUCKETS,
        )
        self.announcements = Counter(
            "ordered_consumer_announcements_total",
            "Boundary announcements committed (after on_partition_key_maybe_revoked).",
            gtp,
            registry=reg,
        )
        self.violations = Counter(
            "ordered_consumer_violations_total",
            "Records found to contradict the layout.",
            gtp,
            registry=reg,
        )
        self.tombstone_copies_dropped = Counter(
            "ordered_consumer_tombstone_copies_dropped_total",
            "Tombstone copies of a compacted topic passed over (never delivered).",
            gtp,
            registry=reg,
        )
        # --- producer
        self.route_switches = Counter(
            "ordered_producer_route_switches_total",
            "Times the producer started routing a topic by a newer epoch.",
            ("topic",),
            registry=reg,
        )
        self.ack_latency = Histogram(
            "ordered_producer_barrier_ack_seconds",
            "From first seeing an epoch pending to writing its ack.",
            ("topic",),
            registry=reg,
            buckets=ACK_BUCKETS,
        )
        self.tombstone_copies_sent = Counter(
            "ordered_producer_tombstone_copies_total",
            "Tombstone copies written for a compacted topic.",
            ("topic",),
            registry=reg,
        )
        # --- controller and daemon
        self.published = Counter(
            "ordered_coordinator_epochs_published_total",
            "Epochs published (expansions and shrinks started).",
            ("topic",),
            registry=reg,
        )
        self.sealed = Counter(
            "ordered_coordinator_epochs_sealed_total",
            "Epochs sealed (expansions and shrinks completed).",
            ("topic",),
            registry=reg,
        )
        self.barrier = Histogram(
            "ordered_coordinator_barrier_seconds",
            "From an epoch's publication until every listed producer acked or expired.",
            ("topic",),
            registry=reg,
            buckets=BARRIER_BUCKETS,
        )
        self.trims = Counter(
            "ordered_coordinator_trims_total",
            "Partitions trimmed by the sweep (reason: drained or retention).",
            ("topic", "partition", "reason"),
            registry=reg,
        )
        self.trim_failures = Counter(
            "ordered_coordinator_trim_failures_total",
            "Sweep trims that Kafka refused or did not complete in time.",
            ("topic", "partition"),
            registry=reg,
        )
        self.relay_round = Histogram(
            "ordered_coordinator_relay_round_seconds",
            "Duration of one position-relay round (interest, committed offsets, publish).",
            registry=reg,
        )
        self.relayed = Counter(
            "ordered_coordinator_relayed_positions_total",
            "Progress records the position relay published.",
            registry=reg,
        )
        self.session_state = Gauge(
            "ordered_coordinator_zookeeper_session_state",
            "1 for the ZooKeeper session's current state, 0 for the others.",
            ("state",),
            registry=reg,
        )
        self.autoscale_decisions = Counter(
            "ordered_coordinator_autoscale_decisions_total",
            "Autoscaler decisions (action: grow, shrink or hold; acted: the layout changed).",
            ("topic", "action", "acted"),
            registry=reg,
        )
        self.autoscale_rate = Gauge(
            "ordered_coordinator_autoscale_rate_per_partition",
            "Write rate per active partition over the up-window, as the autoscaler saw it "
            "(records or bytes per second, as the policy's target).",
            ("topic",),
            registry=reg,
        )
        self.autoscale_lag = Gauge(
            "ordered_coordinator_autoscale_consumer_lag_per_partition",
            "The largest consumer lag of the topic's interested groups divided by its active "
            "count, as the autoscaler last read it (records; topics with a max lag only).",
            ("topic",),
            registry=reg,
        )
        self.autoscale_target = Gauge(
            "ordered_coordinator_autoscale_target_partitions",
            "The active partition count the autoscaler's latest decision asked for.",
            ("topic",),
            registry=reg,
        )
        self.leader = Gauge(
            "ordered_coordinator_leader",
            "1 while this daemon leads, 0 while it stands by.",
            registry=reg,
        )
        # --- supervised threads (any client, the daemon)
        self.thread_restarts = Counter(
            "ordered_thread_restarts_total",
            "Times a supervised loop raised an unexpected exception and was restarted.",
            ("thread", "error"),
            registry=reg,
        )
        self.threads_running = Gauge(
            "ordered_thread_running",
            "Supervised loops of this name running now (0 while in backoff or stopped).",
            ("thread",),
            registry=reg,
        )

    # --- consumer events ---------------------------------------------------------------

    def on_layout_reload(self, group: str, topic: str, epoch: int) -> None:
        """Count the reload; the epoch gauge follows the newest epoch (``-1``: unset)."""
        self.layout_reloads.labels(group, topic).inc()
        if epoch >= 0:
            self.consumer_epoch.labels(group, topic).set(epoch)

    def on_gate_blocked(self, group: str, topic: str, partition: int, offset: int) -> None:
        """One more blocked partition."""
        self.gate_blocks.labels(group, topic, str(partition)).inc()
        self.blocked_partitions.labels(group, topic).inc()

    def on_gate_opened(self, group: str, topic: str, partition: int, wait_seconds: float) -> None:
        """One fewer blocked partition; observe the wait."""
        self.blocked_partitions.labels(group, topic).dec()
        self.gate_wait.labels(group, topic).observe(wait_seconds)

    def on_gate_dropped(self, group: str, topic: str, partition: int, wait_seconds: float) -> None:
        """One fewer blocked partition (no gate opened: no wait observed)."""
        self.blocked_partitions.labels(group, topic).dec()

    def on_gate_check(self, group: str, topic: str, partition: int) -> None:
        """Count a gate evaluation."""
        self.gate_checks.labels(group, topic).inc()

    def on_announcement(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Count a boundary commit."""
        self.announcements.labels(group, topic, str(partition)).inc()

    def on_violation(
        self, group: str, topic: str, partition: int, offset: int, problem: str
    ) -> None:
        """Count a violation."""
        self.violations.labels(group, topic, str(partition)).inc()

    def on_tombstone_copy(self, group: str, topic: str, partition: int, offset: int) -> None:
        """Count a tombstone copy passed over."""
        self.tombstone_copies_dropped.labels(group, topic, str(partition)).inc()

    # --- producer events ---------------------------------------------------------------

    def on_route_switch(self, topic: str, from_epoch: int, to_epoch: int) -> None:
        """Count a route switch."""
        self.route_switches.labels(topic).inc()

    def on_barrier_ack(self, topic: str, epoch: int, latency_seconds: float) -> None:
        """Observe the ack latency."""
        self.ack_latency.labels(topic).observe(latency_seconds)

    def on_tombstone_copy_sent(self, topic: str, partition: int) -> None:
        """Count a tombstone copy written."""
        self.tombstone_copies_sent.labels(topic).inc()

    # --- controller and daemon events --------------------------------------------------

    def on_epoch_published(self, topic: str, epoch: int, from_active: int, to_active: int) -> None:
        """Count a publication."""
        self.published.labels(topic).inc()

    def on_barrier_passed(self, topic: str, epoch: int, seconds: float) -> None:
        """Observe the barrier's duration."""
        self.barrier.labels(topic).observe(seconds)

    def on_epoch_sealed(self, topic: str, epoch: int, seconds: float) -> None:
        """Count a seal."""
        self.sealed.labels(topic).inc()

    def on_trim(self, topic: str, partition: int, offset: int, reason: str, ok: bool) -> None:
        """Count a trim, or its failure."""
        if ok:
            self.trims.labels(topic, str(partition), reason).inc()
        else:
            self.trim_failures.labels(topic, str(partition)).inc()

    def on_relay_round(self, seconds: float, published: int) -> None:
        """Observe a relay round."""
        self.relay_round.observe(seconds)
        self.relayed.inc(published)

    def on_session_state(self, state: str) -> None:
        """Mark the session's state (kazoo's thread: only sets gauges)."""
        for name in SESSION_STATES:
            self.session_state.labels(name).set(1 if name == state else 0)

    def on_leadership(self, leader: bool) -> None:
        """Mark leader (1) or standby (0)."""
        self.leader.set(1 if leader else 0)

    def on_autoscale_decision(
        self, topic: str, action: str, active: int, to: int, rate: float, acted: bool
    ) -> None:
        """Count the decision; show its rate and the count it asked for."""
        self.autoscale_decisions.labels(topic, action, "true" if acted else "false").inc()
        if rate >= 0:
            self.autoscale_rate.labels(topic).set(rate)
        self.autoscale_target.labels(topic).set(to)

    def on_autoscale_lag(self, topic: str, lag: float) -> None:
        """Show the consumer lag per active partition."""
        self.autoscale_lag.labels(topic).set(lag)

    # --- supervised threads ------------------------------------------------------------

    def on_thread_restart(self, thread: str, error: str) -> None:
        """Count a restart of a supervised loop."""
        self.thread_restarts.labels(thread, error).inc()

    def on_thread_state(self, thread: str, previous: str, state: str) -> None:
        """Count the loops running, per name."""
        if state == "running":
            self.threads_running.labels(thread).inc()
        elif previous == "running":
            self.threads_running.labels(thread).dec()
