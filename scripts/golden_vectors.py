"""Generate ``vectors/linear_hash.json``: golden vectors any port of ``linear_hash`` must match.

The file is language-neutral JSON (sorted keys, 2-space indent, one object) written from
the Python reference implementation, ``linear_hash``. A port (the JVM partitioner, a
future client) reads it and recomputes every entry; ``tests/unit/test_golden_vectors.py``
does the same for Python, so the code and the vectors cannot drift apart.

Sections (every key is given as the hex of its bytes; a ``str`` key is its UTF-8):

* ``hashes``: per key, ``murmur3`` (``mmh3.hash(key, 0, signed=False)``), ``murmur2``
  (``hash_key(key, "murmur2")``, Kafka's ``Utils.toPositive(Utils.murmur2(key))``),
  ``murmur2_signed`` (Kafka's signed ``Utils.murmur2``) and ``crc32``; ``text`` is the
  ``str`` key, or ``null`` when the key was bytes.
* ``routes``: ``partition_for(key, initial, active, algorithm)`` with its ``hash``.
* ``tree``: ``parent(p, initial)``, ``children(p, initial, active)`` and
  ``route(p, initial, active)`` (``route_of_partition``: where ``p``'s keys live).
* ``flows``: ``key_flow(initial, from, to)`` and, for the partitions listed,
  ``sources`` and ``blockers``.
* ``gates``: decisions of ``GateEvaluator`` (the gate rule of ``docs/consumer.md``).
  One entry is one topic history and one view of the group's progress::

      {"name": str, "initial": N,
       "actives": [U_0, U_1, ...],           # active count of epoch i (epoch numbers 0..)
       "epochs": [{"epoch": e, "sealed": bool, "to_active": U_e,
                   "edges": [[a, b], ...],   # key_flow(N, U_{e-1}, U_e), except for the
                                             # hand-built entries that test odd histories
                   "boundaries": {"<p>": offset}}, ...],
       "committed": {"<p>": offset},         # absent partition: no committed offset (None)
       "log_start": {"<p>": offset},         # absent partition: log start 0
       "checks": [{"partition": p, "offset": o,
                   "may_deliver": bool,      # GateEvaluator(epochs).may_deliver(p, o, view)
                   "waiting_on": [[partition, offset, epoch], ...],   # .waiting_on(...)
                   "required_partitions": [...]}, ...]}             # .required_partitions

  Every check is decided by a FRESH evaluator built from ``epochs`` (no cache of gates
  opened by an earlier check), so each check stands alone. ``waiting_on`` is sorted;
  ``[-1, -1, e]`` is a pending epoch ``e``, ``[a, -1, e]`` a boundary of ``a`` missing
  from epoch ``e``'s record. ``required_partitions`` is sorted ascending.

Usage: ``python scripts/golden_vectors.py`` rewrites the file; ``--check`` only compares
and exits 1 naming the first difference.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import mmh3  # noqa: E402

from linear_hash import (  # noqa: E402 (the checkout first on the path)
    ALGORITHMS,
    EpochInfo,
    GateEvaluator,
    OffsetMaps,
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

VECTORS = ROOT / "vectors" / "linear_hash.json"
VERSION = 1
GENERATOR = "scripts/golden_vectors.py"
SEED = 253

# Deep chains: long split histories where the level L is large.
DEEP = ((1, 100), (1, 257), (1, 1000), (1, 10000), (3, 100), (3, 257), (3, 1000), (3, 10000))


# --- keys ---------------------------------------------------------------------------------


def _keys() -> list[str | bytes]:
    """Every key of the ``hashes`` section, in a fixed order."""
    rng = random.Random(SEED)
    keys: list[str | bytes] = ["", b""]
    # Every murmur tail length (and more than one 4-byte block).
    keys += [bytes(range(1, n + 1)) for n in range(1, 9)]
    keys += ["a", "ab", "abc", "abcd", "abcde", "abcdef", "abcdefg"]
    keys += ["key", "order-42", "customer-1", "hello world", "The quick brown fox"]
    keys += ["ключ", "鍵", "🔑", "naïve café", "ключ-🔑-鍵"]
    keys += [b"\xff\xfe", b"\x80", b"\xc3\x28", b"\xff" * 7]
    keys += [b"\x00", b"\x00\x00\x00\x00", b"a\x00b", "nul\x00inside"]
    keys += [b"\xff" * 4, b"\x80\x00\x00\x00"]
    keys += [bytes(rng.randrange(256) for _ in range(1024)), "k" * 1024]
    keys += [bytes(rng.randrange(256) for _ in range(65536))]
    for _ in range(300):
        n = rng.choice((1, 2, 3, 4, 5, 8, 12, 16, 23, 32, 64))
        if rng.random() < 0.5:
            keys.append(bytes(rng.randrange(256) for _ in range(n)))
        else:
            keys.append(f"user-{rng.randrange(10**9)}")
    return keys


def _raw(key: str | bytes) -> bytes:
    return key.encode("utf-8") if isinstance(key, str) else key


def _hashes(keys: list[str | bytes]) -> list[dict[str, Any]]:
    return [
        {
            "key": _raw(k).hex(),
            "text": k if isinstance(k, str) else None,
            "murmur3": mmh3.hash(_raw(k), 0, signed=False),
            "murmur2": hash_key(k, "murmur2"),
            "murmur2_signed": murmur2(k),
            "crc32": hash_key(k, "crc32"),
        }
        for k in keys
    ]


# --- routes, tree, flows --------------------------------------------------------------------


def _layouts() -> Iterator[tuple[int, int]]:
    for initial in range(1, 9):
        top = 8 * initial if initial <= 4 else 4 * initial
        for active in range(initial, top + 1):
            yield initial, active
    yield from DEEP


def _routes(keys: list[str | bytes]) -> list[dict[str, Any]]:
    rng = random.Random(SEED + 1)
    short = [k for k in keys if len(_raw(k)) <= 64]
    out: list[dict[str, Any]] = []
    for initial, active in _layouts():
        deep = (initial, active) in DEEP
        for algorithm in ALGORITHMS:
            picked = rng.sample(short, 24 if deep else 4)
            for k in picked:
                out.append(
                    {
                        "algorithm": algorithm,
                        "initial": initial,
                        "active": active,
                        "key": _raw(k).hex(),
                        "hash": hash_key(k, algorithm),
                        "partition": partition_for(k, initial, active, algorithm),
                    }
                )
    return out


def _tree_entry(initial: int, active: int, p: int) -> dict[str, Any]:
    return {
        "initial": initial,
        "active": active,
        "partition": p,
        "parent": parent(p, initial),
        "children": children(p, initial, active),
        "route_of_partition": route(p, initial, active),
    }


def _tree() -> list[dict[str, Any]]:
    rng = random.Random(SEED + 2)
    out: list[dict[str, Any]] = []
    for initial in range(1, 9):
        for active in range(initial, 3 * initial + 1):
            # Partitions past active too: route_of_partition is then an ancestor.
            out.extend(_tree_entry(initial, active, p) for p in range(2 * active))
    for initial, active in DEEP:
        picks = {0, 1, initial, active - 1, active, 2 * active - 1, 4 * active}
        picks |= {rng.randrange(4 * active) for _ in range(12)}
        out.extend(_tree_entry(initial, active, p) for p in sorted(picks))
    return out


def _flow_entry(initial: int, a: int, b: int, partitions: list[int]) -> dict[str, Any]:
    return {
        "initial": initial,
        "from": a,
        "to": b,
        "edges": [list(e) for e in key_flow(initial, a, b)],
        "sources": {str(p): sources(p, initial, a, b) for p in partitions},
        "blockers": {str(p): blockers(p, initial, a, b) for p in partitions},
    }


def _flows() -> list[dict[str, Any]]:
    rng = random.Random(SEED + 3)
    out: list[dict[str, Any]] = []
    for initial in range(1, 9):
        top = 3 * initial if initial <= 3 else 2 * initial
        counts = range(initial, top + 1)
        pairs = [(a, b) for a in counts for b in counts]
        if initial > 3:
            pairs = sorted(rng.sample(pairs, 12))
        for a, b in pairs:
            out.append(_flow_entry(initial, a, b, list(range(max(a, b)))))
    # Deep chains: a sample of partitions, including the ends of the changed range.
    for initial, a, b in ((1, 100, 257), (1, 257, 100), (3, 1000, 257), (3, 257, 1000)):
        lo, hi = min(a, b), max(a, b)
        picks = {0, 1, initial - 1, lo - 1, lo, hi - 1}
        picks |= {rng.randrange(hi) for _ in range(10)}
        out.append(_flow_entry(initial, a, b, sorted(picks)))
    out.append(_flow_entry(1, 1000, 1, [0]))
    return out


# --- gates ------------------------------------------------------------------------------------


def _epoch_json(info: EpochInfo) -> dict[str, Any]:
    return {
        "epoch": info.epoch,
        "sealed": info.sealed,
        "to_active": info.to_active,
        "edges": [list(e) for e in info.edges],
        "boundaries": {str(p): o for p, o in sorted(info.boundaries.items())},
    }


def load() -> dict[str, Any]:
    """The vectors as the file holds them (the one reader of the file: the test uses it)."""
    loaded: dict[str, Any] = json.loads(load_text())
    return loaded


def load_text() -> str:
    """The text of :data:`VECTORS`."""
    return VECTORS.read_text(encoding="utf-8")


def view_from_json(entry: dict[str, Any]) -> OffsetMaps:
    """The group's progress of a ``gates`` entry (its ``committed`` and ``log_start``)."""
    return OffsetMaps(
        {int(p): o for p, o in entry["committed"].items()},
        {int(p): o for p, o in entry["log_start"].items()},
    )


