"""The generated reference (README tables, docs/reference.md) agrees with the code."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]


def _generator() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "gen_reference", ROOT / "scripts" / "gen_reference.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def test_readme_and_reference_are_generated_from_the_code() -> None:
    gen = _generator()
    stale = [str(p.relative_to(ROOT)) for p in gen.stale()]
    assert stale == [], f"{stale} differ from the code: run python scripts/gen_reference.py"


def test_every_setting_and_every_flag_is_in_the_reference() -> None:
    from ordered.cli import build_parser
    from ordered.settings import SETTINGS

    gen = _generator()
    readme = (ROOT / "README.md").read_text()
    reference = (ROOT / "docs" / "reference.md").read_text()
    for s in SETTINGS:
        assert f"`{s.key}`" in readme and f"`{s.key}`" in reference, s.key
    flags = {
        flag
        for _path, _text, sub in gen._commands(build_parser(), ("ordered",))
        for action in sub._actions
        for flag in action.option_strings
        if flag.startswith("--") and flag != "--help"
    }
    assert "--duration" in flags and "--zookeeper" in flags
    missing = sorted(f for f in flags if f"`{f}" not in reference)
    assert missing == []


def test_the_check_fails_on_a_drifted_readme(tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    gen = _generator()
    drifted = (
        (ROOT / "README.md").read_text().replace("`ordered.zookeeper.root`", "`ordered.zk.root`")
    )
    readme = tmp_path / "README.md"
    readme.write_text(drifted)
    reference = tmp_path / "reference.md"
    reference.write_text(gen.reference())
    monkeypatch.setattr(gen, "README", readme)
    monkeypatch.setattr(gen, "REFERENCE", reference)
    assert gen.stale() == [readme]
    assert gen.main(["--check"]) == 1
    assert gen.main([]) == 0 and gen.stale() == []
