"""``ordered jvm-jar``: the jar's absolute path, or one clear error (exit 1) naming setup."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ordered.cli import jvm as cli_jvm
from ordered.cli import main
from ordered.cli.jvm import JAR_ENV, SPARK_LINES, JarNotBuiltError, jar_path, spark_jar_path


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


@pytest.mark.parametrize(
    ("line", "name"),
    [("3.5", "ordered-kafka-spark-3.5.jar"), ("4", "ordered-kafka-spark.jar")],
)
def test_spark_prints_the_jvm_spark_sources_jar_of_that_line(
    line: str,
    name: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    target = tmp_path / "jvm-spark" / "target"
    target.mkdir(parents=True)
    for jar in ("ordered-kafka-spark-3.5.jar", "ordered-kafka-spark.jar"):
        (target / jar).write_bytes(b"PK")
    plugins = tmp_path / "ordered-kafka-jvm.jar"
    plugins.write_bytes(b"PK")
    monkeypatch.setattr(cli_jvm, "_checkout", lambda: tmp_path)
    monkeypatch.setenv(JAR_ENV, str(plugins))
    assert main(["jvm-jar", "--spark", line]) == 0
    assert capsys.readouterr().out == f"{target / name}\n"
    assert main(["jvm-jar", "--spark", line, "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload == {
        "jar": str(target / name),
        "spark": line,
        "provider": "org.orderedkafka.spark.OrderedKafkaProvider",
        "format": "ordered-kafka-jvm",
    }
    # Without the flag: the plugins' jar, as before.
    assert main(["jvm-jar"]) == 0
    assert capsys.readouterr().out == f"{plugins}\n"


def test_spark_jar_not_built_is_one_error_naming_the_line_and_setup(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(cli_jvm, "_checkout", lambda: tmp_path)
    assert main(["jvm-jar", "--spark", "3.5"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "Spark 3.5" in captured.err and "ordered-kafka-spark-3.5.jar" in captured.err
    assert "bash scripts/setup.sh" in captured.err
    with pytest.raises(ValueError, match=r"3\.5"):
        spark_jar_path("3.4")


def test_an_unknown_spark_line_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["jvm-jar", "--spark", "3.4"]) == 2
    assert "3.5" in capsys.readouterr().err


def test_the_spark_jars_are_the_checkouts_maven_targets() -> None:
    root = Path(__file__).resolve().parents[2]
    for line, name in SPARK_LINES.items():
        expected = root / "jvm-spark" / "target" / name
        if expected.is_file():
            assert spark_jar_path(line) == expected
        else:
            with pytest.raises(JarNotBuiltError, match=r"scripts/setup\.sh"):
                spark_jar_path(line)
