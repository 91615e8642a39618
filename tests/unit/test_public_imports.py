"""Every import of the project that the README and the docs show still works.

The Python blocks of ``README.md`` and ``docs/*.md`` are what users copy: each
``from <package> import <names>`` and ``import <package>`` of a project package there
must import, and each imported name must exist, whatever module moved inside.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PROJECT = ("ordered", "coordinator", "linear_hash", "spark_source")
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.M | re.S)
_IMPORT = re.compile(r"^(?:from\s+\S+\s+import\s+(?:\([^)]*\)|.*)|import\s+.*)$", re.M)


def _imports(block: str) -> list[ast.stmt]:
    """The import statements of a block; of its import lines when the rest is a sketch."""
    try:
        return [n for n in ast.walk(ast.parse(block)) if isinstance(n, ast.stmt)]
    except SyntaxError:  # ``{..., "key": value}`` and the like: read the imports alone
        return [ast.parse(line).body[0] for line in _IMPORT.findall(block)]


def shown_imports() -> dict[tuple[str, str | None], list[str]]:
    """``(module, name or None)`` -> where the docs show it."""
    found: dict[tuple[str, str | None], list[str]] = {}
    for doc in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        where = str(doc.relative_to(ROOT))
        for block in _BLOCK.findall(doc.read_text(encoding="utf-8")):
            for node in _imports(block):
                if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    if node.module.split(".")[0] in PROJECT:
                        for alias in node.names:
                            found.setdefault((node.module, alias.name), []).append(where)
                elif isinstance(node, ast.Import):
                    for alias in node.names:
                        if alias.name.split(".")[0] in PROJECT:
                            found.setdefault((alias.name, None), []).append(where)
    return found


SHOWN = shown_imports()


def test_the_docs_show_the_client_imports() -> None:
    # The scan itself works: the README's own client import is among what it found.
    assert ("ordered", "OrderedProducer") in SHOWN
    assert ("ordered.hooks", "PrometheusHooks") in SHOWN


@pytest.mark.parametrize(("module", "name"), sorted(SHOWN, key=str), ids=str)
def test_a_shown_import_works(module: str, name: str | None) -> None:
    imported = importlib.import_module(module)
    if name is not None:
        assert hasattr(imported, name), f"{SHOWN[module, name]} show `from {module} import {name}`"
