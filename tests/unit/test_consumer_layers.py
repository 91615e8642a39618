"""The ``ordered.consumer`` layers contract (pyproject.toml) names every module of the package.

import-linter only checks the modules a layers contract lists: a module left out may
import any other part, circles included. This test fails when a module is added to
``ordered/consumer/`` without a place in the layers.
"""

from __future__ import annotations

import pkgutil
import tomllib
from pathlib import Path

import ordered.consumer

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def layered_modules() -> list[str]:
    """Every module named in the layers of the ``ordered.consumer`` contract."""
    config = tomllib.loads(PYPROJECT.read_text())
    contracts = config["tool"]["importlinter"]["contracts"]
    mine = [c for c in contracts if c.get("containers") == ["ordered.consumer"]]
    assert len(mine) == 1, "exactly one layers contract for ordered.consumer"
    assert mine[0]["type"] == "layers"
    names: list[str] = []
    for layer in mine[0]["layers"]:
        names += [name.strip() for name in layer.replace(":", "|").split("|")]
    return names


def test_every_consumer_module_has_a_layer() -> None:
    modules = {info.name for info in pkgutil.iter_modules(ordered.consumer.__path__)}
    layered = layered_modules()
    assert len(layered) == len(set(layered)), "a module is listed twice"
    assert modules - set(layered) == set(), "modules outside the layers contract"
    assert set(layered) - modules == set(), "layers name modules that do not exist"
