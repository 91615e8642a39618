"""A fleet moves from the last release to the code under test without a stop.

The fleet (a coordinator daemon, two producers and a consumer group of two readers,
each a process) starts on :data:`upgrade_helpers.RELEASE_TAG`, exported from this
repository's git history, and is rolled in the order ``docs/operations.md``
("Upgrading") gives: readers one by one, then producers, then the daemon, while
records keep flowing. Layout changes run before the roll (an expansion 2 -> 4), while
both releases serve the topic (a shrink 4 -> 3 with readers of both; an expansion over
the retired partition, 3 -> 4, with producers of both under the old daemon) and after
(a shrink 4 -> 2, whose retired partitions the new daemon trims once the group read
them). The checker then judges everything the group delivered, whoever delivered it:
every key in order, no acknowledged record lost, no commit past an undelivered record.

Each layout change is made hard on purpose: the readers are stopped (SIGSTOP) while it
is published and continued once records routed by the new layout have piled up past
the receiving partitions' boundaries (or after a few seconds, for a protocol in which
producers cannot switch while consumers are stopped). The readers then meet a key's
new records and the older records of its old partition in one backlog, where only the
gates keep them in order.
"""

from __future__ import annotations

import collections
import signal
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from helpers import wait_until
from kit import Kit
from upgrade_helpers import ROOT, Fleet, Member, Release, export_release, wait_exit

from coordinator.kernel.store import LayoutStore
from ordered.verify import check, read_events

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

RATE = 100.0
"""Records per second per producer: a few thousand records over the run."""

PILED = 60
"""Records of the new layout that must wait behind the stopped readers in every
receiving partition before they are continued."""

BACKLOG = 80
"""Records every partition must receive behind the stopped readers before a layout
change begins."""

BACKLOG_S = 1.0
"""The longest the readers wait stopped for that backlog."""

HOLD_S = 3.5
"""The longest they then stay stopped while the change is made (with ``BACKLOG_S``, well
within their 6 s sessions)."""

DAEMON_OPTIONS = (
    *("--scan-interval", "0.5", "--sweep-interval", "2", "--trim-timeout", "20"),
    *("--metrics-address", "off"),  # other tests' daemons may hold the default port
)


@pytest.fixture(scope="session")
def old_release(tmp_path_factory: pytest.TempPathFactory) -> Release:
    """The release the fleet upgrades from, exported once per session (or a skip)."""
    found = export_release(ROOT, tmp_path_factory.mktemp("release"))
    if isinstance(found, str):
        pytest.skip(found)
    assert found.foreign_imports() == [], f"{found.label} does not run its own tree"
    return found


@pytest.fixture
def new_release() -> Release:
    """The checkout under test."""
    found = Release("new", ROOT, compiled=any((ROOT / "ordered").glob("_fastproduce*.so")))
    assert found.foreign_imports() == [], "the checkout under test does not run its own tree"
    return found


@pytest.fixture
def fleet(kit: Kit, tmp_path: Path) -> Iterator[Fleet]:
    servers = [*kit.cli_servers, "--session-timeout", "2"]
    base = {"bootstrap": kit.bootstrap, "zookeeper": kit.zk_hosts, "root": kit.zk_root}
    made = Fleet(tmp_path, servers, base)
    try:
        yield made
    finally:
        made.kill_all()


class _Timeline:
    """What the run did when, and which releases served the topic then (in a failure)."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.lines: list[str] = []

    def say(self, text: str) -> None:
        line = f"{time.monotonic() - self.started:6.1f} s  {text}"
        self.lines.append(line)
        print(f"[upgrade] {line}", file=sys.stderr, flush=True)


def _delivered(member: Member) -> int:
    return int(member.read_stats().get("delivered", 0))


def _acked(member: Member) -> int:
    return int(member.read_stats().get("acked", 0))


@pytest.fixture
def probe(kit: Kit) -> Iterator[Consumer]:
    """A plain consumer that only reads watermarks (it joins no group)."""
    consumer = Consumer({"bootstrap.servers": kit.bootstrap, "group.id": "upgrade-probe"})
    try:
        yield consumer
    finally:
        consumer.close()


def _end(probe: Consumer, topic: str, partition: int) -> int | None:
    """The partition's end offset, or ``None`` while the probe does not know it yet."""
    try:
        _low, high = probe.get_watermark_offsets(TopicPartition(topic, partition), 5)
    except KafkaException:
        # A partition just created: not in the probe's metadata until it asks again.
        probe.list_topics(topic, timeout=5)
        return None
    return int(high)


