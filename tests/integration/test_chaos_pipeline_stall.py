"""The chaos run's exactly-once stage outlives a stall longer than its group session.

A chaos run's stage (``ordered/chaos/pipeline.py``) crashed after a 9 s Kafka blackhole:
its consumer's group session (6 s) had expired, ``send_offsets_to_transaction`` failed
with ``UNKNOWN_MEMBER_ID``, and nothing aborted the transaction. Here the stage's own
process is stopped (SIGSTOP) for 9 s while records flow, which expires the same session
(no heartbeat leaves a stopped process), and another member joins, so the group moves on
to it; then the stage is continued. It must abort the transaction the group no longer
accepts, read its input again from the committed offsets and go on (with every
partition, once the other member left): it keeps committing transactions, exits
cleanly when told to, and the output, read ``read_committed``, holds every input record
exactly once, in each key's order.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from helpers import kill_process, unique, wait_until
from kit import Kit
from test_consumer_eos import Input, committed_everything, read_output

pytestmark = [pytest.mark.integration, pytest.mark.timeout(240)]

ROOT = Path(__file__).resolve().parents[2]
STALL = 9.0  # seconds, as the chaos run's blackhole; the stage's session is 6 s

STAGE = r"""
import json, signal, sys
from ordered.chaos.pipeline import run_pipeline

stop = []
signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
report = lambda stats: print(json.dumps(stats), flush=True)
run_pipeline(json.loads(sys.argv[1]), lambda: bool(stop), report)
"""


class Stage:
    """The stage's process; its reports (``copied``, ``transactions``, ``aborted``) as they come."""

    def __init__(self, spec: dict[str, Any], log: Path) -> None:
        self.log = log
        self.reports: list[dict[str, Any]] = []
        with log.open("w") as stderr:
            self.proc = subprocess.Popen(
                [sys.executable, "-c", STAGE, json.dumps(spec)],
                stdout=subprocess.PIPE,
                stderr=stderr,
                text=True,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
                cwd=ROOT,
            )
        stdout = self.proc.stdout
        assert stdout is not None
        threading.Thread(
            target=lambda: self.reports.extend(map(json.loads, iter(stdout.readline, ""))),
            daemon=True,
        ).start()

    def last(self, name: str) -> int:
        assert self.proc.poll() is None, f"the stage exited: {self.stderr()}"
        return int(self.reports[-1].get(name, 0)) if self.reports else 0

    def stderr(self) -> str:
        return self.log.read_text()[-3000:]


@contextlib.contextmanager
def _member_of(bootstrap: str, group: str, topic: str) -> Iterator[None]:
    """Another member of ``group``, holding all of ``topic`` while the stage is stopped.

    With the group empty, a commit the stage makes after librdkafka dropped its member id
    may still be accepted (as one from outside the group), and then no abort is due; a
    group that moved on to another member accepts none. It commits nothing, and leaves
    at the end: the stage then reads everything again from the committed offsets.
    """
    member = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "enable.auto.commit": False,
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 500,
        }
    )
    try:
        member.subscribe([topic])

        def holds_all() -> bool:
            member.poll(0.2)  # its records are not used
            return len(member.assignment()) == 2

        # The stopped stage's session (6 s) expires; the group goes on without it.
        wait_until(holds_all, 30, what="the other member to hold every partition")
        yield
    finally:
        member.close()


@pytest.fixture
def stages() -> Iterator[list[Stage]]:
    made: list[Stage] = []
    yield made
    for stage in made:
        if stage.proc.poll() is None:
            os.kill(stage.proc.pid, signal.SIGCONT)  # a stopped process may still be stopped
            kill_process(stage.proc.pid)


def test_the_stage_aborts_and_goes_on_after_its_group_session_expired(
    kit: Kit, stages: list[Stage], tmp_path: Path
) -> None:
    source = kit.adopted_topic(2)
    sink = kit.topic_factory(2, prefix="out")
    group = kit.group_factory()
    spec = {
        "bootstrap": kit.bootstrap,
        "zookeeper": kit.zk_hosts,
        "root": kit.zk_root,
        "group": group,
        "txn_id": unique("stage"),
        "topic": source,
        "output": sink,
    }
    stage = Stage(spec, tmp_path / "stage.err")
    stages.append(stage)
    writer = Input(kit.make_producer(), source)
    try:
        wait_until(lambda: stage.last("transactions") >= 2, 60, what="two transactions")
        os.kill(stage.proc.pid, signal.SIGSTOP)  # mid-transaction: records keep coming
        stopped = time.monotonic()
        with _member_of(kit.bootstrap, group, source):
            time.sleep(max(0.0, STALL - (time.monotonic() - stopped)))
            os.kill(stage.proc.pid, signal.SIGCONT)
            wait_until(lambda: stage.last("aborted") >= 1, 60, what="the stage to abort")
        resumed = stage.last("transactions")
        wait_until(
            lambda: stage.last("transactions") >= resumed + 2,
            60,
            what=lambda: f"commits again (last report {stage.reports[-1:]})",
        )
    finally:
        produced = writer.stop()
    total = sum(produced.values())
    wait_until(
        lambda: committed_everything(kit.bootstrap, group, source),
        90,
        interval=1.0,
        what=lambda: f"the stage to commit all input ({stage.reports[-1:]})",
    )
    stage.proc.send_signal(signal.SIGTERM)
    assert stage.proc.wait(timeout=60) == 0, stage.stderr()
    wait_until(lambda: stage.reports and stage.reports[-1].get("done"), 10, what="the last report")

    out = read_output(kit.bootstrap, sink, total)
    per_key: dict[str, list[int]] = defaultdict(list)
    for m in out:
        key, seq = m.value().decode().split(":")
        assert m.key().decode() == key
        per_key[key].append(int(seq))
    print(f"{total} input records, {len(out)} output, last report {stage.reports[-1]}")
    assert len(out) == total, "records lost or copied twice"
    assert per_key == {k: list(range(n)) for k, n in produced.items()}
