"""librdkafka's pause and resume come from one place: the pause arbiter.

A gate hold and the application's own pause share librdkafka's one pause flag per
partition; each states its wish to :class:`~ordered.consumer.state.PauseArbiter`,
which alone calls the wrapped consumer's
``pause``/``resume``. This test reads the source with :mod:`ast` and fails on any other
module of ``ordered/`` that calls them (or takes them as a value to call later).
"""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
ARBITER = Path("ordered/consumer/state.py")
METHODS = frozenset({"pause", "resume"})


def _names_a_consumer(node: ast.expr) -> bool:
    """``consumer``, ``self._consumer``, ``core.consumer``... (how ordered/ names it)."""
    if isinstance(node, ast.Name):
        return "consumer" in node.id.lower()
    if isinstance(node, ast.Attribute):
        return "consumer" in node.attr.lower()
    return False


def _holds_librdkafka_consumer(tree: ast.Module, path: Path) -> bool:
    """The consumer package gets the wrapped consumer; elsewhere, who imports confluent's."""
    if path.parts[:2] == ("ordered", "consumer"):
        return True
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module == "confluent_kafka":
            imported = any(alias.name == "Consumer" for alias in node.names)
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            imported = node.attr == "Consumer" and node.value.id == "confluent_kafka"
        else:
            continue
        if imported:
            return True
    return False


def _is_getattr(node: ast.Call) -> bool:
    """``getattr(x, name, ...)``."""
    return isinstance(node.func, ast.Name) and node.func.id == "getattr" and len(node.args) >= 2


def pause_calls(source: str, path: Path) -> list[str]:
    """Where ``source`` reaches a consumer's ``pause``/``resume``: ``path:line .name``."""
    tree = ast.parse(source, str(path))
    if not _holds_librdkafka_consumer(tree, path):
        return []
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr in METHODS:
            if _names_a_consumer(node.value):
                found.append(f"{path}:{node.lineno} .{node.attr}")
        elif isinstance(node, ast.Call) and _is_getattr(node):
            name = node.args[1]
            if isinstance(name, ast.Constant) and name.value in METHODS:
                found.append(f"{path}:{node.lineno} getattr {name.value}")
    return found


def all_pause_calls(root: Path) -> dict[Path, list[str]]:
    """Every module of ``root/ordered`` that reaches them, with where."""
    out = {}
    for file in sorted((root / "ordered").rglob("*.py")):
        rel = file.relative_to(root)
        found = pause_calls(file.read_text(encoding="utf-8"), rel)
        if found:
            out[rel] = found
    return out


def test_only_the_arbiter_pauses_or_resumes_the_wrapped_consumer() -> None:
    found = all_pause_calls(ROOT)
    others = {path: where for path, where in found.items() if path != ARBITER}
    assert others == {}, "pause/resume of the wrapped consumer outside the arbiter"
    # The arbiter itself is seen, so the search is not blind.
    assert sorted(w.rsplit(" ", 1)[1] for w in found.get(ARBITER, [])) == [".pause", ".resume"]


def test_the_search_sees_each_way_of_reaching_them() -> None:
    path = Path("ordered/consumer/any.py")
    source = """
class A:
    def f(self, core, tps):
        self._consumer.pause(tps)
        core.consumer.resume(tps)
        self._call(self._consumer.pause, tps)
        getattr(self.consumer, "resume")(tps)
        consumer.pause(tps)
        change.pause  # a gate's Change, not a consumer
        self._owner.resume(tps)  # not named a consumer
"""
    assert sorted(pause_calls(source, path)) == [
        f"{path}:4 .pause",
        f"{path}:5 .resume",
        f"{path}:6 .pause",
        f"{path}:7 getattr resume",
        f"{path}:8 .pause",
    ]


def test_outside_the_consumer_package_only_a_holder_of_confluents_consumer_counts() -> None:
    """``OrderedDeserializingConsumer`` pauses its ``OrderedConsumer``: the arbiter's way in."""
    call = "def f(self, tps):\n    self._consumer.pause(tps)\n"
    assert pause_calls(call, Path("ordered/deserializing.py")) == []
    holder = "from confluent_kafka import Consumer\n" + call
    assert pause_calls(holder, Path("ordered/other.py")) == ["ordered/other.py:3 .pause"]
