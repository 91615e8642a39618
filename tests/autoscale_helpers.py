"""Traffic and per-key order checks shared by the autoscaler's integration tests."""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from helpers import wait_until
from kazoo.client import KazooClient

from coordinator.daemon import CoordinatorDaemon
from coordinator.kernel.kafka_admin import KafkaAdmin
from coordinator.kernel.store.autoscale_records import AutoscalePolicy
from ordered import OrderedProducer

__all__ = ["KEYS", "KeyOrder", "Traffic", "daemon_running", "fast_policy"]

KEYS = 30


def fast_policy(topic: str, **changes: Any) -> AutoscalePolicy:
    """A records policy with windows of seconds (target 100/s, 2..8 partitions)."""
    fields: dict[str, Any] = {
        "topic": topic,
        "metric": "records",
        "target_per_s": 100.0,
        "min_active": 2,
        "max_active": 8,
        "up_window_s": 3.0,
        "down_window_s": 6.0,
        "cooldown_s": 3.0,
        "max_step_factor": 2,
        "enabled": True,
        "dry_run": False,
        "updated_at": time.time(),
    }
    fields.update(changes)
    return AutoscalePolicy(**fields)


class Traffic:
    """A producer thread writing ``k{i}`` = sequence numbers at a settable total rate."""

    def __init__(self, producer: OrderedProducer, topic: str) -> None:
        self.producer = producer
        self.topic = topic
        self.rate = 0.0
        self.noise = 0.0
        self.sent = [0] * KEYS
        self.failed = 0
        self._i = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def __enter__(self) -> Traffic:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.stop()

    def _on_delivery(self, err: Any, _msg: Any) -> None:
        if err is not None:
            self.failed += 1

    def _produce(self) -> None:
        k = self._i % KEYS
        self.producer.produce(
            self.topic, str(self.sent[k]).encode(), f"k{k}", on_delivery=self._on_delivery
        )
        self.sent[k] += 1
        self._i += 1

    def write(self, count: int) -> None:
        """Write ``count`` records at once from the caller (only while ``rate`` is 0)."""
        assert self.rate <= 0, "the thread writes while the rate is set"
        for _ in range(count):
            self._produce()
            self.producer.poll(0)
        assert self.producer.flush(30) == 0

    def _run(self) -> None:
        rng = random.Random(3)
        next_at = time.monotonic()
        while not self._stop.is_set():
            if self.rate <= 0:
                time.sleep(0.05)
                next_at = time.monotonic()
                continue
            burst = max(1, int(self.rate / 50))
            for _ in range(burst):
                self._produce()
            self.producer.poll(0)
            rate = self.rate * (1 + rng.uniform(-self.noise, self.noise))
            next_at += burst / rate
            time.sleep(max(0.0, next_at - time.monotonic()))

    def stop(self) -> None:
        """Stop writing and wait for every delivery."""
        self._stop.set()
        self._thread.join(10)
        assert self.producer.flush(30) == 0


class KeyOrder:
    """What one group has read of a :class:`Traffic`, checked record by record: each
    key's values must arrive as 0, 1, 2, ... across the group's consumers."""

    def __init__(self) -> None:
        self.seen = [-1] * KEYS
        self.got = 0

    def read(
        self,
        consumer: Any,
        total: int | None = None,
        stop: threading.Event | None = None,
        timeout: float = 90.0,
        commit: bool = False,
    ) -> None:
        """Read until ``total`` records in all or until ``stop`` is set.

        ``commit``: commit (synchronously) after every batch, so the group's lag is
        what it has not read.
        """

        def finished() -> bool:
            if (total is not None and self.got >= total) or (stop is not None and stop.is_set()):
                return True
            batch = [m for m in consumer.consume(1000, 0.5) if m.error() is None]
            for msg in batch:
                k = int(msg.key()[1:])
                value = int(msg.value())
                assert value == self.seen[k] + 1, f"key k{k}: {value} after {self.seen[k]}"
                self.seen[k] = value
                self.got += 1
            if commit and batch:
                consumer.commit(asynchronous=False)
            return False

        wait_until(finished, timeout, what=lambda: f"{total} records (read {self.got})", interval=0)

    def check_all(self, traffic: Traffic) -> None:
        """Every record the traffic wrote was read, once and in order."""
        assert self.seen == [n - 1 for n in traffic.sent]
        assert traffic.failed == 0


@contextmanager
def daemon_running(
    kazoo_factory: Callable[..., KazooClient],
    bootstrap: str,
    zk_root: str,
    hooks: tuple[object, ...] = (),
    tick: float | None = 0.5,
) -> Iterator[list[str]]:
    """A coordinator daemon ticking the autoscaler every ``tick`` s (``None``: the daemon's
    own default scan and autoscale intervals); yields its log lines."""
    lines: list[str] = []
    ticks = {} if tick is None else {"scan_interval": tick, "autoscale_interval": tick}
    daemon = CoordinatorDaemon(
        kazoo_factory(command_deadline_s=10.0),
        KafkaAdmin(bootstrap, timeout=10.0),
        root=zk_root,
        progress=lines.append,
        relay_interval=0,
        sweep_interval=0,
        hooks=hooks,
        **ticks,
    )
    runner = threading.Thread(target=daemon.run, daemon=True)
    runner.start()
    try:
        yield lines
    finally:
        daemon.stop()
        runner.join(30)
