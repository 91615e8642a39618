"""The ``ordered`` parser on its own: version, help, exit codes of bad command lines.

Every case here fails while the command line is parsed, before any server is asked, so
it runs in-process without a cluster.
"""

from __future__ import annotations

import argparse
import json

import pytest

from ordered.cli import EXIT_CODES, build_parser, main, version
from ordered.cli.options import MAX_PARTITIONS, HelpFormatter, topic_name, zookeeper_connect

NO_SERVERS = ["--zookeeper", "127.0.0.1:1", "--bootstrap-servers", "127.0.0.1:1"]


def test_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    out = capsys.readouterr().out
    assert out.strip() == f"ordered {version()}" and version() != "unknown"


def _subparsers(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    found: dict[str, argparse.ArgumentParser] = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                found[f"{parser.prog} {name}".removeprefix("ordered ")] = child
                found.update(_subparsers(child))
    return found


def test_every_help_shows_defaults_and_the_exit_codes() -> None:
    commands = _subparsers(build_parser())
    assert {"list", "describe", "expand", "shrink", "unadopt", "coordinator"} <= set(commands)
    for name, parser in commands.items():
        text = " ".join(parser.format_help().split())
        assert "exit codes: 0 success" in text and "2 usage error" in text, name
        for action in parser._actions:
            if action.default in (None, False, argparse.SUPPRESS) or not action.option_strings:
                continue
            # Each flag with a default says so, either by argparse or in its own words.
            shown = HelpFormatter(prog=name)._get_help_string(action) or ""
            assert "default" in shown, (name, action.option_strings, shown)
        if name in ("expand", "shrink"):
            assert "(default: 60.0)" in text and "(default: /ordered)" in text
    assert "(default: 1.0)" in " ".join(commands["coordinator"].format_help().split())
    assert set(EXIT_CODES) == {0, 1, 2, 130}


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["expand", "t", "--to", "1000000"], f"must be <= {MAX_PARTITIONS}"),
        (["expand", "t", "--to", "0"], "must be >= 1"),
        (["describe", ""], "must not be empty"),
        (["describe", "t", "--zookeeper", "garbage:::99"], "bad ZooKeeper host"),
        (["describe", "t", "--zookeeper", "h:99999"], "bad ZooKeeper port"),
        (["describe", "t", "--kafka-timeout", "0.001"], "between 0.01 and 300"),
        (["describe", "t", "--group", "g", "--all-groups"], "not allowed with"),
        (["cluster", "up", "--kafka-port", "0"], "between 1 and 65535"),
        (["trim", "t", "--timeout-ms", "0"], ">= 1"),
        (["nosuchcommand"], "invalid choice"),
    ],
)
def test_bad_command_lines_exit_2_without_traceback(
    argv: list[str], message: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_json_usage_errors_are_json_on_both_streams(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["expand", "t", "--to", "x", "--json"]) == 2
    out, err = capsys.readouterr()
    assert json.loads(out)["error"]["kind"] == "UsageError"
    lines = err.strip().splitlines()
    assert lines and all(json.loads(line)["level"] == "error" for line in lines)


def test_no_server_configured_is_a_usage_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("ORDERED_ZOOKEEPER_CONNECT", "")
    monkeypatch.setenv("ORDERED_BOOTSTRAP_SERVERS", "")
    monkeypatch.setenv("ORDERED_CLUSTER_DIR", str(tmp_path))
    assert main(["list"]) == 2
    assert "no ZooKeeper to talk to" in capsys.readouterr().err
    monkeypatch.setenv("ORDERED_ZOOKEEPER_CONNECT", "garbage:::1")
    monkeypatch.setenv("ORDERED_BOOTSTRAP_SERVERS", "127.0.0.1:1")
    assert main(["list"]) == 2
    assert "$ORDERED_ZOOKEEPER_CONNECT: bad ZooKeeper host" in capsys.readouterr().err


def test_an_unexpected_error_is_one_line_exit_1(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from ordered.cli import listing

    def boom(_args: argparse.Namespace) -> int:
        raise ValueError("something nobody foresaw")

    monkeypatch.setattr(listing, "_list", boom)
    monkeypatch.delenv("ORDERED_DEBUG", raising=False)
    assert main(["list", *NO_SERVERS]) == 1
    err = capsys.readouterr().err
    assert "unexpected ValueError: something nobody foresaw" in err and "Traceback" not in err


def test_value_checks() -> None:
    assert topic_name("a.b_c-1") == "a.b_c-1"
    for bad in ("", ".", "..", "a/b", "x" * 250, "sp ace"):
        with pytest.raises(argparse.ArgumentTypeError):
            topic_name(bad)
    for good in ("h:2181", "h1:1,h2:2/chroot", "h", "[::1]:2181", "127.0.0.1:2181/a/b"):
        assert zookeeper_connect(good) == good
    for bad in ("garbage:::99", ":1", "h:x", "h:0", "/chroot", "h:1/chroot/", "[::1:2"):
        with pytest.raises(argparse.ArgumentTypeError):
            zookeeper_connect(bad)


def test_docs_cli_md_is_generated_from_the_parsers() -> None:
    """docs/cli.md's reference is the parsers' (regenerate: python -m ordered.cli.reference
    --write docs/cli.md)."""
    from pathlib import Path

    from ordered.cli import reference

    path = Path(__file__).resolve().parents[2] / "docs" / "cli.md"
    text = path.read_text(encoding="utf-8")
    assert reference.update(text) == text
    for name in ("ordered list", "ordered describe", "ordered coordinator", "--dry-run"):
        assert name in text
