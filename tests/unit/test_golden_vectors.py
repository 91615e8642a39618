"""vectors/linear_hash.json agrees with linear_hash, entry by entry, and with its generator.

Every entry is recomputed here from its inputs with the public ``linear_hash`` API (not
by running the generator again), so a port reading the same file checks the same facts.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from functools import cache
from types import ModuleType
from typing import Any

import mmh3
import pytest
from helpers import load_script

from linear_hash import (
    ALGORITHMS,
    EpochInfo,
    GateEvaluator,
    Layout,
    blockers,
    children,
    hash_key,
    key_flow,
    murmur2,
    parent,
    partition_for,
    route,
    sources,
)


@cache
def _generator() -> ModuleType:
    return load_script("golden_vectors")


@cache
def _text() -> str:
    text: str = _generator().load_text()
    return text


def _vectors() -> dict[str, Any]:
    loaded: dict[str, Any] = _generator().load()
    return loaded


# --- one checker per section: each raises AssertionError naming the entry ---------------


def check_hashes(entries: list[dict[str, Any]]) -> None:
    for i, e in enumerate(entries):
        raw = bytes.fromhex(e["key"])
        forms: list[str | bytes] = [raw]
        if e["text"] is not None:
            assert e["text"].encode("utf-8") == raw, f"hashes[{i}]: text is not the key"
            forms.append(e["text"])
        for key in forms:
            got = {
                "murmur3": hash_key(key, "murmur3"),
                "murmur2": hash_key(key, "murmur2"),
                "murmur2_signed": murmur2(key),
                "crc32": hash_key(key, "crc32"),
            }
            want = {name: e[name] for name in got}
            assert got == want, f"hashes[{i}] ({e['key'][:40]}): {got} != {want}"
        assert e["murmur3"] == mmh3.hash(raw, 0, signed=False), f"hashes[{i}]"
        assert e["murmur2"] == e["murmur2_signed"] & 0x7FFFFFFF, f"hashes[{i}]"


def check_routes(entries: list[dict[str, Any]]) -> None:
    for i, e in enumerate(entries):
        key = bytes.fromhex(e["key"])
        n, u, algorithm = e["initial"], e["active"], e["algorithm"]
        layout = Layout(n, u)
        got = (
            hash_key(key, algorithm),
            partition_for(key, n, u, algorithm),
            layout.partition_for(key, algorithm),
            route(e["hash"], n, u),
            layout.route(e["hash"]),
        )
        want = (e["hash"], e["partition"], e["partition"], e["partition"], e["partition"])
        assert got == want, f"routes[{i}] {e}: computed {got}"


def check_tree(entries: list[dict[str, Any]]) -> None:
    for i, e in enumerate(entries):
        n, u, p = e["initial"], e["active"], e["partition"]
        got = (parent(p, n), children(p, n, u), route(p, n, u))
        want = (e["parent"], e["children"], e["route_of_partition"])
        assert got == want, f"tree[{i}] {e}: computed {got}"


def check_flows(entries: list[dict[str, Any]]) -> None:
    for i, e in enumerate(entries):
        n, a, b = e["initial"], e["from"], e["to"]
        edges = [list(x) for x in key_flow(n, a, b)]
        assert edges == e["edges"], f"flows[{i}] ({n}, {a} -> {b}): edges {edges}"
        assert e["sources"].keys() == e["blockers"].keys(), f"flows[{i}]"
        for p in e["sources"]:
            got = (sources(int(p), n, a, b), blockers(int(p), n, a, b))
            want = (e["sources"][p], e["blockers"][p])
            assert got == want, f"flows[{i}] ({n}, {a} -> {b}) partition {p}: {got} != {want}"


def check_gates(entries: list[dict[str, Any]]) -> None:
    for i, e in enumerate(entries):
        history: list[EpochInfo] = _generator().epochs_from_json(e["epochs"])
        assert [x.to_active for x in history] == e["actives"], f"gates[{i}] actives"
        if e["name"].startswith("simulated"):
            for x in history[1:]:
                want_edges = key_flow(e["initial"], e["actives"][x.epoch - 1], x.to_active)
                assert list(x.edges) == want_edges, f"gates[{i}] epoch {x.epoch} edges"
        view = _generator().view_from_json(e)
        for c in e["checks"]:
            p, o = c["partition"], c["offset"]
            got = {
                "may_deliver": GateEvaluator(history).may_deliver(p, o, view),
                "waiting_on": [
                    [w.partition, w.offset, w.epoch]
                    for w in GateEvaluator(history).waiting_on(p, o, view)
                ],
                "required_partitions": sorted(GateEvaluator(history).required_partitions(p, o)),
            }
            want = {k: c[k] for k in got}
            assert got == want, f"gates[{i}] ({e['name']}) at ({p}, {o}): {got} != {want}"
            assert got["may_deliver"] == (got["waiting_on"] == []), f"gates[{i}] at ({p}, {o})"


CHECKERS: dict[str, Callable[[list[dict[str, Any]]], None]] = {
    "hashes": check_hashes,
    "routes": check_routes,
    "tree": check_tree,
    "flows": check_flows,
    "gates": check_gates,
}


# --- tests ---------------------------------------------------------------------------------


def test_the_file_is_what_the_generator_writes() -> None:
    gen = _generator()
    assert gen.main(["--check"]) == 0, "run python scripts/golden_vectors.py"
    assert _text() == gen.render(gen.build())
    assert len(_text().encode()) < 3 * 1024 * 1024


@pytest.mark.parametrize("section", sorted(CHECKERS))
def test_every_entry_agrees_with_linear_hash(section: str) -> None:
    vectors = _vectors()
    assert vectors["version"] == 1
    assert vectors["generator"] == "scripts/golden_vectors.py"
    assert vectors[section], f"{section} is empty"
    CHECKERS[section](vectors[section])


def test_one_changed_route_fails() -> None:
    vectors = _vectors()
    changed = copy.deepcopy(vectors)
    entry = changed["routes"][len(changed["routes"]) // 2]
    entry["partition"] = (entry["partition"] + 1) % entry["active"]
    with pytest.raises(AssertionError, match=r"routes\[\d+\]"):
        check_routes(changed["routes"])
    found = _generator().first_difference(vectors, changed)
    assert found is not None and found.startswith("$.routes[") and "partition" in found


def test_one_changed_gate_decision_fails() -> None:
    changed = copy.deepcopy(_vectors()["gates"])
    check = next(c for e in changed for c in e["checks"] if not c["may_deliver"])
    check["may_deliver"] = True
    with pytest.raises(AssertionError, match=r"gates\[\d+\]"):
        check_gates(changed)


def test_the_vectors_cover_what_a_port_gets_wrong() -> None:
    vectors = _vectors()
    raws = [bytes.fromhex(e["key"]) for e in vectors["hashes"]]
    lengths = {len(r) for r in raws}
    assert set(range(8)) <= lengths and {1024, 65536} <= lengths
    assert any(b"\x00" in r for r in raws)
    texts = [e["text"] for e in vectors["hashes"] if e["text"] is not None]
    assert {"ключ", "鍵", "🔑"} <= set(texts)

    def invalid_utf8(raw: bytes) -> bool:
        try:
            raw.decode("utf-8")
        except UnicodeDecodeError:
            return True
        return False

    assert any(invalid_utf8(r) for r in raws)
    assert len(raws) >= 300
    # Negative signed murmur2 values (toPositive is then visible).
    assert any(e["murmur2_signed"] < 0 for e in vectors["hashes"])
    layouts = {(e["initial"], e["active"], e["algorithm"]) for e in vectors["routes"]}
    for algorithm in ALGORITHMS:
        for n in range(1, 9):
            assert {(n, u, algorithm) for u in range(n, 4 * n + 1)} <= layouts
        for n, u in ((1, 100), (1, 257), (1, 1000), (1, 10000), (3, 257), (3, 10000)):
            assert (n, u, algorithm) in layouts
    # Grows and shrinks; pending epochs; open and closed gates.
    flows = {(e["from"] < e["to"], e["from"] > e["to"]) for e in vectors["flows"]}
    assert {(True, False), (False, True)} <= flows
    checks = [c for e in vectors["gates"] for c in e["checks"]]
    assert {c["may_deliver"] for c in checks} == {True, False}
    assert any(w[:2] == [-1, -1] for c in checks for w in c["waiting_on"])
    assert any(not x["sealed"] for e in vectors["gates"] for x in e["epochs"])
