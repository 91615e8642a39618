"""``ordered jvm-jar``: the jar's absolute path, or one clear error (exit 1) naming setup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ordered.cli import main
from ordered.cli.jvm import JAR_ENV, JarNotBuiltError, jar_path


def test_prints_the_absolute_path_of_the_built_jar(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    jar = tmp_path / "ordered-kafka-jvm.jar"
    jar.write_bytes(b"PK")
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv(JAR_ENV, "ordered-kafka-jvm.jar")  # relative: printed absolute
    assert main(["jvm-jar"]) == 0
    assert capsys.readouterr().out == f"{jar}\n"
    assert main(["jvm-jar", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["jar"] == str(jar)
    assert payload["partitioner"] == "org.orderedkafka.OrderedPartitioner"
    assert payload["interceptor"] == "org.orderedkafka.OrderedProducerInterceptor"


def test_a_missing_jar_is_one_error_naming_setup_and_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv(JAR_ENV, str(tmp_path / "absent.jar"))
    assert main(["jvm-jar"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "bash scripts/setup.sh" in captured.err and "absent.jar" in captured.err
    assert len(captured.err.strip().splitlines()) == 1
    assert main(["jvm-jar", "--json"]) == 1
    error = json.loads(capsys.readouterr().out)["error"]
    assert error["kind"] == "JarNotBuiltError" and "scripts/setup.sh" in error["message"]


def test_the_default_is_the_checkouts_maven_target(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(JAR_ENV, raising=False)
    root = Path(__file__).resolve().parents[2]
    expected = root / "jvm" / "target" / "ordered-kafka-jvm.jar"
    if expected.is_file():
        assert jar_path() == expected
    else:
        with pytest.raises(JarNotBuiltError, match=r"scripts/setup\.sh") as info:
            jar_path()
        assert str(expected) in str(info.value)
