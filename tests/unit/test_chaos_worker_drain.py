"""The chaos worker's drain: a reader exits only after ``idle_exit`` quiet seconds.

The run continues a stopped lag group and drains it at once (SIGCONT, then SIGHUP). A
reader that counted its quiet time from its last record before the stop exited on its
first empty poll, before it had rejoined its group: every record after the stop was
then counted lost (a CI failure of ``test_chaos_zk_ensemble``).
"""

from __future__ import annotations

import os
import signal

from ordered.chaos.worker import _Flags


def test_quiet_time_counts_from_the_drain_signal_when_that_is_later() -> None:
    flags = _Flags()
    flags.drain, flags.drain_at = True, 100.0
    last_record = 10.0  # before a 90 s stop
    assert not flags.drained(last_record, 20.0, now=100.5)
    assert not flags.drained(last_record, 20.0, now=119.0)
    assert flags.drained(last_record, 20.0, now=120.5)


def test_quiet_time_counts_from_the_last_record_when_that_is_later() -> None:
    flags = _Flags()
    flags.drain, flags.drain_at = True, 100.0
    assert not flags.drained(115.0, 20.0, now=130.0)
    assert flags.drained(115.0, 20.0, now=135.5)


def test_no_drain_no_exit() -> None:
    assert not _Flags().drained(0.0, 20.0, now=1e9)


def test_sighup_sets_the_drain_time_once() -> None:
    flags = _Flags()
    previous = {
        s: signal.getsignal(s)
        for s in (signal.SIGTERM, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGINT)
    }
    try:
        flags.install()
        os.kill(os.getpid(), signal.SIGHUP)
        first = flags.drain_at
        assert flags.drain and first is not None
        os.kill(os.getpid(), signal.SIGHUP)
        assert flags.drain_at == first
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
