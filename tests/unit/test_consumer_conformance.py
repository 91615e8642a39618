"""The consumer conformance scenarios (``vectors/consumer/``) on the real ``OrderedConsumer``.

One test per scenario (the driver: ``tests/unit/conformance/driver.py``); a scenario
with a ``disagreement`` is a strict xfail (the code does not meet the spec there; see its
text). A meta-test flips one expectation of every scenario in memory and requires the
driver to report a mismatch, so a scenario cannot pass by checking nothing. The
generated file and the coverage tables are kept current; the files follow their schema.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from conformance import coverage, generate
from conformance.driver import VECTORS, load_all, run

SCENARIOS = load_all()


def _param(s: dict[str, Any]) -> Any:
    marks = []
    if "disagreement" in s:
        marks.append(pytest.mark.xfail(reason=s["disagreement"], strict=True))
    return pytest.param(s, id=s["name"], marks=marks)


@pytest.mark.parametrize("scenario", [_param(s) for s in SCENARIOS])
def test_scenario(scenario: dict[str, Any]) -> None:
    mismatches = run(scenario)
    assert not mismatches, f"{scenario['_file']}: {scenario['name']}:\n" + "\n".join(mismatches)


def test_there_are_enough_scenarios_and_their_names_are_unique() -> None:
    names = [s["name"] for s in SCENARIOS]
    assert len(names) >= 40
    assert len(set(names)) == len(names), "duplicate scenario names"


# --- the meta-test: one expectation changed is a mismatch -----------------------------


def _flip(expect: dict[str, Any]) -> str | None:
    """Change one checked value of ``expect`` in place; the key changed (None: none could be)."""
    for key in ("records", "events", "zk_writes", "held", "client_paused"):
        if key in expect:
            bogus: Any = {"event": "on_lost", "partitions": [["zz", 99]]}
            if key in ("records", "held"):
                bogus = ["zz", 99, 99]
            elif key == "client_paused":
                bogus = ["zz", 99]
            elif key == "zk_writes":
                bogus = {"event": "rewind_marker", "topic": "zz"}
            expect[key] = [*expect[key], bogus]
            return key
    for key in ("stored", "committed", "positions"):
        if expect.get(key):
            first = next(iter(expect[key]))
            old = expect[key][first]
            expect[key][first] = 12345 if old is None else old + 1
            return key
    if "waits" in expect:
        first = next(iter(expect["waits"]))
        expect["waits"][first] = [*(expect["waits"][first] or []), [99, 99, 99]]
        return "waits"
    if "raises" in expect:
        expect["raises"] = not expect["raises"]
        return "raises"
    return None


def mutated(scenario: dict[str, Any]) -> tuple[dict[str, Any], str]:
    """``scenario`` with its first flippable expectation changed, and where."""
    s = copy.deepcopy(scenario)
    if s.get("construct_raises"):
        s["construct_raises"] = False
        return s, "construct_raises"
    for i, step in enumerate(s["steps"]):
        key = _flip(step.get("expect", {}))
        if key is not None:
            return s, f"step {i} {key}"
    raise AssertionError(f"{scenario['name']} has no expectation to flip")


@pytest.mark.parametrize("scenario", [pytest.param(s, id=s["name"]) for s in SCENARIOS])
def test_a_changed_expectation_is_reported(scenario: dict[str, Any]) -> None:
    changed, where = mutated(scenario)
    assert run(changed), f"{scenario['name']}: {where} changed and the driver saw no mismatch"


def test_an_expectation_flipped_deep_in_a_scenario_is_reported() -> None:
    """Not only the first expectation: the last one of a long scenario, too."""
    s = copy.deepcopy(
        next(x for x in SCENARIOS if x["name"] == "a-replay-closes-the-destinations-gate-again")
    )
    last = [step for step in s["steps"] if "expect" in step][-1]
    last["expect"]["events"] = last["expect"]["events"][:-1]  # drop the assigned callback
    found = run(s)
    assert len(found) == 1 and "events" in found[0], found


# --- the files ---------------------------------------------------------------------------


def test_every_file_follows_the_schema() -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema = json.loads((VECTORS / "schema.json").read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(schema)
    for path in sorted(VECTORS.glob("*.json")):
        if path.name == "schema.json":
            continue
        errors = [
            f"{e.json_path}: {e.message}"
            for e in validator.iter_errors(json.loads(path.read_text()))
        ]
        assert not errors, f"{path.name}:\n" + "\n".join(errors[:10])
    bad = copy.deepcopy(json.loads((VECTORS / "commits.json").read_text()))
    bad["scenarios"][0]["steps"][0]["expect"] = {"recrods": []}
    assert list(validator.iter_errors(bad)), "the schema accepts a misspelt expectation"


def test_scenarios_cite_only_rules_of_the_spec() -> None:
    rules = set(coverage.rules_in_spec(coverage.SPEC.read_text(encoding="utf-8")))
    cited = {r for s in SCENARIOS for r in s["rules"]}
    assert cited <= rules, sorted(cited - rules)


def test_the_generated_scenarios_are_current() -> None:
    assert generate.main(["--check"]) == 0, "run python tests/unit/conformance/generate.py"


def test_the_coverage_tables_are_current() -> None:
    assert coverage.main(["--check"]) == 0, "run python tests/unit/conformance/coverage.py"
