"""The README's generated tables (commands, settings) agree with the code."""

from __future__ import annotations

from pathlib import Path
from types import ModuleType

import pytest
from helpers import load_script

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    return load_script("gen_reference")


def test_readme_tables_are_generated_from_the_code() -> None:
    gen = _generator()
    stale = [str(p.relative_to(ROOT)) for p in gen.stale()]
    assert stale == [], f"{stale} differ from the code: run python scripts/gen_reference.py"


def test_every_setting_and_command_is_in_the_readme_and_every_flag_in_docs() -> None:
    from ordered.cli import build_parser
    from ordered.settings import SETTINGS

    gen = _generator()
    readme = (ROOT / "README.md").read_text()
    cli_doc = (ROOT / "docs" / "cli.md").read_text()
    for s in SETTINGS:
        assert f"`{s.key}`" in readme, s.key
    commands = list(gen._commands(build_parser(), ("ordered",)))
    assert {" ".join(path) for path, _t, _s in commands} >= {"ordered demo", "ordered cluster env"}
    for path, _text, _sub in commands:
        assert f"`{' '.join(path)}" in readme, path
    flags = {
        flag
        for _path, _text, sub in commands
        for action in sub._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    }
    assert sorted(f for f in flags if f not in cli_doc) == []


def test_the_check_fails_on_a_drifted_readme(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gen = _generator()
    readme = tmp_path / "README.md"
    text = (ROOT / "README.md").read_text()
    readme.write_text(text.replace("`ordered.zookeeper.root`", "`ordered.zk.root`"))
    monkeypatch.setattr(gen, "README", readme)
    assert gen.stale() == [readme]
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0 and gen.stale() == []
    assert readme.read_text() == text