def epochs_from_json(epochs: list[dict[str, Any]]) -> list[EpochInfo]:
    """The ``EpochInfo`` history of a ``gates`` entry (the test reads it with this too)."""
    return [
        EpochInfo(
            e["epoch"],
            e["sealed"],
            tuple((a, b) for a, b in e["edges"]),
            {int(p): o for p, o in e["boundaries"].items()},
            e["to_active"],
        )
        for e in epochs
    ]


def decide(
    history: list[EpochInfo], committed: dict[int, int], starts: dict[int, int], p: int, o: int
) -> dict[str, Any]:
    """One check of a ``gates`` entry, each part by a fresh evaluator."""
    view = OffsetMaps(dict(committed), dict(starts))
    return {
        "partition": p,
        "offset": o,
        "may_deliver": GateEvaluator(history).may_deliver(p, o, view),
        "waiting_on": [
            [w.partition, w.offset, w.epoch] for w in GateEvaluator(history).waiting_on(p, o, view)
        ],
        "required_partitions": sorted(GateEvaluator(history).required_partitions(p, o)),
    }


def _gate_entry(
    name: str,
    initial: int,
    actives: list[int],
    history: list[EpochInfo],
    committed: dict[int, int],
    starts: dict[int, int],
    checks: list[tuple[int, int]],
) -> dict[str, Any]:
    return {
        "name": name,
        "initial": initial,
        "actives": actives,
        "epochs": [_epoch_json(e) for e in history],
        "committed": {str(p): o for p, o in sorted(committed.items())},
        "log_start": {str(p): o for p, o in sorted(starts.items())},
        "checks": [decide(history, committed, starts, p, o) for p, o in checks],
    }