def _backlog(probe: Consumer, topic: str, active: int) -> Callable[[], bool]:
    """Whether every active partition has grown by ``BACKLOG`` records since the call."""
    start = {p: _end(probe, topic, p) or 0 for p in range(active)}

    def grown() -> bool:
        return all((_end(probe, topic, p) or 0) >= start[p] + BACKLOG for p in start)

    return grown


def _piled(store: LayoutStore, probe: Consumer, topic: str, epoch: int) -> Callable[[], bool]:
    """Whether every partition receiving keys in ``epoch`` holds ``PILED`` records past
    its boundary (records routed by the new layout)."""

    def piled() -> bool:
        record = store.find_epoch(topic, epoch)
        if record is None:
            return False
        for partition in sorted({dest for _src, dest in record.edges}):
            end = _end(probe, topic, partition)
            if end is None or end < record.boundaries[partition] + PILED:
                return False
        return True

    return piled


def _hold_until(done: Callable[[], bool], seconds: float) -> bool:
    """Poll ``done`` for at most ``seconds``; whether it came true.

    Not a ``wait_until``: running out of time is an answer here, not a failure.
    """
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if done():
            return True
        time.sleep(0.1)
    return done()


def test_a_fleet_rolls_from_the_last_release_without_losing_order(
    kit: Kit, fleet: Fleet, probe: Consumer, old_release: Release, new_release: Release
) -> None:
    topic = kit.topic_factory(2)
    fleet.base.update(topic=topic, keys=64)
    store = kit.store
    timeline = _Timeline()
    epoch, active = 0, 2

    def layout_change(release: Release, how: str, to: int, readers: list[Member]) -> None:
        nonlocal epoch, active
        epoch += 1
        for reader in readers:
            reader.signal(signal.SIGSTOP)
        try:
            # Old-layout records first, so that the sources' tails are long when the
            # readers meet the new layout's records.
            _hold_until(_backlog(probe, topic, active), BACKLOG_S)
            command = fleet.cli(release, how, topic, "--to", str(to), "--timeout", "60")
            piled = _hold_until(_piled(store, probe, topic, epoch), HOLD_S)
        finally:
            for reader in readers:
                reader.signal(signal.SIGCONT)
        code = wait_exit(command, 90)
        assert code == 0, f"{how} --to {to} ({release.label}) exited {code}\n{fleet.logs()}"
        sealed = store.find_epoch(topic, epoch)
        assert sealed is not None and sealed.sealed, sealed
        active = to
        names = ", ".join(m.name for m in fleet.members if m.proc.poll() is None)
        held = "piled up" if piled else f"had not piled up after {HOLD_S:g} s"
        timeline.say(f"epoch {epoch} ({how} to {to}) sealed; its records {held}; live: {names}")

    def records_flow(members: list[Member], count: Callable[[Member], int]) -> None:
        # Each member must make progress of its own, not only the fleet as a whole.
        before = {m.name: count(m) for m in members}
        wait_until(
            lambda: all(count(m) >= before[m.name] + 50 for m in members),
            timeout=45,
            what=lambda: f"progress of {[(m.name, count(m)) for m in members]}\n{fleet.logs()}",
        )

    def roll(old: Member, slot: str, role: str, **extra: Any) -> Member:
        # In place, as an operator restarts one instance: a clean stop, then the new one.
        code = fleet.stop(old)
        assert code == 0, f"{old.name} exited {code}\n{old.log_tail()}"
        new = fleet.worker(new_release, slot, role, **extra)
        timeline.say(f"{old.name} replaced by {new.name}")
        return new

    adopted = wait_exit(fleet.cli(old_release, "adopt", topic), 60)
    assert adopted == 0, fleet.logs()
    daemon = fleet.daemon(old_release, "daemon", *DAEMON_OPTIONS)
    producers = [
        fleet.worker(old_release, f"producer-{i}", "producer", rate=RATE) for i in range(2)
    ]
    readers = [
        fleet.worker(old_release, f"reader-{i}", "reader", group="main", idle_exit=3.0)
        for i in range(2)
    ]
    wait_until(lambda: ": leader" in daemon.log.read_text(), timeout=30, what="the old daemon")
    records_flow(readers, _delivered)
    timeline.say(f"all on {old_release.label} (compiled helpers: {old_release.compiled})")
    # Kafka's partitions 2 and 3 are made (and assigned to the readers) before the
    # fleet is mixed: a partition new to Kafka waits for a rebalance before anyone reads
    # it, which would keep its records behind the sources' tails whatever the gates do.
    layout_change(old_release, "expand", 4, readers)
    records_flow(readers, _delivered)

    # Readers first: one new reader among old ones through a shrink.
    readers[0] = roll(readers[0], "reader-0", "reader", group="main", idle_exit=3.0)
    records_flow(readers, _delivered)
    layout_change(old_release, "shrink", 3, readers)
    records_flow(readers, _delivered)
    readers[1] = roll(readers[1], "reader-1", "reader", group="main", idle_exit=3.0)
    records_flow(readers, _delivered)

    # Then producers: old and new producers under the old daemon through an expansion
    # (over partition 3, retired by the shrink).
    producers[0] = roll(producers[0], "producer-0", "producer", rate=RATE)
    records_flow(producers, _acked)
    layout_change(old_release, "expand", 4, readers)
    records_flow(producers, _acked)
    producers[1] = roll(producers[1], "producer-1", "producer", rate=RATE)
    records_flow(producers, _acked)

    # The daemon last; then a shrink with every process on the new release.
    assert fleet.stop(daemon) == 0, daemon.log_tail()
    daemon = fleet.daemon(new_release, "daemon", *DAEMON_OPTIONS)
    wait_until(lambda: ": leader" in daemon.log.read_text(), timeout=30, what="the new daemon")
    timeline.say(f"{daemon.name} leads")
    layout_change(new_release, "shrink", 2, readers)
    records_flow(readers, _delivered)

    # Stop writing, let the group read everything, and let the daemon trim what it read.
    for producer in producers:
        assert fleet.stop(producer) == 0, producer.log_tail()
    for reader in readers:
        reader.signal(signal.SIGHUP)  # drain: read on, exit after 3 s with nothing new
    for reader in readers:
        # Signal 0: only wait. A second SIGHUP could reach a reader already past its
        # drain, in the interpreter's shutdown, where the default action kills it.
        assert fleet.stop(reader, 0, timeout=90) == 0, reader.log_tail()
    timeline.say("producers stopped, readers drained")
    wait_until(
        lambda: (
            {p: r.state for p, r in store.retired(topic).items()} == {2: "trimmed", 3: "trimmed"}
        ),
        timeout=40,
        what=lambda: f"the new daemon to trim 2 and 3: {store.retired(topic)}",
    )
    assert fleet.stop(daemon) == 0, daemon.log_tail()

    verdict = check(read_events(fleet.histories()), complete_groups=["main"], topic=topic)
    summary = verdict.to_dict()
    failure = f"{summary}\n" + "\n".join(timeline.lines) + f"\n{fleet.logs()}"
    assert verdict.violation_count == 0, failure
    assert verdict.lost_count == 0, failure
    assert verdict.committed_past_count == 0, failure
    assert verdict.mismatched == 0 and verdict.nacked == 0, failure
    assert verdict.holds, failure

    # The run proves something only if both releases wrote and read, under every layout.
    deliveries: collections.Counter[str] = collections.Counter()
    epochs_read: set[int] = set()
    acks: collections.Counter[str] = collections.Counter()
    for event in read_events(fleet.histories()):
        if event.get("ev") == "dlv":
            deliveries[event["r"]] += 1
            epochs_read.add(int(event["e"]))
        elif event.get("ev") == "ack":
            acks[event["p"]] += 1
    workers = [m for m in fleet.members if m.kind in ("producer", "reader")]
    for member in workers:
        done = deliveries if member.kind == "reader" else acks
        assert done[member.name] > 0, f"{member.name} did nothing: {dict(done)}"
    assert {m.release.label for m in workers} == {old_release.label, "new"}
    assert epochs_read == {0, 1, 2, 3, 4}, epochs_read
    assert verdict.records >= 3000, summary
    for member in fleet.members:
        assert "Traceback" not in member.log.read_text(errors="replace"), member.log_tail(40)
    timeline.say(f"{verdict.records} records, {summary['groups']['main']}")
