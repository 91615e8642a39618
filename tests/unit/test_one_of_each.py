"""One of each shared piece: the kazoo factory, the znode paths, the record mechanism.

These read the source: each piece has one home, and a second copy growing elsewhere
should fail here rather than drift unnoticed.
"""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _sources(*places: str) -> dict[str, str]:
    out = {}
    for place in places:
        path = ROOT / place
        files = [path] if path.suffix == ".py" else sorted(path.rglob("*.py"))
        for file in files:
            out[str(file.relative_to(ROOT))] = file.read_text(encoding="utf-8")
    return out


def test_kazoo_clients_come_from_the_factory() -> None:
    # The command line, the daemon, the benchmarks and every test build their clients
    # with coordinator.kernel.zk (the clients' own are the producer's and consumer's); tests
    # take theirs from the fixtures module's kazoo_factory.
    sources = _sources("coordinator", "ordered/cli", "benchmarks", "tests")
    offenders = [
        name
        for name, text in sources.items()
        if "KazooClient(" in text
        and name not in ("coordinator/kernel/zk.py", "tests/unit/test_one_of_each.py")
    ]
    assert offenders == []
    assert "make_client(" in sources["ordered/cli/connection.py"]


def test_znode_paths_are_built_in_one_module() -> None:
    sources = _sources("coordinator", "ordered", "spark_source")
    pattern = re.compile(r"""f["'][^"']*/(groups|topics|epochs|acks|producers|coordinator)\b""")
    offenders = [
        name
        for name, text in sources.items()
        if name != "coordinator/kernel/store/paths.py" and pattern.search(text)
    ]
    assert offenders == []


def test_one_record_mechanism() -> None:
    # Every znode's data is a records.py record: no module that talks to ZooKeeper
    # parses or writes JSON of its own.
    sources = _sources("coordinator", "ordered", "spark_source")
    offenders = [
        name
        for name, text in sources.items()
        if re.search(r"^(from|import) kazoo", text, re.M)
        and re.search(r"^(import json|from json)", text, re.M)
    ]
    assert offenders == []
    assert "RECORD_VERSION" in sources["coordinator/kernel/positions.py"]


def test_one_watch_mechanism_and_no_private_store_calls() -> None:
    # Data watches are one-shot exists-watches (store.watches.watch_node,
    # exists_and_watch): kazoo's DataWatch re-reads on kazoo's thread and can hang exit.
    # Nothing outside the store reaches into its private plumbing.
    sources = _sources("coordinator", "ordered", "spark_source")
    data_watches = [n for n, t in sources.items() if re.search(r"\.DataWatch\(", t)]
    assert data_watches == []
    private = [
        name
        for name, text in sources.items()
        if not name.startswith("coordinator/kernel/store/")
        and re.search(r"(?<!self)\._run\(|store\._(run|read|put|delete|children)\b", text)
    ]
    assert private == []


def test_test_modules_have_unique_names() -> None:
    """pytest imports test modules by basename (no packages under tests/): two files of
    one name stop the whole run at collection."""
    root = Path(__file__).resolve().parents[1]
    names = [p.name for p in root.rglob("test_*.py")]
    assert sorted({n for n in names if names.count(n) > 1}) == []