def _hand_built() -> list[dict[str, Any]]:
    """Histories of ``tests/unit/test_gates.py``: each names one rule of the gate."""

    def ep(
        n: int, edges: list[tuple[int, int]], bounds: dict[int, int], to: int, sealed: bool = True
    ) -> EpochInfo:
        return EpochInfo(n, sealed, tuple(edges), bounds, to)

    out: list[dict[str, Any]] = []
    expansion = [ep(0, [], {}, 1), ep(1, [(0, 1)], {1: 0, 0: 50}, 2)]
    for c in (None, 49, 50, 51):
        committed = {} if c is None else {0: c}
        out.append(
            _gate_entry(
                f"expansion, 0 committed at {c}",
                1,
                [1, 2],
                expansion,
                committed,
                {},
                [(1, 0), (1, 5), (0, 60)],
            )
        )
    below = [ep(0, [], {}, 3), ep(1, [(2, 0)], {0: 100, 2: 7}, 2)]
    out.append(
        _gate_entry(
            "records below the boundary flow freely",
            2,
            [3, 2],
            below,
            {},
            {},
            [(0, 99), (0, 100), (2, 7)],
        )
    )
    pending = [ep(0, [], {}, 1), ep(1, [(0, 1)], {1: 3}, 2, sealed=False)]
    out.append(
        _gate_entry(
            "a pending epoch blocks receivers at their boundary",
            1,
            [1, 2],
            pending,
            {0: 10**6},
            {},
            [(1, 2), (1, 3), (0, 10**5)],
        )
    )
    start = [ep(0, [], {}, 4), ep(1, [(3, 1)], {1: 0, 3: 40}, 2)]
    for s in (39, 40):
        out.append(
            _gate_entry(
                f"log start {s} of 3 counts as progress", 2, [4, 2], start, {}, {3: s}, [(1, 0)]
            )
        )
    hole = [
        ep(0, [], {}, 4),
        ep(1, [(3, 1)], {3: 5, 1: 10}, 3),
        ep(2, [(2, 0)], {2: 7, 0: 20}, 2),
        ep(3, [(1, 0)], {1: 10, 0: 30}, 1),
    ]
    for c3 in (0, 5):
        out.append(
            _gate_entry(
                f"the hole of docs/consumer.md, 3 committed at {c3}",
                1,
                [4, 3, 2, 1],
                hole,
                {1: 10, 2: 7, 3: c3},
                {},
                [(0, 19), (0, 20), (0, 29), (0, 30), (1, 10)],
            )
        )
    cycle = [ep(0, [], {}, 1), ep(1, [(0, 1)], {1: 0, 0: 10}, 2), ep(2, [(1, 0)], {0: 10, 1: 4}, 1)]
    for c1 in (None, 4):
        committed = {0: 10} if c1 is None else {0: 10, 1: c1}
        out.append(
            _gate_entry(
                f"recursion follows earlier epochs only, 1 committed at {c1}",
                1,
                [1, 2, 1],
                cycle,
                committed,
                {},
                [(1, 0), (0, 9), (0, 10)],
            )
        )
    missing = [ep(0, [], {}, 1), ep(1, [(0, 1)], {}, 2)]
    out.append(
        _gate_entry(
            "a missing boundary blocks conservatively",
            1,
            [1, 2],
            missing,
            {0: 10**9},
            {},
            [(1, 0), (1, 1)],
        )
    )
    return out


