"""The supervisor's rules (pure): backoff, counting, unhealthy after N, stuck detection."""

from __future__ import annotations

import threading

import pytest
from fakes import FakeClock

from coordinator.kernel.supervise import (
    Heartbeat,
    LoopState,
    SupervisionSettings,
    Supervisor,
    backoff_delay,
    inject_faults,
)
from coordinator.metrics.server import health_page


class Recorder:
    def __init__(self) -> None:
        self.restarts: list[tuple[str, str]] = []
        self.states: list[tuple[str, str, str]] = []

    def on_thread_restart(self, thread: str, error: str) -> None:
        self.restarts.append((thread, error))

    def on_thread_state(self, thread: str, previous: str, state: str) -> None:
        self.states.append((thread, previous, state))


FAST = SupervisionSettings(backoff_s=0.001, max_backoff_s=0.004, max_failures=3, window_s=60.0)


def test_backoff_doubles_up_to_its_cap() -> None:
    settings = SupervisionSettings(backoff_s=0.5, max_backoff_s=30.0)
    delays = [backoff_delay(settings, n) for n in range(1, 10)]
    assert delays == [0.5, 1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0, 30.0]
    assert backoff_delay(settings, 10_000) == 30.0  # no overflow however many


def test_a_raising_loop_is_restarted_counted_and_logged_with_its_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    calls: list[int] = []

    def loop(beat: Heartbeat) -> None:
        calls.append(1)
        beat.beat()
        if len(calls) < 3:
            raise OverflowError("int too big to convert")

    hooks = Recorder()
    supervisor = Supervisor("sweeper", loop, 1.0, FAST, hooks=[hooks])
    supervisor.run()
    assert len(calls) == 3  # raised twice, then returned
    assert hooks.restarts == [("sweeper", "OverflowError")] * 2
    assert supervisor.state is LoopState.STOPPED
    assert [s[1:] for s in hooks.states] == [
        ("ready", "running"),
        ("running", "backoff"),
        ("backoff", "running"),
        ("running", "backoff"),
        ("backoff", "running"),
        ("running", "stopped"),
    ]
    logged = [r for r in caplog.records if r.exc_info and "int too big" in str(r.exc_info[1])]
    assert len(logged) == 2
    health = supervisor.health()
    assert health.restarts == 2 and health.healthy  # ended by its own stop condition
    assert health.last_error == "OverflowError: int too big to convert"


def test_backoff_grows_with_failures_in_a_row_and_resets_after_progress() -> None:
    waits: list[float] = []
    settings = SupervisionSettings(backoff_s=1.0, max_backoff_s=4.0, max_failures=100)
    script = ["fail", "fail", "fail", "fail", "beat-fail", "fail", "end"]
    supervisor: Supervisor

    def loop(beat: Heartbeat) -> None:
        step = script.pop(0)
        if step == "end":
            return
        if step.startswith("beat"):
            beat.beat()
        raise RuntimeError(step)

    supervisor = Supervisor("relay", loop, 1.0, settings)

    def wait(seconds: float | None = None) -> bool:
        waits.append(float(seconds or 0.0))
        return False

    supervisor._stop.wait = wait  # type: ignore[method-assign]  # no real sleeping
    supervisor.run()
    assert waits == [1.0, 2.0, 4.0, 4.0, 1.0, 2.0]


def test_unhealthy_after_n_failures_within_the_window_and_healthy_once_they_age_out() -> None:
    clock = FakeClock()
    failures = threading.Event()
    settings = SupervisionSettings(
        backoff_s=0.001, max_backoff_s=0.001, max_failures=3, window_s=60.0
    )
    count = 0

    def loop(beat: Heartbeat) -> None:
        nonlocal count
        count += 1
        clock.now += 1.0
        if count <= 3:
            raise ValueError(f"failure {count}")
        failures.set()

    supervisor = Supervisor("autoscaler", loop, 10.0, settings, clock=clock)
    supervisor._stop.wait = lambda seconds=None: False  # type: ignore[method-assign]
    supervisor.run()
    health = supervisor.health()
    assert not health.healthy
    assert health.problem == "failing: 3 failures in the last 60 s"
    status, body = health_page([health])
    assert status == 503 and "autoscaler" in body and "ValueError: failure 3" in body
    clock.now += 57.5  # the first failure is now older than the window
    assert supervisor.health().healthy
    assert health_page([supervisor.health()]) == (200, "ok\n")


