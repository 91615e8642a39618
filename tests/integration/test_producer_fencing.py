"""The route switch is fenced: no record routed by an old layout lands past its boundary.

Several threads produce keyed records with the default configuration (header off, so
the compiled send path when it is built) while the topic grows twice. Afterwards every
record of a key that moved away from a giving partition must lie below that
partition's sealed boundary: a record routed by the old layout and queued after the
drain check would lie above it. Runs with the compiled path, with the pure-Python
fallback (``ordered.producer.send._FAST = None``), and in pause mode
(``ordered.switch.mode=pause``, compiled path, ``delivery.report.only.error``: the
senders wait out each drain through their ``BufferError`` retry).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator

import pytest
from fixtures import consume_all, run_in_background
from helpers import create_topic, unique

from coordinator.control.controller import Controller
from coordinator.kernel.store import LayoutStore
from linear_hash import Layout
from ordered import OrderedProducer, SwitchDrainingError
from ordered.producer import send as producer_module

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]


@pytest.fixture(params=["compiled", "python", "pause"])
def send_path(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    if request.param in ("compiled", "pause"):
        if not producer_module.COMPILED:
            pytest.skip("ordered._fastproduce is not built")
    else:
        monkeypatch.setattr(producer_module, "_FAST", None)
    yield request.param


def test_no_old_layout_record_past_the_boundary(
    send_path: str,
    make_producer: Callable[..., OrderedProducer],
    bootstrap: str,
    store: LayoutStore,
    controller: Controller,
) -> None:
    topic = create_topic(bootstrap, unique("fence"), 2)
    controller.adopt(topic)
    # Records wait in librdkafka, so an early ack would let the seal read a giving
    # partition's end before old-layout records reach it.
    extra: dict[str, object] = {"linger.ms": 50}
    if send_path == "pause":
        extra.update({"ordered.switch.mode": "pause", "delivery.report.only.error": True})
    producers = [make_producer(**extra) for _ in range(2)]
    # The compiled class's produce is a C method; the Python one a bound method.
    compiled = type(producers[0].produce).__name__ == "builtin_function_or_method"
    assert compiled == (send_path != "python")
    stop = threading.Event()
    paused: list[int] = []

    def write(producer: OrderedProducer, n: int) -> None:
        i = 0
        while not stop.is_set():
            try:
                producer.produce(topic, b"v", f"k{n}-{i % 2000}".encode())
                i += 1
            except SwitchDrainingError:
                paused.append(n)
                producer.poll(0.005)
            except BufferError:
                producer.poll(0.005)
            if not i % 16:
                producer.poll(0)
                time.sleep(0.001)  # ~16k records/s per thread: enough to race

    # Two threads per producer: switches race with sends on other threads too.
    writers = [
        run_in_background(write, p, 2 * k + j) for k, p in enumerate(producers) for j in range(2)
    ]
    try:
        time.sleep(0.5)
        for to in (3, 4):
            result = controller.expand(topic, to, timeout=30)
            assert result.expired == {}
            time.sleep(0.4)
    finally:
        stop.set()
    for writer in writers:
        writer.join(10)  # raises what the writer raised
    for producer in producers:
        assert producer._tracker.total == 0
        producer.close()
    # Pause mode paused (at least one sender met a drain); the others never do.
    assert bool(paused) == (send_path == "pause")

    epochs = store.epochs(topic)
    assert [e.epoch for e in epochs] == [0, 1, 2] and all(e.sealed for e in epochs)
    records = consume_all(bootstrap, topic)
    assert len(records) > 1000
    checked = 0
    for epoch in epochs[1:]:
        new = Layout(epochs[0].initial, epoch.to_active, epoch.epoch)
        givers = {a for a, _b in epoch.edges}
        for msg in records:
            p = msg.partition()
            if p not in givers or new.partition_for(msg.key()) == p:
                continue
            # This key moved away from p at this epoch: only old-layout records of it
            # are in p, and all of them must lie below the sealed boundary.
            checked += 1
            assert msg.offset() < epoch.boundaries[p], (
                f"epoch {epoch.epoch}: {msg.key()!r} routed by the old layout at "
                f"{p}@{msg.offset()}, boundary {epoch.boundaries[p]}"
            )
    assert checked > 100
