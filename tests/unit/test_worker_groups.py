"""The xdist worker groups (``tests/worker_groups.py``): a test file that uses a shared server
is in that server's group, so that no worker starts a second copy of it."""

from __future__ import annotations

from pathlib import Path

from worker_groups import CHAOS_FILES, worker_group

TESTS = Path(__file__).resolve().parents[1]


def _files_using(word: str) -> list[str]:
    return sorted(
        str(path.relative_to(TESTS.parent))
        for folder in ("integration", "spark")
        for path in (TESTS / folder).glob("test_*.py")
        if word in path.read_text(encoding="utf-8")
    )


def test_files_of_a_shared_server_share_its_group() -> None:
    for word, group in (("secure_cluster", "secure"), ("cluster3", "cluster3")):
        files = _files_using(word)
        assert files, word
        # The Spark tests share the Spark cluster first; their secure test starts its own.
        misplaced = {
            f: worker_group(f"{f}::t")
            for f in files
            if worker_group(f"{f}::t") not in (group, "spark")
        }
        assert misplaced == {}, f"files using {word} outside the {group!r} group"


def test_every_chaos_run_is_in_the_chaos_group() -> None:
    # Two chaos runs at once on CI's 2 cores would slow each other past their bounds.
    runs = {
        p.name
        for folder in ("integration", "spark")
        for p in (TESTS / folder).glob("test_chaos*.py")
    }
    assert runs == set(CHAOS_FILES)
    assert worker_group("tests/spark/test_spark_sink.py::t") == "spark"
    assert worker_group("tests/unit/test_bench_table.py::t") == "tests/unit/test_bench_table.py"
