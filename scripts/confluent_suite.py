"""Run confluent-kafka-python's own tests against the ordered wrappers (issue 30).

    .venv/bin/python scripts/confluent_suite.py [--source PATH] [--json OUT] [--unit-only]

1. **The tests** of the installed confluent-kafka version: from its PyPI sdist when that
   holds ``tests/`` (``pip download --no-deps --no-binary :all:``: a package registry is
   all this machine and CI reach), else from ``--source`` (a checkout, or a git
   directory whose ``HEAD`` is exported). Where they came from, and the version they are
   of, go into the JSON. Nothing of confluent's is kept in this repository.
2. **A venv for them** (``<work>/venv``): this project's ``.venv`` site-packages (so
   confluent-kafka and ordered are the installed ones) plus confluent's test
   requirements that are missing there (pytest-asyncio, requests-mock, trivup, ...).
3. **A local cluster** (``ordered.devcluster``, one broker and ZooKeeper), stopped
   at the end.
4. **Runs**, each one pytest process, parsed from its JUnit XML:

   - ``baseline``: confluent's classes, unit tests (no broker) and the integration
     tests that take a broker from ``BROKERS`` (producer, consumer, serialization);
   - ``wrapped-plain``: the same with ``confluent_kafka.Producer``, ``Consumer``,
     ``SerializingProducer`` and ``DeserializingConsumer`` replaced by the ordered
     classes (``ordered.zookeeper.connect`` added to every config dict): topics are
     not adopted;
   - ``wrapped-adopted``: the integration tests again, wrapped, with every topic the
     tests' cluster fixture creates adopted as it is created.

The output lists, per run, the passed/failed/skipped counts, and the *wrapped-only
failures*: tests that pass on the baseline and fail (or error) wrapped. Also as JSON
(``benchmarks/results/confluent-suite.json`` by default).

The wrapped runs load ``confluent_suite_plugin.py`` (beside this file) as their pytest
plugin: it substitutes the classes before pytest loads the tests' conftest files.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

from confluent_suite_plugin import ADOPTED_ENV, MODE_ENV, ROOT_ENV, ZK_ENV

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_JSON = ROOT / "benchmarks" / "results" / "confluent-suite.json"

UNIT_TESTS = (
    "tests/test_Producer.py",
    "tests/test_Consumer.py",
    "tests/test_misc.py",
    "tests/test_threads.py",
    "tests/test_log.py",
    "tests/test_error.py",
    "tests/test_message.py",
    "tests/test_Messages.py",
    "tests/test_topic_partition.py",
    "tests/test_enums.py",
    "tests/test_serializer_error.py",
    "tests/test_partitioners.py",
    "tests/test_kafka_error.py",
)
"""confluent's unit tests that build a ``Producer`` or ``Consumer`` (or test what they
return); the Admin, share-consumer and Schema Registry ones do not touch the wrappers.
``test_Wakeable.py`` is left out: its tests interrupt their own process with SIGINT,
and on a loaded 2-core machine the baseline itself hung in it (and, within a larger
run, stopped the pytest session early). ``test_kafka_error.py`` comes last: with
confluent-kafka 2.16 installed, 2.15's ``test_kafkaError_unknown_error`` ends the pytest
session on both sides (its ``raise KafkaError(12345)`` escapes pytest), and the files
after it in the same process never ran."""

AIO_TESTS = (
    "tests/test_AIOProducer.py",
    "tests/test_AIOConsumer.py",
)
"""confluent's unit tests of its asyncio clients, a pytest process of their own. Wrapped,
their ``AIOProducer``, ``AIOConsumer``, ``AsyncSerializingProducer`` and
``AsyncDeserializingConsumer`` are the ordered ones (``confluent_suite_plugin``)."""

INTEGRATION_TESTS = (
    "tests/integration/producer",
    "tests/integration/consumer",
    "tests/integration/serialization",
)
"""confluent's integration tests that take a broker from ``BROKERS`` and use the
wrapped classes (admin, share consumers, SASL/OAuth clusters are left out)."""

TEST_REQUIREMENTS = (
    "pytest",
    "pytest-timeout",
    "pytest-asyncio",
    "async-timeout",
    "requests-mock",
    "respx",
    "httpx",
    "certifi",
    "attrs",
    "cachetools",
    "authlib",
    "avro",
    "fastavro",
    "trivup",
)
"""Imported by confluent's test modules and fixtures (trivup only at import: the
broker comes from ``BROKERS``)."""

# --- the driver ----------------------------------------------------------------------


def _say(message: str) -> None:
    print(f"[confluent-suite] {message}", file=sys.stderr, flush=True)


def fetch_tests(version: str, work: Path, source: Path | None) -> tuple[Path, str, str]:
    """Put confluent's ``tests/`` under ``work/src``; return (dir, origin, tests' version)."""
    dest = work / "src"
    shutil.rmtree(dest, ignore_errors=True)
    dest.mkdir(parents=True)
    download = work / "download"
    download.mkdir(exist_ok=True)
    sdist = _sdist(version, download)
    if sdist is not None and _extract_tests(sdist, dest):
        return dest, f"PyPI sdist {sdist.name}", version
    if source is None:
        raise SystemExit(
            f"confluent-kafka {version}: the PyPI sdist holds no tests/; pass --source (a "
            "checkout or git directory of confluent-kafka-python at that version)"
        )
    return dest, f"--source {source}", _copy_source(source, dest)


def _sdist(version: str, download: Path) -> Path | None:
    found = list(download.glob(f"confluent_kafka-{version}.tar.gz"))
    if not found:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--no-binary",
                ":all:",
                f"confluent-kafka=={version}",
                "-d",
                str(download),
            ],
            check=False,
        )
        found = list(download.glob(f"confluent_kafka-{version}.tar.gz"))
    return found[0] if found else None


def _extract_tests(archive: Path, dest: Path) -> bool:
    with tarfile.open(archive) as tar:
        members = [m for m in tar.getmembers() if m.name.split("/")[1:2] == ["tests"]]
        if not members:
            return False
        for m in members:
            m.name = m.name.split("/", 1)[1]
        tar.extractall(dest, members=members, filter="data")
    return True


def _copy_source(source: Path, dest: Path) -> str:
    """Export ``tests/`` of a checkout or git directory; return the version it is of."""
    if (source / "tests").is_dir():
        shutil.copytree(source / "tests", dest / "tests")
        header = source / "src" / "confluent_kafka" / "src" / "confluent_kafka.h"
        text = header.read_text() if header.exists() else ""
    else:
        git = ["git", "--git-dir", str(source)]
        tar = subprocess.run([*git, "archive", "HEAD", "tests"], check=True, capture_output=True)
        subprocess.run(["tar", "x", "-C", str(dest)], input=tar.stdout, check=True)
        text = subprocess.run(
            [*git, "show", "HEAD:src/confluent_kafka/src/confluent_kafka.h"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout
    match = re.search(r'CFL_VERSION_STR "([^"]+)"', text)
    return match.group(1) if match else "unknown"


def make_venv(work: Path) -> Path:
    """A venv with this project's packages and confluent's test requirements."""
    venv = work / "venv"
    python = venv / "bin" / "python"
    if not python.exists():
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        site = subprocess.run(
            [str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        import sysconfig

        ours = sysconfig.get_paths()["purelib"]
        # addsitedir, not a plain path line: the project's own .pth files (the editable
        # install) are read too.
        Path(site, "ordered-project.pth").write_text(f"import site; site.addsitedir({ours!r})\n")
        subprocess.run(
            [str(python), "-m", "pip", "install", "--quiet", *TEST_REQUIREMENTS], check=True
        )
    return python


@contextlib.contextmanager
def cluster(work: Path, brokers: str | None, zookeeper: str | None) -> Iterator[tuple[str, str]]:
    """(bootstrap servers, ZooKeeper connect): those given, else a one-broker Kafka and a
    ZooKeeper started for the runs and stopped afterwards."""
    if brokers and zookeeper:
        yield brokers, zookeeper
        return
    from ordered import devcluster

    directory = work / "cluster"
    state = devcluster.up(directory, brokers=1, progress=_say)
    try:
        yield state.bootstrap_servers, state.zookeeper_connect
    finally:
        devcluster.down(directory)


def run(
    python: Path,
    src: Path,
    name: str,
    groups: list[tuple[str, tuple[str, ...]]],
    env: dict[str, str],
    timeout: float,
) -> dict[str, Any]:
    """One run: a pytest process per group of paths (a test that stops its process,
    say with a signal, costs only its group); the outcomes by test id, merged."""
    outcomes: dict[str, tuple[str, str]] = {}
    by_group: dict[str, dict[str, int]] = {}
    exits: dict[str, int] = {}
    atexit = 0
    started = time.monotonic()
    adopted = src / f"{name}.adopted"
    adopted.unlink(missing_ok=True)
    for group, paths in groups:
        xml = src / f"{name}-{group}.xml"
        proc = subprocess.run(
            [
                str(python),
                "-m",
                "pytest",
                "-q",
                "-p",
                "no:cacheprovider",
                "-p",
                "confluent_suite_plugin",
                "--timeout",
                "120",
                f"--junitxml={xml}",
                *paths,
            ],
            cwd=src,
            env={
                **os.environ,
                **env,
                # This checkout first: the venv's path file names the project's
                # editable install, which may be another checkout (a git worktree).
                "PYTHONPATH": os.pathsep.join((str(ROOT / "scripts"), str(ROOT))),
                ADOPTED_ENV: str(adopted),
            },
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        (src / f"{name}-{group}.log").write_text(proc.stdout + "\n--- stderr ---\n" + proc.stderr)
        found = _outcomes(xml) if xml.exists() else {}
        by_group[group] = _counts(found)
        outcomes.update(found)
        exits[group] = proc.returncode
        atexit += (proc.stdout + proc.stderr).count("Exception ignored in atexit")
    return {
        "counts": _counts(outcomes),
        "group_counts": by_group,
        "seconds": round(time.monotonic() - started, 1),
        "pytest_exit_codes": exits,
        "atexit_tracebacks": atexit,
        "adopted_topics": len(adopted.read_text().splitlines()) if adopted.exists() else 0,
        "outcomes": outcomes,
    }


def _counts(outcomes: dict[str, tuple[str, str]]) -> dict[str, int]:
    return {
        k: sum(1 for o in outcomes.values() if o[0] == k)
        for k in ("passed", "failed", "error", "skipped")
    }


def _outcomes(xml: Path) -> dict[str, tuple[str, str]]:
    out: dict[str, tuple[str, str]] = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        test = f"{case.get('classname', '')}::{case.get('name', '')}"
        kind, message = "passed", ""
        for child in case:
            if child.tag in ("failure", "error", "skipped"):
                kind = {"failure": "failed"}.get(child.tag, child.tag)
                message = (
                    (child.get("message") or "").splitlines()[0][:300]
                    if child.get("message")
                    else ""
                )
                break
        out[test] = (kind, message)
    return out


def wrapped_only(baseline: dict[str, Any], wrapped: dict[str, Any]) -> list[dict[str, str]]:
    """Tests that pass on the baseline and fail or error wrapped."""
    found = []
    for test, (kind, message) in sorted(wrapped["outcomes"].items()):
        if kind in ("failed", "error") and baseline["outcomes"].get(test, ("",))[0] == "passed":
            found.append({"test": test, "outcome": kind, "message": message})
    return found


def _node_id(test: str) -> str:
    """pytest's node id of a JUnit ``classname::name`` (a module's test, or a class's:
    ``tests.test_AIOProducer.TestAIOProducer::test_x``)."""
    dotted, name = test.split("::", 1)
    parts = dotted.split(".")
    module = next((i for i, p in enumerate(parts) if p.startswith("test_")), len(parts) - 1)
    path = "/".join(parts[: module + 1]) + ".py"
    return "::".join([path, *parts[module + 1 :], name])


def confirm(
    python: Path,
    src: Path,
    name: str,
    candidates: list[dict[str, str]],
    env: dict[str, str],
    mode: dict[str, str],
    timeout: float,
) -> tuple[list[dict[str, str]], list[str]]:
    """Run the candidates again, alone, on both sides: a wrapped-only failure is kept
    only if it fails wrapped and passes on the baseline again (else it is flaky)."""
    ids = tuple(_node_id(f["test"]) for f in candidates)
    again = {}
    for side, extra in (("baseline", {}), ("wrapped", mode)):
        root = {ROOT_ENV: f"/confluent-suite-{uuid.uuid4().hex[:8]}"}
        again[side] = run(
            python,
            src,
            f"{name}-confirm-{side}",
            [("confirm", ids)],
            {**env, **extra, **root},
            timeout,
        )
    kept = {f["test"] for f in wrapped_only(again["baseline"], again["wrapped"])}
    return [f for f in candidates if f["test"] in kept], [
        f["test"] for f in candidates if f["test"] not in kept
    ]


def main(argv: list[str] | None = None) -> int:
    """Fetch, run baseline and wrapped, compare; print and write the JSON."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--source",
        type=Path,
        default=None,
        help="a confluent-kafka-python checkout or git directory (fallback)",
    )
    parser.add_argument("--work", type=Path, default=None, help="work directory (kept)")
    parser.add_argument("--json", type=Path, default=DEFAULT_JSON, help="where the JSON goes")
    parser.add_argument("--unit-only", action="store_true", help="no integration tests")
    parser.add_argument("--timeout", type=float, default=1200.0, help="seconds per run")
    parser.add_argument("--brokers", default=None, help="a running Kafka (with --zookeeper)")
    parser.add_argument("--zookeeper", default=None, help="a running ZooKeeper (with --brokers)")
    args = parser.parse_args(argv)
    version = metadata.version("confluent-kafka")
    work = args.work or Path(tempfile.mkdtemp(prefix="confluent-suite-"))
    work.mkdir(parents=True, exist_ok=True)
    src, origin, tests_version = fetch_tests(version, work, args.source)
    _say(f"confluent-kafka {version} installed; tests of {tests_version} from {origin}")
    if tests_version != version:
        _say(f"note: the tests are of {tests_version}, not of the installed {version}")
    python = make_venv(work)
    integration = () if args.unit_only else INTEGRATION_TESTS
    runs: dict[str, dict[str, Any]] = {}
    with cluster(work, args.brokers, args.zookeeper) as (brokers, zookeeper):
        env = {"BROKERS": brokers, ZK_ENV: zookeeper}
        both = [("unit", UNIT_TESTS), ("aio", AIO_TESTS)]
        both += [("integration", integration)] if integration else []
        plan = [("baseline", both, {}), ("wrapped-plain", both, {MODE_ENV: "plain"})]
        if integration:
            plan.append(("wrapped-adopted", both[2:], {MODE_ENV: "adopted"}))
        for name, groups, mode in plan:
            root = {ROOT_ENV: f"/confluent-suite-{uuid.uuid4().hex[:8]}"}
            _say(f"{name}: {[g for g, _ in groups]}")
            runs[name] = run(python, src, name, groups, {**env, **mode, **root}, args.timeout)
            _say(f"{name}: {runs[name]['counts']} in {runs[name]['seconds']} s")
        failures: dict[str, list[dict[str, str]]] = {}
        flaky: dict[str, list[str]] = {}
        for name, r in runs.items():
            if name == "baseline":
                continue
            candidates = wrapped_only(runs["baseline"], r)
            failures[name], flaky[name] = candidates, []
            if candidates:
                mode = {MODE_ENV: "adopted" if name == "wrapped-adopted" else "plain"}
                failures[name], flaky[name] = confirm(
                    python, src, name, candidates, env, mode, args.timeout
                )
    result = {
        "confluent_kafka": version,
        "tests_version": tests_version,
        "tests_from": origin,
        "tests_match_installed": tests_version == version,
        "unit_tests": list(UNIT_TESTS),
        "aio_tests": list(AIO_TESTS),
        "integration_tests": list(integration),
        "runs": {name: {k: v for k, v in r.items() if k != "outcomes"} for name, r in runs.items()},
        "wrapped_only_failures": failures,
        "flaky": flaky,
        "logs": str(src),
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, indent=2) + "\n")
    for name, r in result["runs"].items():
        print(
            f"{name:16} {r['counts']}  {r['seconds']} s  atexit tracebacks "
            f"{r['atexit_tracebacks']}  topics adopted {r['adopted_topics']}"
        )
        for group, counts in r["group_counts"].items():
            print(f"  {group:14} {counts}")
    for name, failed in result["wrapped_only_failures"].items():
        print(f"{name}: {len(failed)} wrapped-only failure(s)")
        for f in failed:
            print(f"  {f['outcome']:6} {f['test']}: {f['message']}")
        for test in result["flaky"][name]:
            print(f"  flaky  {test}: failed wrapped once, not again alone (or not on the baseline)")
    print(f"JSON: {args.json}; logs and JUnit XML in {src}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
