"""Writes which scenarios cite which rule: the README's table and the spec's last column.

``vectors/consumer/README.md`` gets a table rule -> scenarios between its two markers;
``docs/consumer-protocol.md``'s rule table gets the scenario names in its "Conformance"
column (``none`` for a rule no scenario cites). Both are derived from the scenarios' own
``rules`` lists only.

Usage: ``python tests/unit/conformance/coverage.py [--check]``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve()
REPO = HERE.parents[3]
VECTORS = REPO / "vectors" / "consumer"
README = VECTORS / "README.md"
SPEC = REPO / "docs" / "consumer-protocol.md"
BEGIN = "<!-- coverage: begin (tests/unit/conformance/coverage.py writes this) -->"
END = "<!-- coverage: end -->"
_ROW = re.compile(r"^\|\s*(C-[A-Z]+-[0-9]+)\s*\|")


def cited() -> dict[str, list[str]]:
    """Rule id -> the scenarios citing it (in file order)."""
    out: dict[str, list[str]] = {}
    for path in sorted(VECTORS.glob("*.json")):
        if path.name == "schema.json":
            continue
        for s in json.loads(path.read_text())["scenarios"]:
            for rule in s["rules"]:
                out.setdefault(rule, []).append(s["name"])
    return out


def rules_in_spec(text: str) -> list[str]:
    return [m.group(1) for line in text.splitlines() if (m := _ROW.match(line))]


def _names(names: list[str], limit: int = 6) -> str:
    if not names:
        return "none"
    shown = ", ".join(names[:limit])
    return shown + (f" (+{len(names) - limit} more)" if len(names) > limit else "")


def spec_text(text: str, by_rule: dict[str, list[str]]) -> str:
    lines = []
    for line in text.splitlines(keepends=True):
        m = _ROW.match(line)
        if m is not None:
            cells = line.rstrip("\n").rstrip().strip("|").split("|")
            cells[-1] = " " + _names(by_rule.get(m.group(1), [])) + " "
            line = "|" + "|".join(cells) + "|\n"
        lines.append(line)
    return "".join(lines)


def readme_text(text: str, rules: list[str], by_rule: dict[str, list[str]]) -> str:
    covered = sum(1 for r in rules if by_rule.get(r))
    table = [
        BEGIN,
        "",
        f"{covered} of {len(rules)} rules are cited by at least one scenario.",
        "",
        "| Rule | Scenarios |",
        "|---|---|",
    ]
    table += [f"| {r} | {_names(by_rule.get(r, []), limit=100)} |" for r in rules]
    table += ["", END]
    head, _, rest = text.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return head + "\n".join(table) + tail


def main(argv: list[str]) -> int:
    by_rule = cited()
    spec = SPEC.read_text(encoding="utf-8")
    rules = rules_in_spec(spec)
    unknown = sorted(set(by_rule) - set(rules))
    if unknown:
        print("scenarios cite unknown rules: " + ", ".join(unknown))
        return 1
    new_spec = spec_text(spec, by_rule)
    readme = README.read_text(encoding="utf-8")
    new_readme = readme_text(readme, rules, by_rule)
    if "--check" in argv:
        stale = [
            p.name
            for p, old, new in ((SPEC, spec, new_spec), (README, readme, new_readme))
            if old != new
        ]
        if stale:
            print(f"not current: {', '.join(stale)}; run {HERE.relative_to(REPO)}")
            return 1
        return 0
    SPEC.write_text(new_spec, encoding="utf-8")
    README.write_text(new_readme, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
