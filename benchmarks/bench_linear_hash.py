"""Benchmark: ns per ``partition_for`` call against a bare ``mmh3.hash(key) % n`` loop.

Not a test. Run as ``.venv/bin/python benchmarks/bench_linear_hash.py``; prints a table
and writes ``benchmarks/results/linear_hash.json``. Every variant runs over the same
keys in the same process, interleaved, best of several repeats, so the ratios are
comparable even on a noisy machine.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import json
import platform
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import mmh3

from linear_hash import Layout, partition_for

RESULTS = Path(__file__).resolve().parent / "results" / "linear_hash.json"

INITIAL = 12
ACTIVE = 40  # L = 1, S = 16: both moduli are exercised.


def make_keys(count: int, seed: int) -> tuple[list[str], list[bytes]]:
    """Return the same ``count`` keys as ``str`` and as ``bytes``."""
    rng = random.Random(seed)
    as_str = [f"user-{rng.randrange(10**12)}" for _ in range(count)]
    return as_str, [k.encode() for k in as_str]


def bare(keys: Sequence[str | bytes]) -> None:
    """The floor: mmh3.hash(key) % n, no function of ours in the loop."""
    h = mmh3.hash
    n = ACTIVE
    for k in keys:
        h(k) % n


def _wrapper(key: str | bytes) -> int:
    return mmh3.hash(key, 0, False) % ACTIVE


def wrapper_floor(keys: Sequence[str | bytes]) -> None:
    """Reference only: the cost of any Python-level function around mmh3.hash."""
    f = _wrapper
    for k in keys:
        f(k)


def module_function(keys: Sequence[str | bytes]) -> None:
    """``linear_hash.partition_for(key, initial, active)``."""
    pf = partition_for
    initial, active = INITIAL, ACTIVE
    for k in keys:
        pf(k, initial, active)


def layout_method(keys: Sequence[str | bytes]) -> None:
    """``Layout.partition_for(key)``."""
    pf = Layout(INITIAL, ACTIVE).partition_for
    for k in keys:
        pf(k)


VARIANTS: dict[str, Callable[[Sequence[str | bytes]], None]] = {
    "bare mmh3.hash(key) % n": bare,
    "partition_for(key, initial, active)": module_function,
    "Layout.partition_for(key)": layout_method,
    "(reference) def f(key): mmh3.hash % n": wrapper_floor,
}


def measure(keys: Sequence[str | bytes], repeats: int) -> dict[str, float]:
    """Best ns per key for every variant, repeats interleaved."""
    best = dict.fromkeys(VARIANTS, float("inf"))
    for fn in VARIANTS.values():  # warm up (specialising interpreter, caches)
        fn(keys)
    gc_was_enabled = gc.isenabled()
    gc.disable()
    try:
        for _ in range(repeats):
            for name, fn in VARIANTS.items():
                t0 = time.perf_counter_ns()
                fn(keys)
                best[name] = min(best[name], (time.perf_counter_ns() - t0) / len(keys))
    finally:
        if gc_was_enabled:
            gc.enable()
    return best


def main(argv: Sequence[str] | None = None) -> int:
    """Run the benchmark, print a table, write the JSON result."""
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--keys", type=int, default=120_000)
    parser.add_argument("--repeats", type=int, default=25)
    parser.add_argument("--seed", type=int, default=253)
    parser.add_argument("--output", type=Path, default=RESULTS)
    args = parser.parse_args(argv)

    str_keys, bytes_keys = make_keys(args.keys, args.seed)
    results: dict[str, dict[str, float]] = {}
    for kind, keys in (("str", str_keys), ("bytes", bytes_keys)):
        best = measure(keys, args.repeats)
        floor = best["bare mmh3.hash(key) % n"]
        results[kind] = {
            "bare_ns": round(floor, 1),
            "module_ns": round(best["partition_for(key, initial, active)"], 1),
            "layout_ns": round(best["Layout.partition_for(key)"], 1),
            "module_ratio": round(best["partition_for(key, initial, active)"] / floor, 2),
            "layout_ratio": round(best["Layout.partition_for(key)"] / floor, 2),
            "wrapper_floor_ns": round(best["(reference) def f(key): mmh3.hash % n"], 1),
            "wrapper_floor_ratio": round(best["(reference) def f(key): mmh3.hash % n"] / floor, 2),
        }

    print(
        f"linear_hash partition_for, {args.keys} keys, best of {args.repeats}, "
        f"initial={INITIAL} active={ACTIVE}, Python {platform.python_version()}"
    )
    print(f"{'keys':<6} {'variant':<38} {'ns/call':>8} {'x bare':>7}")
    for kind, r in results.items():
        print(f"{kind:<6} {'bare mmh3.hash(key) % n':<38} {r['bare_ns']:>8.1f} {1:>7.2f}")
        print(
            f"{kind:<6} {'partition_for(key, initial, active)':<38} "
            f"{r['module_ns']:>8.1f} {r['module_ratio']:>7.2f}"
        )
        print(
            f"{kind:<6} {'Layout.partition_for(key)':<38} "
            f"{r['layout_ns']:>8.1f} {r['layout_ratio']:>7.2f}"
        )
        print(
            f"{kind:<6} {'(reference) def f(key): mmh3.hash % n':<38} "
            f"{r['wrapper_floor_ns']:>8.1f} {r['wrapper_floor_ratio']:>7.2f}"
        )

    record = {
        "benchmark": "linear_hash.partition_for",
        "initial": INITIAL,
        "active": ACTIVE,
        "keys": args.keys,
        "repeats": args.repeats,
        "seed": args.seed,
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "machine": platform.machine(),
        "mmh3": getattr(mmh3, "__version__", None) or _dist_version("mmh3"),
        "timestamp": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        "results": results,
        "goal": "ratio <= 2.0 against the bare loop",
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(record, indent=2, sort_keys=True) + "\n")
    print(f"wrote {args.output}")
    return 0


def _dist_version(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


if __name__ == "__main__":
    sys.exit(main())
