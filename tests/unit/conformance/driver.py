"""Runs one consumer conformance scenario (``vectors/consumer/*.json``) on the real consumer.

The Python driver: the real ``OrderedConsumer`` is built with its I/O replaced at the
module level (the Kafka client, the ZooKeeper client, the clock), never by editing it:

* ``ordered.consumer.wrapper.Consumer`` -> :class:`~conformance.fakes.FakeClient`;
* ``ordered.consumer.wrapper.make_client``/``start_client``/``close_client*`` -> one
  :class:`~conformance.fakes.FakeZk` holding the scenario's history as the layout store
  writes it (``TopicRecord`` and ``EpochRecord`` JSON, ``mzxid`` changing with every
  publish and seal);
* ``ordered.consumer.probe.Consumer`` (the log-start probe's own client) -> the same
  broker side;
* the clock given to the consumer's core and to its check pacer, and ``time`` in the
  consumer's modules that still read it -> one :class:`~conformance.fakezk.Clock`.

:func:`run` returns the mismatches (empty: the scenario passes); it never raises for a
mismatch, so the meta-test can assert on them. The format is ``vectors/consumer/README.md``.
"""

from __future__ import annotations

import contextlib
import functools
import importlib
import json
import logging
import pkgutil
import threading
import time
import types
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from confluent_kafka import OFFSET_BEGINNING, Message, TopicPartition

from conformance.fakes import FakeClient, FakeKafka
from conformance.fakezk import Clock, FakeZk
from conformance.history import ROOT, Layouts
from coordinator.kernel.errors import OrderedKafkaError
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.store.records import Interest, Progress
from coordinator.kernel.topic_ids import check_topic_id

__all__ = ["ROOT", "VECTORS", "load_all", "run"]

VECTORS = Path(__file__).resolve().parents[3] / "vectors" / "consumer"
GROUP = "g"


def load_all() -> list[dict[str, Any]]:
    """Every scenario of every ``vectors/consumer/*.json`` file, with its file noted."""
    out = []
    for path in sorted(VECTORS.glob("*.json")):
        if path.name == "schema.json":
            continue
        doc = json.loads(path.read_text())
        for scenario in doc["scenarios"]:
            scenario = dict(scenario)
            scenario["_file"] = path.name
            out.append(scenario)
    return out


# --- observations ------------------------------------------------------------------------


class _TopicIds:
    """Kafka's topic ids as the scenario has them (``kafka_topic_ids``; absent: unknown)."""

    def __init__(self, ids: dict[str, str]) -> None:
        self.ids = ids

    @staticmethod
    def factory(ids: dict[str, str]) -> Any:
        return types.SimpleNamespace(for_client=lambda *a, **k: _TopicIds(ids))

    def verify(self, record: Any) -> Any:
        if record is not None and record.topic_id is not None and record.topic not in self.ids:
            # Kafka does not answer the topic's id (unreachable, timed out).
            raise OrderedKafkaError(f"cannot describe topic {record.topic} (scripted)")
        check_topic_id(record, None if record is None else self.ids.get(record.topic))
        return record


class _Listener:
    """The KIP-253 key listener: records its calls; may be told to raise."""

    def __init__(self, events: list[Any]) -> None:
        self.events = events
        self.raises: dict[str, int] = {}
        self.thread = threading.get_ident()  # the driver's: every call comes from it
        self.off_thread: list[str] = []

    def _call(self, name: str, partitions: list[Any]) -> None:
        if threading.get_ident() != self.thread:
            # C-CB-1: every callback runs on the thread that called the consumer.
            self.off_thread.append(name)
        self.events.append(
            {
                "event": name,
                "partitions": [[tp.topic, tp.partition, tp.offset] for tp in partitions],
            }
        )
        if self.raises.get(name, 0) > 0:
            self.raises[name] -= 1
            raise RuntimeError(f"{name} raised (scripted)")

    def on_partition_key_maybe_revoked(self, partitions: list[Any]) -> None:
        self._call("maybe_revoked", partitions)

    def on_partition_key_assigned(self, partitions: list[Any]) -> None:
        self._call("assigned", partitions)


