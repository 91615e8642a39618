"""The shape of the code: no import circle, no Python file over 1,000 lines (product,
benchmarks, scripts, tests), the kernel contract naming every service folder.

A module is sized by what it holds; the cap only catches a file that holds several
concerns. The import graph is grimp's (the library import-linter runs on), built from the source.
"""

from __future__ import annotations

import subprocess
import tomllib
from pathlib import Path

import grimp

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("linear_hash", "coordinator", "ordered", "spark_source")
MAX_LINES = 1000
# Beyond the product packages, every other folder of Python the repository tracks.
CHECKED_AREAS = ("benchmarks", "scripts", "tests")


def import_circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    counter = 0
    for start in sorted(edges):
        if start in index:
            continue
        work: list[tuple[str, list[str]]] = [(start, sorted(edges[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, todo = work[-1]
            if todo:
                nxt = todo.pop()
                if nxt not in index:
                    index[nxt] = low[nxt] = counter
                    counter += 1
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, sorted(edges.get(nxt, ()))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    circles.append(sorted(component))
    return circles


def test_the_circle_finder_finds_a_circle() -> None:
    assert import_circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_circles({"a": {"b"}, "b": set(), "c": {"c"}}) == []


def test_no_import_circle_among_the_projects_modules() -> None:
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    edges = {
        module: {m for m in graph.find_modules_directly_imported_by(module) if m in graph.modules}
        for module in graph.modules
    }
    assert import_circles(edges) == []


def tracked_python_files() -> list[Path]:
    """Every Python file git tracks in the repository (product, benchmarks, scripts, tests)."""
    listing = subprocess.run(
        ["git", "ls-files", "-z", "--", "*.py"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout.decode("utf-8")
    return [ROOT / name for name in listing.split("\0") if name and (ROOT / name).exists()]


def test_no_module_over_1000_lines() -> None:
    sizes = {
        str(path.relative_to(ROOT)): len(path.read_text(encoding="utf-8").splitlines())
        for path in tracked_python_files()
    }
    # Every area is in the listing, so a narrowed or failed listing cannot pass by omission.
    areas = {name.split("/", 1)[0] for name in sizes}
    assert areas >= {*PACKAGES, *CHECKED_AREAS}, sorted(areas)
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_test_modules_have_unique_names() -> None:
    # pytest imports test files by basename (rootdir-relative, no packages): two files of
    # one name stop the whole collection with "import file mismatch".
    tests = [p for p in tracked_python_files() if p.name.startswith("test_") and "tests" in p.parts]
    seen: dict[str, list[str]] = {}
    for path in tests:
        seen.setdefault(path.name, []).append(str(path.relative_to(ROOT)))
    assert len(tests) > 100
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}


def test_the_kernel_contracts_name_every_service_folder() -> None:
    # A new folder of coordinator/ is service unless it is the kernel: it must be in the
    # forbidden lists, or the clients could import it unnoticed.
    folders = {
        f"coordinator.{path.parent.name}"
        for path in (ROOT / "coordinator").glob("*/__init__.py")
        if path.parent.name != "kernel"
    }
    loose = sorted(
        path.stem for path in (ROOT / "coordinator").glob("*.py") if path.name != "__init__.py"
    )
    assert loose == [], "every coordinator module lives in a folder (kernel/ or a service one)"
    config = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    contracts = config["tool"]["importlinter"]["contracts"]
    kernel = [c for c in contracts if "coordinator.kernel" in c.get("source_modules", [])]
    clients = [c for c in contracts if "ordered.producer" in c.get("source_modules", [])]
    assert kernel and clients
    service = [
        c for c in clients if any(m.startswith("coordinator.") for m in c["forbidden_modules"])
    ]
    for contract in kernel + service:
        assert set(contract["forbidden_modules"]) == folders, contract["name"]
