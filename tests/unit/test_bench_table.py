"""The README's performance table is the one generated from ``ordered bench``'s JSON."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from helpers import load_script

from ordered.cli.bench import render_markdown, summarise

ROOT = Path(__file__).resolve().parents[2]


def _script() -> Any:
    return load_script("bench_table")


def test_readme_table_matches_the_json() -> None:
    script = _script()
    path = script.default_json()
    assert path.exists(), f"{path} is missing: run ordered bench --quick --json"
    found = script.current((ROOT / "README.md").read_text())
    assert found is not None, "README.md has no bench-table block"
    assert found == script.table_from(path), "run .venv/bin/python scripts/bench_table.py"


def test_a_changed_figure_is_caught(tmp_path: Path) -> None:
    script = _script()
    summary = json.loads(script.default_json().read_text())
    assert script.main(["--check"]) == 0
    summary["rows"][0]["value"] = "changed"
    other = tmp_path / script.default_json().name
    other.write_text(json.dumps(summary))
    assert script.main(["--check", "--json", str(other)]) == 1


def test_summarise_reads_each_benchmark() -> None:
    rows = summarise(
        {
            "linear_hash": {
                "results": {"bytes": {"layout_ns": 100, "bare_ns": 50, "layout_ratio": 2.0}}
            },
            "scale": {
                "barrier": [
                    {"producers": 50, "median_s": 0.8, "max_s": 1.1, "rounds": 3},
                ]
            },
        }
    )
    assert [r["source"] for r in rows] == ["linear_hash", "scale"]
    assert rows[0]["ratio"] == 2.0
    assert rows[1]["goal"] == "<= 1 s at 50" and rows[1]["value"] == 0.8
    table = render_markdown(rows)
    assert table.count("\n") == len(rows) + 1
