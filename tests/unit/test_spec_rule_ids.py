"""docs/consumer-protocol.md: every rule id defined once and listed once in the rule table.

A rule is defined by a list item that starts with its bold id (``- **C-GATE-1.** ...``);
the table at the end has one row per rule (``| C-GATE-1 | statement | module | tests |
conformance |``). Conformance scenarios (``vectors/consumer/``) and other pages cite the
ids, so an id must never name two rules, and the table must list exactly the rules.
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

import pytest

SPEC = Path(__file__).resolve().parents[2] / "docs" / "consumer-protocol.md"

_ID = r"C-[A-Z]+-[0-9]+"
_DEFINED = re.compile(rf"^\s*- \*\*({_ID})\.\*\*", re.MULTILINE)
_ROW = re.compile(rf"^\|\s*({_ID})\s*\|", re.MULTILINE)
_MENTION = re.compile(rf"(?<![A-Za-z0-9-])({_ID})(?![0-9])")
_COLUMNS = 5  # rule, statement, enforced in, tests, conformance


def problems(text: str) -> list[str]:
    """What is wrong with the rule ids of a spec's ``text`` (empty: nothing)."""
    defined = _DEFINED.findall(text)
    rows = _ROW.findall(text)
    found = [
        f"{rule} is defined {n} times" for rule, n in sorted(Counter(defined).items()) if n > 1
    ]
    found += [f"{rule} has {n} table rows" for rule, n in sorted(Counter(rows).items()) if n > 1]
    rows_only, defined_only = set(rows) - set(defined), set(defined) - set(rows)
    found += [f"{rule} is in the table but not defined" for rule in sorted(rows_only)]
    found += [f"{rule} is defined but not in the table" for rule in sorted(defined_only)]
    found += [
        f"{rule} is mentioned but not defined"
        for rule in sorted(set(_MENTION.findall(text)) - set(defined) - set(rows))
    ]
    for line in text.splitlines():
        row = _ROW.match(line)
        if row is not None:
            cells = line.strip().strip("|").split("|")
            if len(cells) != _COLUMNS:
                found.append(f"{row.group(1)}'s row has {len(cells)} cells, not {_COLUMNS}")
    return found


def test_the_spec_defines_each_rule_once_and_lists_it_once() -> None:
    text = SPEC.read_text(encoding="utf-8")
    assert len(_DEFINED.findall(text)) >= 50, "rules not found: has the format changed?"
    found = problems(text)
    assert not found, "docs/consumer-protocol.md:\n" + "\n".join(found)


_GOOD = """
- **C-GATE-1.** A consumer MUST do it.
- **C-GATE-2.** Then this (see C-GATE-1).

| Rule | Statement | Enforced in | Tests | Conformance |
|---|---|---|---|---|
| C-GATE-1 | do it | m.py | t.py | |
| C-GATE-2 | then this | m.py | t.py | |
"""


def test_a_well_formed_text_has_no_problem() -> None:
    assert problems(_GOOD) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (
            lambda t: t.replace("- **C-GATE-2.**", "- **C-GATE-1.**"),
            ["C-GATE-1 is defined 2 times", "C-GATE-2 is in the table but not defined"],
        ),
        (
            lambda t: t + "| C-GATE-1 | again | m.py | t.py | |\n",
            ["C-GATE-1 has 2 table rows"],
        ),
        (
            lambda t: t + "| C-GATE-3 | new | m.py | t.py | |\n",
            ["C-GATE-3 is in the table but not defined"],
        ),
        (
            lambda t: t.replace("| C-GATE-2 | then this | m.py | t.py | |\n", ""),
            ["C-GATE-2 is defined but not in the table"],
        ),
        (
            lambda t: t.replace("(see C-GATE-1)", "(see C-GATE-9)"),
            ["C-GATE-9 is mentioned but not defined"],
        ),
        (
            lambda t: t.replace("| C-GATE-2 | then this | m.py | t.py | |", "| C-GATE-2 | x |"),
            ["C-GATE-2's row has 2 cells, not 5"],
        ),
    ],
    ids=["duplicate", "row twice", "row undefined", "row missing", "unknown mention", "cells"],
)
def test_each_kind_of_problem_is_found(change: object, expected: list[str]) -> None:
    assert callable(change)
    assert problems(change(_GOOD)) == expected
