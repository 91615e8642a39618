"""Write (or check) the README's performance table from ``ordered bench``'s JSON.

Usage: ``.venv/bin/python scripts/bench_table.py [--check] [--json FILE]``. The table
sits between ``<!-- bench-table:begin -->`` and ``<!-- bench-table:end -->`` in
README.md and is generated from ``benchmarks/results/bench.json`` when it exists, else
``benchmarks/results/bench-quick.json``; ``--check`` exits 1 when the README differs.

``--add NAME`` first puts one benchmark's rows into that summary (its
``benchmarks/results/<name>.json``, or ``--from FILE``), replacing the rows it had, and
leaves every other benchmark's rows as they were: the way to refresh one row after
running one benchmark script alone (``ordered bench --only NAME`` writes a summary of
NAME alone).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from ordered.cli.bench import BENCHMARKS, render_markdown, summarise

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
RESULTS = ROOT / "benchmarks" / "results"
BEGIN = "<!-- bench-table:begin -->"
END = "<!-- bench-table:end -->"


def default_json() -> Path:
    """The full run's summary if there is one, else the quick run's."""
    full = RESULTS / "bench.json"
    return full if full.exists() else RESULTS / "bench-quick.json"


def table_from(path: Path) -> str:
    """The Markdown block the README holds for the summary at ``path``."""
    summary = json.loads(path.read_text())
    kind = "ordered bench --quick" if summary["quick"] else "ordered bench"
    dates = sorted(d for d in summary["dates"].values() if d)
    head = (
        f"Generated from `benchmarks/results/{path.name}` (`{kind} --json`, "
        f"{dates[-1][:10] if dates else 'undated'}, {summary['seconds']:.0f} s) by "
        "`scripts/bench_table.py`; ratios are against the baseline measured in the same run."
    )
    return f"{BEGIN}\n{head}\n\n{render_markdown(summary['rows'])}\n{END}"


def current(text: str) -> str | None:
    """The README's block between the markers, markers included (``None``: no block)."""
    if BEGIN not in text or END not in text:
        return None
    start = text.index(BEGIN)
    return text[start : text.index(END, start) + len(END)]


def merge(summary: dict[str, Any], name: str, data: dict[str, Any]) -> dict[str, Any]:
    """``summary`` with benchmark ``name``'s rows taken from its JSON ``data``.

    The rows of ``name`` replace the ones it had (or join the table in the order of
    ``ordered bench``); every other row, and the run's facts, stay as they were.
    """
    order = list(BENCHMARKS)
    rank = {n: i for i, n in enumerate(order)}
    kept = [r for r in summary["rows"] if r.get("source") != name]
    rows = sorted(
        [*kept, *summarise({name: data})],
        key=lambda r: rank.get(r.get("source", ""), len(order)),
    )  # stable: each benchmark's rows keep their own order
    benchmarks = list(summary["benchmarks"])
    if name not in benchmarks:
        benchmarks.append(name)
    dates = {**summary["dates"], name: data.get("date") or data.get("timestamp")}
    return {**summary, "rows": rows, "benchmarks": benchmarks, "dates": dates}


def main(argv: list[str] | None = None) -> int:
    """Write or check the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    parser.add_argument("--json", type=Path, default=None, help="the summary to render")
    parser.add_argument(
        "--add", default=None, metavar="NAME", help="first put benchmark NAME's rows in the summary"
    )
    parser.add_argument(
        "--from",
        dest="source",
        type=Path,
        default=None,
        help="with --add: its JSON (default benchmarks/results/NAME.json)",
    )
    args = parser.parse_args(argv)
    path = args.json or default_json()
    if args.add is not None and not args.check:
        data = json.loads((args.source or RESULTS / f"{args.add}.json").read_text())
        merged = merge(json.loads(path.read_text()), args.add, data)
        path.write_text(json.dumps(merged, indent=2, sort_keys=True) + "\n")
        print(f"{path.name}: rows of {args.add} replaced")
    wanted = table_from(path)
    text = README.read_text()
    found = current(text)
    if found is None:
        print(f"README.md has no {BEGIN} ... {END} block", file=sys.stderr)
        return 1
    if args.check:
        if found != wanted:
            print(
                "README.md's performance table differs from the JSON: run scripts/bench_table.py",
                file=sys.stderr,
            )
            return 1
        return 0
    README.write_text(text.replace(found, wanted))
    print("README.md: performance table written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
