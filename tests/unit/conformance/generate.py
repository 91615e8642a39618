"""Writes ``vectors/consumer/gate-vectors.json``: the gates golden vectors as scenarios.

The one generated file of the scenarios, and an honest generator: its expectations are
not the consumer's output but the pure gate rule's, as ``vectors/linear_hash.json``
records it (``may_deliver`` and ``waiting_on``; C-GATE-1 says a consumer's answers MUST
equal them). Each check of an entry becomes a few steps on one consumer of the entry's
group: assign only the checked partition at the checked offset, fetch one record there,
consume; expect the record given (``may_deliver``) or held at it with the vector's
``waiting_on``. Then unassign, and put the group's committed offsets back as the entry
has them (the placement may have committed a rewound source, C-REPLAY-4).

Only the checked partition is assigned: the group's progress on a partition this
consumer owns is capped to its position (C-REPLAY-2), which the pure vectors do not
model. Checks whose answer that cap can change are left out (listed in the output as
``skipped``).

Usage: ``python tests/unit/conformance/generate.py [--check]``.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve()
REPO = HERE.parents[3]
SOURCE = REPO / "vectors" / "linear_hash.json"
TARGET = REPO / "vectors" / "consumer" / "gate-vectors.json"

# Entries turned into scenarios: every named entry, and a few of the simulated ones.
SIMULATED = ("simulated 0", "simulated 4", "simulated 9", "simulated 16")

RULES = {
    "expansion": ["C-GATE-1", "C-GATE-5", "C-HOLD-2"],
    "records below": ["C-GATE-1", "C-GATE-8"],
    "a pending epoch": ["C-GATE-1", "C-GATE-4"],
    "log start": ["C-GATE-1", "C-GATE-6", "C-TRIM-3"],
    "the hole": ["C-GATE-1", "C-GATE-2"],
    "recursion": ["C-GATE-1", "C-GATE-3"],
    "a missing boundary": ["C-GATE-1", "C-GATE-4"],
    "simulated": ["C-GATE-1", "C-GATE-2", "C-GATE-3"],
}


def _slug(name: str) -> str:
    out = "".join(c if c.isalnum() else "-" for c in name.lower())
    while "--" in out:
        out = out.replace("--", "-")
    return "gates-" + out.strip("-")


def _rules(name: str) -> list[str]:
    for prefix, rules in RULES.items():
        if name.startswith(prefix):
            return rules
    return ["C-GATE-1"]


def _history(entry: dict[str, Any]) -> list[dict[str, Any]]:
    out = []
    active = entry["initial"]
    for e in entry["epochs"]:
        to_active = e["to_active"] or active
        out.append(
            {
                "epoch": e["epoch"],
                "from_active": active,
                "to_active": to_active,
                "edges": e["edges"],
                "state": "sealed" if e["sealed"] else "pending",
                "boundaries": e["boundaries"],
            }
        )
        active = to_active
    return out


def _capped(check: dict[str, Any], entry: dict[str, Any]) -> bool:
    """Whether the consumer's own-position cap (C-REPLAY-2) may change this check's answer."""
    p = check["partition"]
    return (
        str(p) in entry["committed"]
        and entry["committed"][str(p)] > check["offset"]
        and (p in check["required_partitions"])
    )


def scenario(entry: dict[str, Any]) -> tuple[dict[str, Any], list[int]]:
    steps: list[dict[str, Any]] = []
    skipped = []
    committed = [
        ["t", int(p), o] for p, o in sorted(entry["committed"].items(), key=lambda x: int(x[0]))
    ]
    for i, check in enumerate(entry["checks"]):
        if _capped(check, entry):
            skipped.append(i)
            continue
        p, o = check["partition"], check["offset"]
        held = [] if check["may_deliver"] else [["t", p, o]]
        expect: dict[str, Any] = {
            "records": [["t", p, o]] if check["may_deliver"] else [],
            "held": held,
        }
        if not check["may_deliver"]:
            expect["waits"] = {f"t/{p}": sorted(check["waiting_on"])}
        steps += [
            {"do": "assign", "partitions": [["t", p, o]]},
            {"do": "fetched", "records": [{"topic": "t", "partition": p, "offsets": [o]}]},
            {"do": "consume", "max": 10, "timeout_ms": 50, "expect": expect},
            {"do": "unassign"},
        ]
        if committed:
            steps.append({"do": "group_commit", "offsets": committed})
    active = max([entry["initial"], *(e["to_active"] or 0 for e in entry["epochs"])])
    parts = {int(k) for k in entry["committed"]} | {int(k) for k in entry["log_start"]}
    physical = max(
        [active, *(p + 1 for p in parts), *(c["partition"] + 1 for c in entry["checks"])]
    )
    out = {
        "name": _slug(entry["name"]),
        "rules": _rules(entry["name"]),
        "origin": "generated",
        "description": f"The gates vector {entry['name']!r}: each check on a consumer "
        "assigned only the checked partition, at the checked offset.",
        "topics": {"t": {"initial": entry["initial"], "physical": physical}},
        "history": {"t": _history(entry)},
        "committed": {"t": dict(entry["committed"])} if entry["committed"] else {},
        "log_start": {"t": dict(entry["log_start"])} if entry["log_start"] else {},
        "steps": steps,
    }
    return out, skipped


def build() -> dict[str, Any]:
    gates = json.loads(SOURCE.read_text())["gates"]
    scenarios = []
    skipped: dict[str, list[int]] = {}
    for entry in gates:
        if entry["name"].startswith("simulated") and entry["name"] not in SIMULATED:
            continue
        s, left_out = scenario(entry)
        scenarios.append(s)
        if left_out:
            skipped[s["name"]] = left_out
    return {
        "version": 1,
        "generator": "tests/unit/conformance/generate.py",
        "source": "vectors/linear_hash.json (gates)",
        "skipped": skipped,
        "scenarios": scenarios,
    }


def render(doc: dict[str, Any]) -> str:
    """JSON with one step per line (diffs stay readable)."""
    head = {k: v for k, v in doc.items() if k != "scenarios"}
    lines = ["{"]
    for k, v in head.items():
        lines.append(f"  {json.dumps(k)}: {json.dumps(v, sort_keys=True)},")
    lines.append('  "scenarios": [')
    for i, s in enumerate(doc["scenarios"]):
        lines.append("    {")
        fields = [k for k in s if k != "steps"]
        for k in fields:
            lines.append(f"      {json.dumps(k)}: {json.dumps(s[k], sort_keys=True)},")
        lines.append('      "steps": [')
        for j, step in enumerate(s["steps"]):
            comma = "," if j < len(s["steps"]) - 1 else ""
            lines.append(f"        {json.dumps(step, sort_keys=True)}{comma}")
        lines.append("      ]")
        lines.append("    }" + ("," if i < len(doc["scenarios"]) - 1 else ""))
    lines.append("  ]")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str]) -> int:
    text = render(build())
    if "--check" in argv:
        if not TARGET.exists() or TARGET.read_text() != text:
            print(f"{TARGET} is not current: run {HERE.relative_to(REPO)}")
            return 1
        return 0
    TARGET.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