def _simulated(rng: random.Random, n: int) -> dict[str, Any]:
    """A random history of grows and shrinks with realistic boundaries, and one view."""
    initial = rng.randint(1, 4)
    actives = [initial * rng.randint(1, 2)]
    for _ in range(rng.randint(1, 5)):
        while True:
            nxt = rng.randint(initial, 4 * initial)
            if nxt != actives[-1]:
                break
        actives.append(nxt)
    sizes: dict[int, int] = {}

    def write() -> None:
        for p in range(max(actives)):
            if rng.random() < 0.6:
                sizes[p] = sizes.get(p, 0) + rng.randint(0, 6)

    history = [EpochInfo(0, True, (), {}, actives[0])]
    last = len(actives) - 1
    pending_last = rng.random() < 0.3
    for e in range(1, len(actives)):
        write()
        edges = tuple(key_flow(initial, actives[e - 1], actives[e]))
        bounds = {b: sizes.get(b, 0) for _a, b in edges}
        sealed = not (e == last and pending_last)
        if sealed:
            write()
            bounds.update({a: sizes.get(a, 0) for a, _b in edges})
        history.append(EpochInfo(e, sealed, edges, bounds, actives[e]))
    write()
    committed: dict[int, int] = {}
    starts: dict[int, int] = {}
    marks: dict[int, set[int]] = {}
    for info in history:
        for p, o in info.boundaries.items():
            marks.setdefault(p, set()).add(o)
    for p in range(max(actives)):
        end = sizes.get(p, 0)
        options = [end, *marks.get(p, ()), *(m - 1 for m in marks.get(p, ()) if m > 0)]
        roll = rng.random()
        if roll < 0.15:
            continue  # nothing committed
        committed[p] = rng.choice(options) if roll < 0.85 else rng.randint(0, end)
        if rng.random() < 0.1:
            starts[p] = rng.choice(options)
    checks: set[tuple[int, int]] = set()
    for p in range(max(actives)):
        offsets = {0, sizes.get(p, 0)}
        for m in marks.get(p, ()):
            offsets |= {m, max(m - 1, 0)}
        checks |= {(p, o) for o in offsets}
    return _gate_entry(
        f"simulated {n}", initial, actives, history, committed, starts, sorted(checks)
    )


