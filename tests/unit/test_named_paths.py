"""Every source path named in prose exists: docs, Python docstrings, Java and C comments.

Cross-language links are prose (a javadoc names the Python module its class ports), so
nothing else notices when a module moves: ten such paths had gone stale after two
rounds of moves. A path counts when its first part is a top-level entry of the checkout
(``coordinator/kernel/zk.py``, ``docs/jvm.md``), or that climbs out of a doc's folder
with ``..``; a pattern
(``tests/integration/test_producer*.py``, ``bench[-quick].json``) or a placeholder
(``<name>``) is not a path.
"""

from __future__ import annotations

import ast
import functools
import os
import re
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

# Parts of the checkout that are not its sources: build outputs and local runs.
_SKIPPED_DIRS = frozenset(
    {"target", "__pycache__", "spark-warehouse", "ordered_kafka.egg-info", "node_modules"}
)

# Named on purpose although absent from a checkout, each for the reason given.
_NOT_IN_A_CHECKOUT = {
    # `ordered bench` without --quick writes it; only the quick run's is committed.
    "benchmarks/results/bench.json": "written by `ordered bench`",
    # A path in confluent-kafka-python's repository (its test suite, run against ours).
    "tests/integration/producer": "confluent-kafka-python's tree",
}

_PATH = re.compile(
    r"(?<![\w./-])((?:\.\./)+[\w.-]+(?:/[\w.-]*)*|[A-Za-z0-9_][\w.-]*(?:/[\w.-]*)+)(.?)"
)
_COMMENT = re.compile(r"/\*.*?\*/|//[^\n]*", re.S)


def _top_level() -> frozenset[str]:
    return frozenset(p.name for p in ROOT.iterdir() if not p.name.startswith("."))


@functools.cache
def _sources() -> tuple[Path, ...]:
    out = []
    for folder, dirs, files in os.walk(ROOT):
        dirs[:] = [d for d in dirs if not d.startswith(".") and d not in _SKIPPED_DIRS]
        out += [
            Path(folder, f) for f in files if f.endswith((".md", ".py", ".java", ".scala", ".c"))
        ]
    return tuple(sorted(out))


def _docstrings(text: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            doc = ast.get_docstring(node, clean=False)
            if doc:
                yield doc


@functools.cache
def _prose(path: Path) -> tuple[str, ...]:
    """The parts of ``path`` written for a reader: a doc whole, else its docs or comments."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".md":
        return (text,)
    if path.suffix == ".py":
        return tuple(_docstrings(text))
    return tuple(_COMMENT.findall(text))


def named_paths(text: str, top: frozenset[str]) -> Iterator[str]:
    """The repository paths ``text`` names (see the module's docstring)."""
    for match in _PATH.finditer(text):
        path, after = match.group(1).rstrip("."), match.group(2)
        first = path.split("/", 1)[0]
        if first not in top and first != "..":
            continue
        if after in ("*", "[", "<", "{"):
            continue  # a pattern or a placeholder, not a path
        if "target" in path.split("/"):
            continue  # Maven's build output, there once `ordered jvm-jar` has run
        yield path


def _missing() -> list[str]:
    top = _top_level()
    out = []
    for source in _sources():
        for prose in _prose(source):
            for path in named_paths(prose, top):
                base = source.parent if path.startswith("..") else ROOT
                if path not in _NOT_IN_A_CHECKOUT and not (base / path).exists():
                    out.append(f"{source.relative_to(ROOT)}: {path}")
    return sorted(set(out))


def test_every_named_path_exists() -> None:
    missing = _missing()
    assert missing == [], "paths named in prose that do not exist:\n" + "\n".join(missing)


def test_every_exception_is_still_named() -> None:
    # An exception nobody names any more would let that path go stale unseen.
    top = _top_level()
    named = {p for s in _sources() for prose in _prose(s) for p in named_paths(prose, top)}
    assert sorted(set(_NOT_IN_A_CHECKOUT) - named) == []


def test_what_counts_as_a_path() -> None:
    top = frozenset({"coordinator", "docs", "tests"})
    text = (
        "{@code coordinator/store/records.py}, (`docs/jvm.md#security`), ../README.md, "
        "tests/integration/test_producer*.py, docs/<page>.md, org/orderedkafka/Hashing.java, "
        "coordinator/target/x.jar, "
        "ordered.zookeeper.connect, coordinator/kernel/zk.py."
    )
    assert list(named_paths(text, top)) == [
        "coordinator/store/records.py",
        "docs/jvm.md",
        "../README.md",
        "coordinator/kernel/zk.py",
    ]
