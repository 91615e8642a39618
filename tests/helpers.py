"""Test helpers: real-server utilities shared by the integration tests.

Nothing here fakes a server: topics are created in the real Kafka, sessions are
expired in the real ZooKeeper, processes are killed with real signals.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import signal
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import AdminClient, NewTopic

__all__ = [
    "closed_port",
    "consume_until",
    "create_topic",
    "kill_process",
    "load_script",
    "run_cli",
    "transient_error",
    "unique",
    "wait_held",
    "wait_until",
]

T = TypeVar("T")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def unique(prefix: str) -> str:
    """Return ``prefix`` with a short uuid suffix, for topic, group and ZooKeeper names."""
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 30.0,
    *,
    what: str | Callable[[], str] = "",
    interval: float = 0.05,
) -> T:
    """Call ``predicate`` until it returns a truthy value, and return that value.

    Fails with an ``AssertionError`` naming ``what`` was awaited, for how long, and the
    last value the predicate returned; ``what`` may be a function, called at the failure,
    to describe the progress made (``lambda: f"{len(got)} of {count}"``). An exception
    the predicate raises is not retried: it propagates at once (a wait must not hide a
    failure). ``interval``: the pause between calls.
    """
    started = time.monotonic()
    deadline = started + timeout
    while True:
        value = predicate()
        if value:
            return value
        now = time.monotonic()
        if now >= deadline:
            awaited = what() if callable(what) else what
            raise AssertionError(
                f"timed out after {now - started:.1f} s (timeout {timeout} s) waiting for "
                f"{awaited or getattr(predicate, '__name__', repr(predicate))}; "
                f"last value: {value!r}"
            )
        time.sleep(min(interval, max(0.0, deadline - now)))


# Errors librdkafka reports as events while a fresh group's coordinator loads; it
# retries by itself, and a plain consumer sees the same events.
_TRANSIENT_EVENTS = frozenset(
    {
        KafkaError.NOT_COORDINATOR,
        KafkaError.COORDINATOR_LOAD_IN_PROGRESS,
        KafkaError.COORDINATOR_NOT_AVAILABLE,
    }
)


def transient_error(message: Any) -> bool:
    """Whether ``message`` is an error event of a loading group coordinator."""
    error = message.error()
    return error is not None and error.code() in _TRANSIENT_EVENTS


def create_topic(
    bootstrap: str,
    name: str,
    partitions: int,
    replication: int = 1,
    config: dict[str, str] | None = None,
    security: dict[str, str] | None = None,
) -> str:
    """Create ``name`` in Kafka and wait until its metadata lists every partition.

    ``security``: librdkafka SASL/SSL settings (the secure cluster's admin).
    """
    admin = AdminClient({"bootstrap.servers": bootstrap, **(security or {})})
    futures = admin.create_topics(
        [NewTopic(name, partitions, replication, config=config or {})], operation_timeout=30
    )
    futures[name].result(timeout=60)
    wait_until(
        lambda: (
            len(admin.list_topics(name, timeout=5).topics[name].partitions) == partitions
            and admin.list_topics(name, timeout=5).topics[name].error is None
        ),
        what=f"topic {name} metadata",
    )
    return name


def kill_process(pid: int, sig: int = signal.SIGKILL) -> None:
    """Send ``sig`` (SIGKILL by default) to ``pid`` and reap it if it is our child."""
    try:
        os.kill(pid, sig)
    except ProcessLookupError:
        return
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, 0)


def run_cli(*args: str, env: dict[str, str] | None = None, timeout: float = 180) -> Any:
    """Run the ``ordered`` CLI in a subprocess; return the CompletedProcess (text)."""
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    return subprocess.run(
        [sys.executable, "-m", "ordered.cli", *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
        check=False,
    )


def keys_for(layout: Any, partition: int, count: int, prefix: str = "k") -> list[str]:
    """``count`` distinct keys that ``layout`` (a ``Layout``) routes to ``partition``."""
    out: list[str] = []
    i = 0
    while len(out) < count:
        key = f"{prefix}{i}"
        if layout.partition_for(key) == partition:
            out.append(key)
        i += 1
    return out


def moving_keys(count: int) -> list[str]:
    """``count`` keys of partition 0 that move to partition 2 when 2 partitions become 3."""
    from linear_hash import Layout

    before, after = Layout(2, 2, 0), Layout(2, 3, 1)
    return [k for k in keys_for(before, 0, 200) if after.partition_for(k) == 2][:count]


def drain(consumer: Any, seconds: float, until: int | None = None) -> list[Any]:
    """Consume for ``seconds`` (or until ``until`` records arrived), skipping transient events."""
    out: list[Any] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and (until is None or len(out) < until):
        for message in consumer.consume(100, 0.2):
            if transient_error(message):
                continue
            assert message.error() is None, message.error()
            out.append(message)
    return out


def wait_held(consumer: Any, timeout: float = 20.0, what: str = "the gate to close") -> None:
    """Wait until ``consumer``'s first partition is held at its gate (``BLOCKED``).

    Nothing may be delivered meanwhile: a record that passes fails the test. The first
    fetch can wait for a new group's coordinator to load, hence the wait.
    """
    from ordered.consumer import GateState

    early: list[Any] = []

    def blocked() -> bool:
        early.extend(drain(consumer, 0.3))
        return consumer.gate_status()[0].state is GateState.BLOCKED

    wait_until(blocked, timeout, what=what)
    assert early == [], [m.value() for m in early]


def commit_stored(consumer: Any) -> None:
    """Commit the stored offsets synchronously; nothing to commit is not an error.

    After a seek back, librdkafka commits a stored offset only once it passes the
    committed one, so a commit in a replay may find nothing to commit (as with a plain
    consumer).
    """
    try:
        consumer.commit(asynchronous=False)
    except KafkaException as exc:
        if exc.args[0].code() != KafkaError._NO_OFFSET:
            raise


def consume_until(
    consumer: Any,
    count: int,
    timeout: float = 60.0,
    *,
    what: str = "records",
    batch: int = 100,
    wait: float = 0.2,
    skip_errors: bool = False,
    after_batch: Callable[[list[Any]], None] | None = None,
) -> list[Any]:
    """Consume until ``count`` records arrived and return them in delivery order.

    Transient coordinator events are skipped; any other error event fails the test,
    unless ``skip_errors`` (then it is dropped). ``after_batch`` sees every non-empty
    batch (to commit, or to check it) before the next ``consume``. Fails after
    ``timeout`` seconds, saying how many of ``count`` arrived.
    """
    got: list[Any] = []

    def enough() -> bool:
        messages = [m for m in consumer.consume(batch, wait) if not transient_error(m)]
        if skip_errors:
            messages = [m for m in messages if m.error() is None]
        assert all(m.error() is None for m in messages), [m.error() for m in messages]
        if messages:
            got.extend(messages)
            if after_batch is not None:
                after_batch(messages)
        return len(got) >= count

    wait_until(enough, timeout, what=lambda: f"{count} {what} ({len(got)} arrived)", interval=0)
    return got


def read_committing(consumer: Any, count: int, timeout: float = 60.0) -> list[Any]:
    """Deliver ``count`` records, committing after each batch (as an application does)."""
    return consume_until(
        consumer,
        count,
        timeout,
        what="delivered records",
        batch=500,
        after_batch=lambda _batch: commit_stored(consumer),
    )


def load_script(name: str) -> ModuleType:
    """Load ``scripts/<name>.py`` afresh as module ``name`` (the scripts are not a
    package); it is registered in ``sys.modules`` so its dataclasses can resolve it."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module
