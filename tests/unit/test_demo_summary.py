"""The demo's verdict: ``ok`` (exit code 0) only with 0 violations and 0 lost records."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ordered.demo.monitor import PartSample, Sample
from ordered.demo.runner import DemoOptions, _Run, _summarise
from ordered.demo.view import make_view


def _history(path: Path, events: list[dict[str, Any]]) -> None:
    path.write_text("".join(json.dumps(e) + "\n" for e in events))


def _ack(seq: int, partition: int, offset: int) -> dict[str, Any]:
    return {"ev": "ack", "p": "producer-0", "k": "k1", "s": seq, "tp": partition, "o": offset}


def _dlv(ts: int, seq: int, partition: int, offset: int) -> dict[str, Any]:
    return {
        "ev": "dlv",
        **{"g": "g", "r": "consumer-0", "n": 0, "p": "producer-0", "k": "k1", "s": seq},
        **{"tp": partition, "o": offset, "e": -1, "ts": ts},
    }


def _summary(tmp_path: Path, deliveries: list[dict[str, Any]], held: bool = True) -> dict[str, Any]:
    _history(tmp_path / "producer-0.jsonl", [_ack(0, 0, 10), _ack(1, 2, 0)])
    _history(tmp_path / "consumer-0.jsonl", deliveries)
    run = _Run(DemoOptions(as_json=True), make_view(True, "test"), tmp_path)
    run.steps.append({"step": "expand", "from": 2, "to": 3, "epoch": 1, "ok": True, "seconds": 0.1})
    samples = []
    for t in (0.0, 0.5, 1.0):
        parts = {p: PartSample("active", (), 5, 5) for p in range(3)}
        if held and t < 1.0:
            parts[2] = PartSample("blocked", (0,), 5, None)  # held at its gate for 0.5 s
        samples.append(Sample(t, 1, None, 3, 0, 1, parts))
    return _summarise(run, "t", "g", samples, ["producer-0"], ["consumer-0"], True)


def test_in_order_and_complete_is_ok(tmp_path: Path) -> None:
    summary = _summary(tmp_path, [_dlv(1, 0, 0, 10), _dlv(2, 1, 2, 0)])
    assert (summary["violations"], summary["lost"], summary["records"]) == (0, 0, 2)
    assert summary["ok"] is True
    assert Path(summary["png"]).read_bytes()[:4] == b"\x89PNG"


@pytest.mark.parametrize(
    ("deliveries", "violations", "lost"),
    [
        # seq 1 before seq 0: a violation of first deliveries and of the pass
        ([_dlv(1, 1, 2, 0), _dlv(2, 0, 0, 10)], 2, 0),
        ([_dlv(1, 0, 0, 10)], 0, 1),  # seq 1 never delivered
    ],
)
def test_a_violation_or_a_lost_record_fails_the_run(
    tmp_path: Path, deliveries: list[dict[str, Any]], violations: int, lost: int
) -> None:
    summary = _summary(tmp_path, deliveries)
    assert (summary["violations"], summary["lost"]) == (violations, lost)
    assert summary["ok"] is False


def test_a_run_where_no_gate_held_fails(tmp_path: Path) -> None:
    """The demo's point is a gate holding records back: a run without one says so."""
    summary = _summary(tmp_path, [_dlv(1, 0, 0, 10), _dlv(2, 1, 2, 0)], held=False)
    assert (summary["violations"], summary["lost"]) == (0, 0)
    assert summary["longest_gate_wait_s"] == 0.0
    assert summary["gate_held"] is False and summary["ok"] is False