def test_two_failures_are_not_yet_unhealthy() -> None:
    count = 0

    def loop(beat: Heartbeat) -> None:
        nonlocal count
        count += 1
        if count <= 2:
            raise ValueError("x")

    supervisor = Supervisor("scanner", loop, 1.0, FAST)
    supervisor.run()
    assert supervisor.health().healthy


def test_a_loop_without_progress_is_stuck_unless_idle() -> None:
    clock = FakeClock()
    settings = SupervisionSettings(stuck_intervals=3.0, min_stuck_s=5.0)
    assert settings.stuck_after(1.0) == 5.0 and settings.stuck_after(10.0) == 30.0
    beat_now = threading.Event()
    idle_now = threading.Event()
    done = threading.Event()
    ack = threading.Event()

    def loop(beat: Heartbeat) -> None:
        while not done.is_set():
            if beat_now.wait(0.01):
                beat_now.clear()
                beat.beat()
                ack.set()
            if idle_now.is_set():
                idle_now.clear()
                beat.idle()
                ack.set()

    supervisor = Supervisor("producer-worker", loop, 1.0, settings, clock=clock)
    thread = supervisor.start()
    try:
        clock.now += 4.9
        assert supervisor.health().healthy
        clock.now += 0.2
        health = supervisor.health()
        assert not health.healthy and health.problem == "stuck: no progress for 5 s"
        beat_now.set()
        assert ack.wait(5)
        ack.clear()
        assert supervisor.health().healthy
        idle_now.set()
        assert ack.wait(5)
        clock.now += 1000.0  # waiting on purpose (a follower): never stuck
        assert supervisor.health().healthy
    finally:
        done.set()
        thread.join(5)
    assert supervisor.state is LoopState.STOPPED


def test_a_thread_killed_by_a_base_exception_is_dead() -> None:
    def loop(beat: Heartbeat) -> None:
        raise KeyboardInterrupt

    supervisor = Supervisor("relay", loop, 1.0, FAST)
    with pytest.raises(KeyboardInterrupt):
        supervisor.run()
    health = supervisor.health()
    assert not health.healthy and health.problem.startswith("dead")


def test_stop_during_backoff_ends_without_another_call() -> None:
    calls = 0
    settings = SupervisionSettings(backoff_s=30.0, max_backoff_s=30.0)

    def loop(beat: Heartbeat) -> None:
        nonlocal calls
        calls += 1
        raise RuntimeError("down")

    supervisor = Supervisor("sweeper", loop, 1.0, settings)
    thread = supervisor.start()
    for _ in range(500):
        if supervisor.state is LoopState.BACKOFF:
            break
        thread.join(0.01)
    supervisor.stop()
    thread.join(5)
    assert not thread.is_alive() and calls == 1
    assert supervisor.health().healthy  # asked to stop: not dead


def test_inject_faults_raises_at_the_named_loops_beat_only() -> None:
    seen: list[str] = []

    def fault(name: str) -> None:
        seen.append(name)
        if name == "sweeper":
            raise OverflowError("injected")

    rounds = 0

    def loop(beat: Heartbeat) -> None:
        nonlocal rounds
        rounds += 1
        beat.beat()

    with inject_faults(fault):
        Supervisor("relay", loop, 1.0, FAST).run()
        sweeper = Supervisor("sweeper", loop, 1.0, FAST)
        thread = sweeper.start()
        for _ in range(500):
            if sweeper.health().restarts >= 2:
                break
            thread.join(0.01)
        sweeper.stop()
        thread.join(5)
    assert sweeper.health().restarts >= 2
    assert "relay" in seen
    before = rounds
    Supervisor("sweeper", loop, 1.0, FAST).run()  # outside: no fault
    assert rounds == before + 1
