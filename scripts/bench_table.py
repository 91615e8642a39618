"""Write (or check) the README's performance table from ``ordered bench``'s JSON.

Usage: ``.venv/bin/python scripts/bench_table.py [--check] [--json FILE] [--add NAME FILE]``.
The table sits between ``<!-- bench-table:begin -->`` and ``<!-- bench-table:end -->`` in
README.md and is generated from ``benchmarks/results/bench.json`` when it exists, else
``benchmarks/results/bench-quick.json``; ``--check`` exits 1 when the README differs.
``--add NAME FILE`` first puts the rows of benchmark ``NAME`` read from its own JSON
``FILE`` (``benchmarks/bench_NAME.py`` run alone) into that summary, in place of its old
rows (after the consumer's for a new one).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from ordered.cli.bench import render_markdown, summarise

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


def add_rows(path: Path, name: str, source: Path) -> None:
    """Replace benchmark ``name``'s rows in the summary at ``path`` with those of ``source``."""
    summary = json.loads(path.read_text())
    data = json.loads(source.read_text())
    new = summarise({name: data})
    rows = summary["rows"]
    places = [i for i, r in enumerate(rows) if r["source"] in (name, "consumer")]
    at = places[-1] + 1 if places else len(rows)
    kept = [r for r in rows[:at] if r["source"] != name]
    summary["rows"] = kept + new + [r for r in rows[at:] if r["source"] != name]
    summary["dates"][name] = data.get("date")
    if name not in summary["benchmarks"]:
        summary["benchmarks"].append(name)
    path.write_text(json.dumps(summary, indent=2, sort_keys=True) + "\n")


def current(text: str) -> str | None:
    """The README's block between the markers, markers included (``None``: no block)."""
    if BEGIN not in text or END not in text:
        return None
    start = text.index(BEGIN)
    return text[start : text.index(END, start) + len(END)]


def main(argv: list[str] | None = None) -> int:
    """Write or check the table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only compare; exit 1 on a difference")
    parser.add_argument("--json", type=Path, default=None, help="the summary to render")
    parser.add_argument(
        "--add",
        nargs=2,
        metavar=("NAME", "FILE"),
        default=None,
        help="first put benchmark NAME's rows from its JSON FILE into the summary",
    )
    args = parser.parse_args(argv)
    if args.add is not None:
        add_rows(args.json or default_json(), args.add[0], Path(args.add[1]))
    wanted = table_from(args.json or default_json())
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