def _zk_event(op: str, path: str, data: bytes) -> dict[str, Any] | None:
    """A ZooKeeper write under the group's nodes, in the scenario's terms."""
    group = store_paths.group_path(ROOT, GROUP)
    rest = path[len(group) + 1 :].split("/")
    if rest[0] == "interest" and len(rest) == 3:
        if op == "delete":
            return {"event": "interest", "topic": rest[1], "waits": None}
        waits = Interest.from_json(data, path).waits
        return {
            "event": "interest",
            "topic": rest[1],
            "waits": {str(k): v for k, v in sorted(waits.items())},
        }
    if rest[0] == "progress" and len(rest) == 3:
        progress = Progress.from_json(data, path)
        return {
            "event": "progress",
            "topic": rest[1],
            "partition": progress.partition,
            "offset": progress.offset,
        }
    if rest[0] == "rewinds" and len(rest) == 2:
        return {"event": "rewind_marker", "topic": rest[1]}
    if rest[0] == "topics" and len(rest) == 2 and op == "create":
        return {"event": "group_registered", "topic": rest[1]}
    return None


def _per_node(writes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``writes`` grouped by node, each node's writes in their order."""
    return sorted(writes, key=lambda w: (w["event"], w["topic"], w.get("partition", -1)))


def _key(tp: Any) -> str:
    return f"{tp[0]}/{tp[1]}"


# --- the run -----------------------------------------------------------------------------


@contextlib.contextmanager
def _patched(
    clock: Clock, zk: FakeZk, make_client: Any, make_probe: Any, topic_ids: Any
) -> Iterator[None]:
    """The consumer's I/O, replaced at the module level for the run."""
    from ordered.consumer import pacing, state, wrapper
    from ordered.consumer import probe as probe_module

    fake_time = types.SimpleNamespace(monotonic=clock.monotonic, time=clock.time, sleep=clock.sleep)
    saved: list[tuple[Any, str, Any]] = []

    def put(obj: Any, name: str, value: Any) -> None:
        saved.append((obj, name, getattr(obj, name)))
        setattr(obj, name, value)

    put(wrapper, "Consumer", make_client)
    put(wrapper, "make_client", lambda *a, **k: zk)
    put(wrapper, "start_client", lambda client, *a, **k: client)
    put(wrapper, "close_client", lambda client: None)
    put(wrapper, "close_client_within", lambda client, timeout: True)
    put(wrapper, "exit_hook", lambda owner, fn: lambda: None)
    put(wrapper, "TopicIds", topic_ids)
    put(probe_module, "Consumer", make_probe)
    import ordered.consumer as package

    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"ordered.consumer.{info.name}")
        if getattr(module, "time", None) is time:  # the consumer's clock, wherever it reads it
            put(module, "time", fake_time)
    layouts_module = importlib.import_module("ordered.consumer.layouts")
    put(layouts_module, "CheckPacer", lambda: pacing.CheckPacer(clock))
    put(wrapper, "Core", functools.partial(state.Core, clock=clock))
    try:
        yield
    finally:
        for obj, name, value in reversed(saved):
            setattr(obj, name, value)


def _message(topic: str, partition: int, offset: int, spec: dict[str, Any], i: int) -> Message:
    keys = spec.get("keys")
    key = None if keys is None else keys[i]
    kind = spec.get("kind", "record")
    if isinstance(kind, list):
        kind = kind[i]
    value: bytes | None = f"v{offset}".encode()
    headers = [(k, v.encode()) for k, v in spec["headers"]] if "headers" in spec else None
    if kind == "tombstone":
        value = None
    elif kind == "tombstone_copy":
        value = None
        headers = [*(headers or []), ("ordered.tombstone", str(partition).encode())]
    return Message(
        topic=topic,
        partition=partition,
        offset=offset,
        key=None if key is None else key.encode(),
        value=value,
        headers=headers,
    )


def _offsets(spec: dict[str, Any]) -> list[int]:
    if "offsets" in spec:
        return list(spec["offsets"])
    return list(range(spec["from"], spec["to"] + 1))