def _gates() -> list[dict[str, Any]]:
    rng = random.Random(SEED + 4)
    return _hand_built() + [_simulated(rng, n) for n in range(40)]


# --- the file -------------------------------------------------------------------------------


def build() -> dict[str, Any]:
    """The whole vectors object, from the code."""
    keys = _keys()
    return {
        "version": VERSION,
        "generator": GENERATOR,
        "hashes": _hashes(keys),
        "routes": _routes(keys),
        "tree": _tree(),
        "flows": _flows(),
        "gates": _gates(),
    }


def render(vectors: dict[str, Any]) -> str:
    """The file's text: sorted keys, 2-space indent, a final newline."""
    return json.dumps(vectors, indent=2, sort_keys=True) + "\n"


def first_difference(expected: Any, actual: Any, path: str = "$") -> str | None:
    """Name the first place where two JSON values differ, ``None`` when they agree."""
    if type(expected) is not type(actual):
        return f"{path}: expected {expected!r:.80}, found {actual!r:.80}"
    if isinstance(expected, dict):
        for key in sorted(expected.keys() | actual.keys()):
            if key not in actual:
                return f"{path}.{key}: missing from the file"
            if key not in expected:
                return f"{path}.{key}: not produced by the code"
            found = first_difference(expected[key], actual[key], f"{path}.{key}")
            if found:
                return found
        return None
    if isinstance(expected, list):
        for i, (e, a) in enumerate(zip(expected, actual, strict=False)):
            found = first_difference(e, a, f"{path}[{i}]")
            if found:
                return found
        if len(expected) != len(actual):
            return f"{path}: expected {len(expected)} items, found {len(actual)}"
        return None
    if expected != actual:
        return f"{path}: expected {expected!r:.80}, found {actual!r:.80}"
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--check",
        action="store_true",
        help="compare the committed file with the code; exit 1 on a difference",
    )
    args = parser.parse_args(argv)
    vectors = build()
    if args.check:
        if not VECTORS.exists():
            print(f"{VECTORS.relative_to(ROOT)} is missing", file=sys.stderr)
            return 1
        text = load_text()
        found = first_difference(vectors, json.loads(text))
        if found is None and text != render(vectors):
            found = "same values, different formatting (run scripts/golden_vectors.py)"
        if found:
            print(f"{VECTORS.relative_to(ROOT)} differs from the code: {found}", file=sys.stderr)
            return 1
        return 0
    VECTORS.parent.mkdir(exist_ok=True)
    VECTORS.write_text(render(vectors), encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
