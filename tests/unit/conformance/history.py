"""A scenario's layout history written as the layout store writes it.

``TopicRecord`` and ``EpochRecord`` JSON in an in-memory ZooKeeper
(:class:`conformance.fakezk.FakeZk`), the topic znode touched with every change so its
``mzxid`` moves as a real publish, seal or compaction would move it.
"""

from __future__ import annotations

from typing import Any

from conformance.fakezk import FakeZk
from coordinator.kernel.store import paths as store_paths
from coordinator.kernel.store.records import EpochRecord, TopicRecord

__all__ = ["ROOT", "Layouts"]

ROOT = "/ordered"


def _topic_record(topic: str, spec: dict[str, Any], epochs: list[dict[str, Any]]) -> TopicRecord:
    last = epochs[-1] if epochs else None
    active = last["to_active"] if last else spec["initial"]
    pending = last["epoch"] if last and last["state"] == "pending" else None
    return TopicRecord(
        topic=topic,
        initial=spec["initial"],
        active=active,
        epoch=last["epoch"] if last else 0,
        pending=pending,
        physical=max(spec.get("physical", 0), active, *(e["from_active"] for e in epochs)),
        algorithm=spec.get("algorithm", "murmur3"),
        ordered=spec.get("ordered", True),
        compacted=spec.get("compacted", False),
        adopted_at=1.0,
        topic_id=spec.get("topic_id"),
    )


def _epoch_record(topic: str, initial: int, e: dict[str, Any]) -> EpochRecord:
    sealed = e["state"] == "sealed"
    return EpochRecord(
        topic=topic,
        epoch=e["epoch"],
        initial=initial,
        from_active=e["from_active"],
        to_active=e["to_active"],
        state=e["state"],
        edges=tuple(tuple(x) for x in e["edges"]),
        boundaries={int(k): v for k, v in e.get("boundaries", {}).items()},
        producers=(),
        expired={},
        created_at=1.0,
        sealed_at=2.0 if sealed else None,
    )


class Layouts:
    """The layout store's side of a run: what the controller writes."""

    def __init__(self, zk: FakeZk, topics: dict[str, Any], history: dict[str, Any]) -> None:
        self.zk = zk
        self.specs = topics
        self.epochs: dict[str, list[dict[str, Any]]] = {
            t: [dict(e) for e in history.get(t, [])] for t in topics
        }
        for topic, spec in topics.items():
            if spec.get("adopted", True):
                self._write(topic, [e["epoch"] for e in self.epochs[topic]])

    def _write(self, topic: str, epoch_numbers: list[int]) -> None:
        spec = self.specs[topic]
        epochs = self.epochs[topic]
        for e in epochs:
            if e["epoch"] in epoch_numbers:
                rec = _epoch_record(topic, spec["initial"], e)
                self.zk.put(store_paths.epoch_path(ROOT, topic, e["epoch"]), rec.to_json())
        # Publish and seal write the topic znode in the same transaction as the epoch.
        record = _topic_record(topic, spec, epochs)
        self.zk.put(store_paths.topic_path(ROOT, topic), record.to_json())

    def publish(self, topic: str, epoch: dict[str, Any], notify: bool) -> None:
        self.epochs[topic].append(dict(epoch, state=epoch.get("state", "pending")))
        self._write(topic, [epoch["epoch"]])
        if notify:
            self.zk.touched(store_paths.topic_path(ROOT, topic))

    def seal(self, topic: str, number: int, boundaries: dict[str, int], notify: bool) -> None:
        for e in self.epochs[topic]:
            if e["epoch"] == number:
                e["state"] = "sealed"
                e["boundaries"] = {**e.get("boundaries", {}), **boundaries}
        self._write(topic, [number])
        if notify:
            self.zk.touched(store_paths.topic_path(ROOT, topic))

    def compact(self, topic: str, below: int, notify: bool) -> None:
        """History compaction: epochs below ``below`` are deleted."""
        self.epochs[topic] = [e for e in self.epochs[topic] if e["epoch"] >= below]
        for path in [
            p for p in self.zk.nodes if p.startswith(store_paths.epochs_path(ROOT, topic) + "/")
        ]:
            if int(path.rsplit("/", 1)[1]) < below:
                del self.zk.nodes[path]
        self._write(topic, [])
        if notify:
            self.zk.touched(store_paths.topic_path(ROOT, topic))