class _Run:
    def __init__(self, scenario: dict[str, Any]) -> None:
        self.s = scenario
        self.clock = Clock()
        self.zk = FakeZk(ROOT)
        self.kafka = FakeKafka()
        self.events: list[Any] = []
        self.client: FakeClient | None = None
        self.mismatches: list[str] = []
        for topic, parts in scenario.get("committed", {}).items():
            for p, o in parts.items():
                self.kafka.committed[(topic, int(p))] = o
        for topic, parts in scenario.get("log_start", {}).items():
            for p, o in parts.items():
                self.kafka.log_start[(topic, int(p))] = o
                self.kafka.high.setdefault((topic, int(p)), o)
        self.layouts = Layouts(self.zk, scenario["topics"], scenario.get("history", {}))
        self.listener = _Listener(self.events)
        self.zk_seen = 0

    def _make_client(self, config: dict[str, Any], **_kw: Any) -> FakeClient:
        self.client = FakeClient(self.kafka, config, self.events, self.clock)
        return self.client

    def _make_probe(self, config: dict[str, Any], **_kw: Any) -> FakeClient:
        return FakeClient(self.kafka, config, [], self.clock)

    def config(self) -> dict[str, Any]:
        conf: dict[str, Any] = {
            "bootstrap.servers": "fake:9092",
            "ordered.zookeeper.connect": "fake:2181",
            "ordered.zookeeper.root": ROOT,
            "ordered.layout.check.max.requests.per.s": 0,
        }
        if self.s.get("group", True):
            conf["group.id"] = GROUP
        conf.update(self.s.get("config", {}))
        return conf

    # --- observing ---

    def _drain_events(self) -> tuple[list[Any], list[Any]]:
        """This step's events (callbacks, commits) and its ZooKeeper writes, each in order."""
        zk = []
        for op, path, data in self.zk.writes[self.zk_seen :]:
            ev = _zk_event(op, path, data)
            if ev is not None:
                zk.append(ev)
        self.zk_seen = len(self.zk.writes)
        out = list(self.events)
        self.events.clear()
        return out, zk

    def _held(self, consumer: Any) -> tuple[list[list[Any]], dict[str, list[list[int]]]]:
        held: list[list[Any]] = []
        waits: dict[str, list[list[int]]] = {}
        for st in consumer.gate_status(waits=True):
            if st.held is not None:
                held.append([st.topic, st.partition, st.held])
                waits[f"{st.topic}/{st.partition}"] = sorted(
                    [w.partition, w.offset, w.epoch] for w in st.waits
                )
        return held, waits

    def _check(self, i: int, step: dict[str, Any], got: dict[str, Any], consumer: Any) -> None:
        expect = step.get("expect")
        if not expect:
            return
        where = f"step {i} ({step['do']})"

        def differ(what: str, want: Any, have: Any) -> None:
            if want != have:
                self.mismatches.append(f"{where}: {what}: expected {want!r}, got {have!r}")

        if "records" in expect:
            differ("records", expect["records"], got.get("records", []))
        if "raises" in expect:
            if expect["raises"] is not None:  # null: either way
                differ("raises", expect["raises"], got.get("raises", False))
        elif got.get("raises"):
            self.mismatches.append(f"{where}: raised unexpectedly: {got.get('error')}")
        if "events" in expect:
            differ("events", expect["events"], got["events"])
        if "checks" in expect:
            differ("checks", expect["checks"], got["checks"])
        if "zk_writes" in expect:
            # In order per node; writes to different nodes in any order (C-POS-4: publishing
            # is asynchronous).
            differ("zk_writes", _per_node(expect["zk_writes"]), _per_node(got["zk_writes"]))
        if "held" in expect or "waits" in expect:
            held, waits = self._held(consumer)
            if "held" in expect:
                differ("held", sorted(expect["held"]), sorted(held))
            if "waits" in expect:
                differ("waits", expect["waits"], {k: waits.get(k) for k in expect["waits"]})
        client = self.client
        assert client is not None
        if "client_paused" in expect:
            differ(
                "client_paused",
                sorted(expect["client_paused"]),
                sorted([list(k) for k in client.paused]),
            )
        if "stored" in expect:
            have = {
                k: client.stored.get((k.split("/")[0], int(k.split("/")[1])))
                for k in expect["stored"]
            }
            differ("stored", expect["stored"], have)
        for name, source in (
            ("stored_at_most", client.stored),
            ("committed_at_most", self.kafka.committed),
        ):
            for k, bound in expect.get(name, {}).items():
                value = source.get((k.split("/")[0], int(k.split("/")[1])))
                if value is not None and value > bound:
                    self.mismatches.append(f"{where}: {name} {k}: {value} is past {bound}")
        if "committed" in expect:
            have = {
                k: self.kafka.committed.get((k.split("/")[0], int(k.split("/")[1])))
                for k in expect["committed"]
            }
            differ("committed", expect["committed"], have)
        if "positions" in expect:
            tps = [
                TopicPartition(k.split("/")[0], int(k.split("/")[1])) for k in expect["positions"]
            ]
            have = {f"{tp.topic}/{tp.partition}": tp.offset for tp in consumer.position(tps)}
            differ("positions", expect["positions"], have)

    # --- acting ---

    def _call(self, fn: Any) -> dict[str, Any]:
        try:
            value = fn()
        except Exception as exc:
            return {"raises": True, "error": f"{type(exc).__name__}: {exc}"}
        return {"value": value}

    def step(self, consumer: Any, step: dict[str, Any]) -> dict[str, Any]:
        do = step["do"]
        client = self.client
        assert client is not None
        got: dict[str, Any] = {}
        checks_before = self.zk.checks
        if do == "subscribe":
            got = self._call(
                lambda: consumer.subscribe(
                    step["topics"],
                    on_assign=self._rebalance_cb("on_assign"),
                    on_revoke=self._rebalance_cb("on_revoke"),
                    on_lost=self._rebalance_cb("on_lost") if step.get("on_lost", True) else None,
                    key_listener=self.listener,
                )
            )
        elif do in ("assign", "incremental_assign", "incremental_unassign"):
            tps = [_tp(x) for x in step["partitions"]]
            got = self._call(lambda: getattr(consumer, do)(tps))
        elif do == "unassign":
            got = self._call(consumer.unassign)
        elif do == "fetched":

            def arrive(step: dict[str, Any] = step) -> None:
                for spec in step["records"]:
                    offsets = _offsets(spec)
                    key = (spec["topic"], spec["partition"])
                    msgs = [_message(key[0], key[1], o, spec, i) for i, o in enumerate(offsets)]
                    client.fetched(key, offsets, msgs)
                for k, high in step.get("high", {}).items():
                    t, p = k.split("/")
                    self.kafka.high[(t, int(p))] = high

            if "during_call" in step:
                client.at_call(step["during_call"], arrive)
            else:
                arrive()
        elif do == "poll":
            got = self._call(lambda: consumer.poll(step.get("timeout_ms", 0) / 1000.0))
            if "value" in got:
                m = got["value"]
                got["records"] = [] if m is None else [[m.topic(), m.partition(), m.offset()]]
        elif do == "consume":
            got = self._call(
                lambda: consumer.consume(step.get("max", 100), step.get("timeout_ms", 0) / 1000.0)
            )
            if "value" in got:
                got["records"] = [[m.topic(), m.partition(), m.offset()] for m in got["value"]]
        elif do == "seek":
            tp = _tp(step["partition"])
            got = self._call(lambda: consumer.seek(tp))
        elif do in ("pause", "resume"):
            tps = [_tp(x) for x in step["partitions"]]
            got = self._call(lambda: getattr(consumer, do)(tps))
        elif do == "commit":
            if "offsets" in step:
                tps = [_tp(x) for x in step["offsets"]]
                got = self._call(lambda: consumer.commit(offsets=tps, asynchronous=False))
            else:
                got = self._call(lambda: consumer.commit(asynchronous=False))
        elif do == "store_offsets":
            tps = [_tp(x) for x in step["offsets"]]
            got = self._call(lambda: consumer.store_offsets(offsets=tps))
        elif do == "close":
            got = self._call(consumer.close)
        elif do == "rebalance":
            kinds = [
                {"kind": kind, "partitions": step[kind]}
                for kind in ("revoke", "lost", "assign")
                if kind in step
            ]
            client.at_call(step.get("during_call", 1), lambda: client.rebalances.extend(kinds))
        elif do == "publish":
            self.layouts.publish(step["topic"], step["epoch"], step.get("notify", True))
        elif do == "seal":
            self.layouts.seal(
                step["topic"], step["epoch"], step["boundaries"], step.get("notify", True)
            )
        elif do == "compact_history":
            self.layouts.compact(step["topic"], step["below"], step.get("notify", True))
        elif do == "watches_arrive":
            self.zk.delay_watches = False
            self.zk.fire_delayed()
        elif do == "delay_watches":
            self.zk.delay_watches = True
        elif do == "group_commit":
            for t, p, o in step["offsets"]:
                self.kafka.committed[(t, p)] = o
        elif do == "log_start":
            for t, p, o in step["offsets"]:
                self.kafka.log_start[(t, p)] = o
        elif do == "progress_record":
            # Another member's (or the relay's) progress record.
            t, p, o = step["progress"]
            path = store_paths.progress_partition_path(ROOT, GROUP, t, p)
            self.zk.put(path, Progress(p, o, 1.0).to_json())
            self.zk.touched(path)
        elif do == "advance":
            self.clock.advance(step["ms"] / 1000.0)
        elif do == "zk_session":
            self.zk.session(step["state"])
        elif do == "auto_commit":
            client.auto_commit_now()
        elif do == "fail_commits":
            client.fail_commits = step["count"]
        elif do == "listener_raises":
            self.listener.raises[step["callback"]] = step.get("times", 1)
        elif do == "rewind_marker":
            # Another member's write (the controller-side put records no event).
            self.zk.put(store_paths.rewind_path(ROOT, GROUP, step["topic"]), b"")
        else:
            raise ValueError(f"unknown step {do!r}")
        got["events"], got["zk_writes"] = self._drain_events()
        got["checks"] = self.zk.checks - checks_before
        return got

    def _rebalance_cb(self, name: str) -> Any:
        def cb(_consumer: Any, partitions: list[Any]) -> None:
            if threading.get_ident() != self.listener.thread:
                self.listener.off_thread.append(name)
            self.events.append(
                {"event": name, "partitions": [[tp.topic, tp.partition] for tp in partitions]}
            )

        return cb

    def run(self) -> list[str]:
        from ordered.consumer import OrderedConsumer

        ids = _TopicIds.factory(self.s.get("kafka_topic_ids", {}))
        with _patched(self.clock, self.zk, self._make_client, self._make_probe, ids):
            logging.getLogger("ordered").setLevel(logging.CRITICAL)
            try:
                consumer = OrderedConsumer(self.config())
            except Exception as exc:
                if not self.s.get("construct_raises"):
                    return [f"construction raised: {type(exc).__name__}: {exc}"]
                return self.mismatches
            if self.s.get("construct_raises"):
                consumer.close()
                return ["construction was expected to raise (refused configuration)"]
            consumer.key_listener = self.listener  # type: ignore[assignment]  # duck-typed
            try:
                self._drain_events()
                for i, step in enumerate(self.s["steps"]):
                    got = self.step(consumer, step)
                    self._check(i, step, got, consumer)
                    if self.listener.off_thread:
                        self.mismatches.append(
                            f"step {i} ({step['do']}): callbacks ran on another thread than "
                            f"the caller's: {self.listener.off_thread}"
                        )
                        self.listener.off_thread.clear()
            finally:
                with contextlib.suppress(Exception):
                    consumer.close()
        return self.mismatches


def _tp(x: list[Any]) -> TopicPartition:
    if len(x) == 2:
        return TopicPartition(x[0], x[1])
    offset = OFFSET_BEGINNING if x[2] == "beginning" else x[2]
    return TopicPartition(x[0], x[1], offset)


def run(scenario: dict[str, Any]) -> list[str]:
    """Run ``scenario`` on the real consumer; the mismatches (empty: it passes)."""
    return _Run(scenario).run()
