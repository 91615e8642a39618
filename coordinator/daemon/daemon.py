"""``ordered coordinator``: the daemon that completes pending epochs and relays positions.

Several daemons may run; a kazoo ``Election`` at ``{root}/coordinator/election`` picks
one leader. The leader scans the adopted topics every ``scan_interval`` seconds and
whenever a topic record or the topic list changes, and runs
:meth:`Controller.resume` on each topic with a pending epoch, one worker thread per
topic. A scan reads the records from a :class:`~coordinator.daemon.topic_cache.TopicCache`
that watches keep current, and from ZooKeeper itself every ``check_interval`` seconds
(so an idle daemon reads nothing in between). While it leads it also runs the position
service's relay (:class:`~coordinator.relay.position_relay.PositionRelay`) in a thread of its
own, and the drain monitor and consumed-retention sweep
(:class:`~coordinator.trims.retention.Sweeper`), followed by history compaction
(:mod:`coordinator.trims.history_compaction`), every ``sweep_interval`` seconds in another,
and the autoscaler (:class:`~coordinator.autoscale.Autoscaler`) every
``autoscale_interval`` seconds in a third. A
transition that another controller runs (the topic lock is held) is left to it. The
connection listener only sets flags and logs the change (connection lost, restored,
session lost); losing the session ends the leadership at once (the election node is
gone), and the daemon contends again after reconnecting.

Every long-lived loop runs under a :class:`~coordinator.kernel.supervise.Supervisor`:
the election and scan loop (``scanner``), and while leading the ``position-relay``,
the ``sweeper`` and the ``autoscaler``. An exception a loop does not expect is logged
with its traceback, counted (``on_thread_restart``) and the loop restarts after a
backoff; :meth:`CoordinatorDaemon.health` (``/healthz``) names a loop that fails
repeatedly, is stuck or is dead. A resume worker that raises unexpectedly is logged and
counted the same way (``thread="resume"``) and retried at the next periodic scan.

Leadership states (:class:`Role`; only :meth:`CoordinatorDaemon._set_role` changes it)::

    FOLLOWER -> LEADER      the election is won
    LEADER -> FOLLOWER      the leader function returns (session lost, or stopping)
    FOLLOWER|LEADER -> STOPPED   stop requested
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from enum import Enum
from typing import Any, Final

from kazoo.client import KazooClient
from kazoo.exceptions import KazooException
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import KazooState

from coordinator.autoscale import DEFAULT_AUTOSCALE_INTERVAL_S, Autoscaler
from coordinator.control.controller import BarrierTimeoutError, Controller
from coordinator.daemon.topic_cache import TopicCache
from coordinator.kernel.errors import OrderedError, StoreError, TransitionInProgressError
from coordinator.kernel.hooks import CoordinatorEvents, ThreadEvents
from coordinator.kernel.identity import process_identity
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.kafka_retry import RetryPolicy
from coordinator.kernel.store import LayoutStore, paths
from coordinator.kernel.store.records import TopicRecord
from coordinator.kernel.supervise import Heartbeat, LoopHealth, SupervisionSettings, Supervisor
from coordinator.metrics.daemon_metrics import DaemonMetrics
from coordinator.relay.position_relay import DEFAULT_CHECK_INTERVAL_S, PositionRelay
from coordinator.trims.history_compaction import compact_all
from coordinator.trims.retention import DEFAULT_SWEEP_INTERVAL_S, Sweeper, SweepSettings

__all__ = ["CoordinatorDaemon", "Role"]

_log = logging.getLogger(__name__)

# The pauses of the election loop while ZooKeeper is away or a round fails; a round
# that ran starts them again from the shortest.
_ELECTION_RETRY: Final = RetryPolicy(max_tries=None, delay=0.5, backoff=2.0, max_delay=2.0)


class Role(Enum):
    """The daemon's role in the election.

    Attributes:
        FOLLOWER: Contending (or waiting to reconnect).
        LEADER: Elected: scanning and resuming pending epochs.
        STOPPED: Stopped; final.
    """

    FOLLOWER = "follower"
    LEADER = "leader"
    STOPPED = "stopped"


_ALLOWED: Final = {
    (Role.FOLLOWER, Role.LEADER),
    (Role.LEADER, Role.FOLLOWER),
    (Role.FOLLOWER, Role.STOPPED),
    (Role.LEADER, Role.STOPPED),
}


class CoordinatorDaemon:
    """Elect a leader among daemons; the leader completes every pending epoch.

    Args:
        client: A started kazoo client (its connection retry should be unbounded: the
            daemon outlives ZooKeeper outages).
        admin: Kafka admin helpers.
        root: The store root.
        progress: Called with one line at a time (leadership changes, resumes).
        scan_interval: Seconds between scans when no watch fires.
        resume_timeout: Seconds one resume may wait in the barrier before the next
            scan tries again.
        identifier: This daemon's name in the election (default ``host:pid``).
        relay_interval: Seconds between position relay rounds; ``0`` turns the relay
            off.
        sweep_interval: Seconds between rounds of the drain monitor and consumed-
            retention sweep (:class:`~coordinator.trims.retention.Sweeper`); ``0`` turns it off.
        sweep_settings: Which groups count and how long a trim may wait.
        autoscale_interval: Seconds between autoscaler ticks (topics with an
            ``ordered autoscale`` policy); ``0`` turns the autoscaler off.
        hooks: Objects that receive the daemon's events and those of its controller,
            sweeper and relay (:mod:`coordinator.kernel.hooks`).
        metrics: Served metrics (:mod:`coordinator.metrics.daemon_metrics`) that get the events
            and the scrape-time state; closed when :meth:`run` returns.
        check_interval: Seconds between the scans (and relay rounds) that read
            ZooKeeper directly instead of the watch-kept caches.
        supervision: How its loops are restarted and when they count as unhealthy
            (:class:`~coordinator.kernel.supervise.SupervisionSettings`).
    """

    def __init__(
        self,
        client: KazooClient,
        admin: KafkaAdmin,
        root: str = paths.DEFAULT_ROOT,
        progress: Callable[[str], None] | None = None,
        scan_interval: float = 1.0,
        resume_timeout: float = 10.0,
        identifier: str | None = None,
        relay_interval: float = 0.1,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL_S,
        sweep_settings: SweepSettings | None = None,
        autoscale_interval: float = DEFAULT_AUTOSCALE_INTERVAL_S,
        hooks: Sequence[object] = (),
        metrics: DaemonMetrics | None = None,
        check_interval: float = DEFAULT_CHECK_INTERVAL_S,
        supervision: SupervisionSettings | None = None,
    ) -> None:
        self._client = client
        self._store = LayoutStore(client, root)
        self._progress = progress or (lambda _message: None)
        self._stop = threading.Event()
        self._metrics = metrics
        if metrics is not None:
            hooks = (*hooks, metrics.hooks)
        self._events = CoordinatorEvents(hooks)
        self._hooks = tuple(hooks)
        self._thread_events = ThreadEvents(hooks)
        self._supervision = supervision or SupervisionSettings()
        self._loops: dict[str, Supervisor] = {}
        self._loops_lock = threading.Lock()
        self._controller = Controller(
            self._store, admin, self._progress, cancel=self._stop, hooks=hooks
        )
        self._scan_interval = scan_interval
        self._check_interval = check_interval
        self._resume_timeout = resume_timeout
        self._identifier = identifier or process_identity()
        self._role = Role.FOLLOWER
        self._role_lock = threading.Lock()
        self._lost = threading.Event()
        self._zk_state: str = KazooState.CONNECTED
        self._wake = threading.Event()
        self._workers: dict[str, threading.Thread] = {}
        self._errors: dict[str, str] = {}
        # The last failure of each topic's resume: a topic that fails the same way every
        # scan (say, a layout of another topic id) is reported once, not every second.
        self._failures: dict[str, str] = {}
        self._election: Any = None
        self._relay = (
            PositionRelay(
                client,
                admin,
                root,
                relay_interval,
                self._progress,
                hooks=hooks,
                check_interval=check_interval,
                supervision=supervision,
            )
            if relay_interval > 0
            else None
        )
        self._sweep_interval = sweep_interval
        self._admin = admin
        self._sweeper = (
            Sweeper(self._store, admin, sweep_settings, self._progress, hooks=hooks)
            if sweep_interval > 0
            else None
        )
        self._autoscale_interval = autoscale_interval
        self._autoscaler = (
            Autoscaler(
                self._store,
                admin,
                self._controller,
                self._identifier,
                self._progress,
                events=self._events,
                transition_timeout=resume_timeout,
                interest=sweep_settings.interest if sweep_settings is not None else None,
            )
            if autoscale_interval > 0
            else None
        )
        if metrics is not None:
            interest = sweep_settings.interest if sweep_settings is not None else None
            metrics.attach(
                self._store, admin, lambda: self._role is Role.LEADER, interest, self.health
            )

    def health(self) -> list[LoopHealth]:
        """The health of every loop running now (``/healthz``), by name."""
        with self._loops_lock:
            loops = list(self._loops.values())
        tail = self._relay.tail if self._relay is not None else None
        if tail is not None and "position-relay" in {loop.name for loop in loops}:
            loops.append(tail)
        return [loop.health() for loop in sorted(loops, key=lambda s: s.name)]

    def _supervisor(
        self, name: str, loop: Callable[[Heartbeat], None], interval: float
    ) -> Supervisor:
        """A supervisor for ``loop``, listed in :meth:`health` until :meth:`_forget`."""
        supervisor = Supervisor(name, loop, interval, self._supervision, hooks=self._hooks)
        with self._loops_lock:
            self._loops[name] = supervisor
        return supervisor

    def _forget(self, supervisor: Supervisor) -> None:
        with self._loops_lock:
            if self._loops.get(supervisor.name) is supervisor:
                del self._loops[supervisor.name]

    @property
    def role(self) -> Role:
        """The current role."""
        return self._role

    @property
    def identifier(self) -> str:
        """This daemon's name in the election."""
        return self._identifier

    def _set_role(self, role: Role) -> None:
        """The one place the role changes; rejects transitions not listed above."""
        with self._role_lock:
            if role is self._role:
                return
            if (self._role, role) not in _ALLOWED:
                raise AssertionError(f"role {self._role.value} -> {role.value} is not allowed")
            self._role = role
        self._events.leadership(role is Role.LEADER)
        self._progress(f"coordinator {self._identifier}: {role.value}")

    def _on_state(self, state: str) -> None:
        # Runs on kazoo's thread: set flags (and gauges) and print one line, never a
        # ZooKeeper call.
        self._events.session_state(str(state).lower())
        if state == KazooState.LOST:
            self._lost.set()
            self._wake.set()
        if state == self._zk_state or self._stop.is_set():
            self._zk_state = state
            return
        if state == KazooState.SUSPENDED:
            self._progress(
                f"coordinator {self._identifier}: ZooKeeper connection lost; reconnecting "
                "(leadership holds while the session lives)"
            )
        elif state == KazooState.LOST:
            self._progress(
                f"coordinator {self._identifier}: ZooKeeper session lost: leadership given "
                "up; contending again once ZooKeeper is back"
            )
        elif state == KazooState.CONNECTED:
            self._progress(f"coordinator {self._identifier}: ZooKeeper connection restored")
        self._zk_state = state

    def stop(self) -> None:
        """Ask the daemon to stop (safe from a signal handler or any thread)."""
        self._stop.set()
        self._wake.set()
        with self._loops_lock:
            loops = list(self._loops.values())
        for loop in loops:
            loop.stop()  # no restart after this (a loop in its backoff ends now)
        election = self._election
        if election is not None:
            election.cancel()

    def run(self) -> None:
        """Contend, lead when elected, until :meth:`stop`; then clean up and return."""
        self._client.add_listener(self._on_state)
        self._events.session_state("connected" if self._client.connected else "suspended")
        self._events.leadership(False)
        scanner = self._supervisor("scanner", self._contend, self._scan_interval)
        try:
            if not self._stop.is_set():
                scanner.run()  # here, in the caller's thread
        finally:
            self._forget(scanner)
            self._client.remove_listener(self._on_state)
            self._join_workers()
            self._set_role(Role.STOPPED)
            if self._metrics is not None:
                self._metrics.close()

    def _contend(self, beat: Heartbeat) -> None:
        """The election loop (supervised as ``scanner``): contend, lead, contend again."""
        pauses = _ELECTION_RETRY.pauses()
        while not self._stop.is_set():
            # Waiting for ZooKeeper or for the leader to go is not a stuck loop.
            beat.idle()
            if not self._client.connected:
                self._stop.wait(next(pauses))
                continue
            self._lost.clear()
            self._election = self._client.Election(
                paths.election_path(self._store.root), self._identifier
            )
            try:
                self._election.run(self._lead, beat)
                pauses = _ELECTION_RETRY.pauses()
            except (KazooException, KazooTimeoutError) as exc:
                _log.warning("election round ended: %r", exc)
                self._stop.wait(next(pauses))
            finally:
                if self._role is Role.LEADER:
                    self._set_role(Role.FOLLOWER)

    def _lead(self, beat: Heartbeat) -> None:
        if self._stop.is_set() or self._lost.is_set():
            return
        self._set_role(Role.LEADER)
        led = threading.Event()
        loops: list[Supervisor] = []
        relay = self._relay
        if relay is not None:
            loops.append(
                self._supervisor(
                    "position-relay",
                    lambda relay_beat: self._relay_loop(relay, led, relay_beat),
                    max(self._check_interval, 1.0),
                )
            )
        if self._sweeper is not None:
            loops.append(
                self._supervisor(
                    "sweeper",
                    lambda sweep_beat: self._sweep_loop(led, sweep_beat),
                    self._sweep_interval,
                )
            )
        cache = TopicCache(self._store, self._wake.set)
        if self._autoscaler is not None:
            loops.append(
                self._supervisor(
                    "autoscaler",
                    lambda scale_beat: self._autoscale_loop(led, cache, scale_beat),
                    self._autoscale_interval,
                )
            )
        for loop in loops:
            if not self._stop.is_set():
                loop.start()
        try:
            cache.start()
            next_check = 0.0
            while not self._stop.is_set() and not self._lost.is_set():
                beat.beat()
                self._wake.clear()
                try:
                    if time.monotonic() >= next_check:
                        next_check = time.monotonic() + self._check_interval
                        self._scan(cache.check())
                    else:
                        cache.refresh()
                        self._scan(cache.topics())
                except OrderedError as exc:
                    self._progress(f"scan failed: {exc}")
                except (KazooException, KazooTimeoutError) as exc:
                    self._progress(f"scan failed: ZooKeeper: {exc!r}")
                self._wake.wait(self._scan_interval)
        finally:
            cache.stop()
            for loop in loops:
                loop.stop()  # no restart after the term
            led.set()
            if relay is not None:
                relay.wake()
            for loop in loops:
                loop.join()
                self._forget(loop)
            if self._autoscaler is not None:
                self._autoscaler.close()
            # A worker still in a barrier stops within a second (cancel or session loss);
            # waiting here keeps two leaders from resuming the same topic.
            if self._stop.is_set() or self._lost.is_set():
                self._join_workers()

    def _relay_loop(self, relay: PositionRelay, led: threading.Event, beat: Heartbeat) -> None:
        """Run the position relay while this daemon leads (supervised)."""
        me = threading.get_ident()

        def stop() -> bool:
            # The relay asks this once per round on its own thread (progress), and its
            # commit tail asks it too, from another thread (not the relay's progress).
            if threading.get_ident() == me:
                beat.beat()
            return led.is_set() or self._stop.is_set() or self._lost.is_set()

        relay.run(stop, led)

    def _sweep_loop(self, led: threading.Event, beat: Heartbeat) -> None:
        """Run the sweeper every ``sweep_interval`` seconds while this daemon leads."""
        assert self._sweeper is not None
        while not (led.is_set() or self._stop.is_set() or self._lost.is_set()):
            beat.beat()
            try:
                self._sweeper.sweep()
                # Trims and consumed retention just moved log starts: epochs whose
                # boundaries they passed can go.
                compact_all(self._store, self._admin, self._progress)
            except OrderedError as exc:
                self._progress(f"sweep failed: {exc}")
            except (KazooException, KazooTimeoutError) as exc:
                self._progress(f"sweep failed: ZooKeeper: {exc!r}")
            led.wait(self._sweep_interval)

    def _autoscale_loop(self, led: threading.Event, cache: TopicCache, beat: Heartbeat) -> None:
        """Run the autoscaler every ``autoscale_interval`` seconds while this daemon leads.

        It looks at the topics the cache knows to have a policy node (no read of every
        topic's policy each tick). Its sampling consumer is closed when the term ends.
        """
        assert self._autoscaler is not None
        while not (led.is_set() or self._stop.is_set() or self._lost.is_set()):
            beat.beat()
            try:
                self._autoscaler.tick(topics=cache.with_child(paths.AUTOSCALE_NODE))
            except OrderedError as exc:
                self._progress(f"autoscale failed: {exc}")
            except (KazooException, KazooTimeoutError) as exc:
                self._progress(f"autoscale failed: ZooKeeper: {exc!r}")
            led.wait(self._autoscale_interval)

    def _scan(self, records: dict[str, TopicRecord | StoreError]) -> None:
        for topic, record in records.items():
            if isinstance(record, StoreError):
                # One bad record must not stop the others from completing.
                if self._errors.get(topic) != str(record):
                    self._progress(f"skipping {topic}: {record}")
                self._errors[topic] = str(record)
                continue
            self._errors.pop(topic, None)
            if record.pending is None:
                continue
            worker = self._workers.get(topic)
            if worker is not None and worker.is_alive():
                continue
            worker = threading.Thread(
                target=self._resume, args=(topic,), name=f"resume-{topic}", daemon=True
            )
            self._workers[topic] = worker
            worker.start()

    def _resume(self, topic: str) -> None:
        started = time.monotonic()
        failed = False
        try:
            result = self._controller.resume(topic, timeout=self._resume_timeout)
        except TransitionInProgressError as exc:
            # Another controller runs it: its seal wakes the scan (a watch). Rescanning
            # at once would only meet its lock again, many times a second, and log each.
            failed = True
            message = str(exc)
            if self._failures.get(topic) != message:
                _log.info("%s", message)
            self._failures[topic] = message
            return
        except BarrierTimeoutError as exc:
            self._progress(str(exc))
            return
        except OrderedError as exc:
            # Retried at the next periodic scan, not at once: a failure that repeats
            # (a layout of another topic id, a deleted topic) must not spin.
            failed = True
            message = f"resume of {topic} failed: {exc}"
            if self._failures.get(topic) != message:
                self._progress(message)
            self._failures[topic] = message
            return
        except (KazooException, KazooTimeoutError) as exc:
            self._progress(f"resume of {topic} failed: ZooKeeper: {exc!r}")
            return
        except Exception as exc:
            # A bug, not a state of the world: logged with its traceback and counted;
            # the next periodic scan starts a new worker (not at once: it may repeat).
            failed = True
            message = f"resume of {topic}: unexpected error {exc!r}"
            if self._failures.get(topic) != message:  # the same bug every scan: once
                _log.exception("%s; retried at the next scan", message)
            self._failures[topic] = message
            self._thread_events.thread_restart("resume", type(exc).__name__)
            return
        finally:
            if not failed:
                # Rescan soon: the epoch may be sealed, or need another round.
                self._wake.set()
        self._failures.pop(topic, None)
        if result is not None:
            # The epoch's age (from its publish), not only this resume's share of it.
            age = self._epoch_age(topic, result.epoch)
            self._progress(
                f"sealed epoch {result.epoch} of {topic} ({result.from_active} -> "
                f"{result.to_active})"
                + (f" {age:.2f} s after its publish" if age is not None else "")
                + f"; this resume took {time.monotonic() - started:.2f} s"
            )

    def _epoch_age(self, topic: str, epoch: int) -> float | None:
        """Seconds from the epoch's publish to its seal, ``None`` if unreadable."""
        try:
            record = self._store.find_epoch(topic, epoch)
        except (OrderedError, KazooException, KazooTimeoutError):
            return None
        if record is None or record.sealed_at is None:
            return None
        return record.sealed_at - record.created_at

    def _join_workers(self) -> None:
        for worker in list(self._workers.values()):
            worker.join()
        self._workers.clear()
