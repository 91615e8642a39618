"""The rolling-upgrade test's export of the release it starts from, on scratch repositories.

The export must find the release by its tag, else by its commit, and must turn a clone
that has neither (a shallow CI checkout) into a skip that says why, not an error.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from upgrade_helpers import RELEASE_COMMIT, RELEASE_TAG, Release, export_release


def _git(repo: Path, *args: str) -> str:
    found = subprocess.run(
        ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(repo), *args],
        capture_output=True,
        text=True,
        check=True,
    )
    return found.stdout.strip()


def _repo(path: Path, commits: int) -> Path:
    path.mkdir()
    _git(path, "init", "-q")
    for n in range(commits):
        (path / "ordered").mkdir(exist_ok=True)
        (path / "ordered" / "__init__.py").write_text(f"N = {n}\n")
        _git(path, "add", "-A")
        _git(path, "commit", "-q", "-m", f"commit {n}")
    return path


def test_the_tag_is_exported_into_the_destination(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", 2)
    _git(repo, "tag", "-a", RELEASE_TAG, "-m", "release", "HEAD~1")
    found = export_release(repo, tmp_path / "out")
    assert isinstance(found, Release), found
    assert found.label == RELEASE_TAG and found.root == tmp_path / "out"
    # The tagged commit's tree, not the branch's: the later commit is not in it.
    assert (tmp_path / "out" / "ordered" / "__init__.py").read_text() == "N = 0\n"
    assert not found.compiled  # no C sources in this tree: its pure-Python paths run
    assert found.env()["PYTHONPATH"] == str(tmp_path / "out")


def test_a_clone_without_tag_or_commit_is_a_reason_to_skip(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", 1)
    found = export_release(repo, tmp_path / "out")
    assert found == (
        f"this clone has neither the tag {RELEASE_TAG} nor commit {RELEASE_COMMIT}, the "
        "release a rolling upgrade starts from (git fetch --unshallow --tags)"
    )


def test_a_shallow_clone_says_it_is_one(tmp_path: Path) -> None:
    repo = _repo(tmp_path / "repo", 3)
    _git(repo, "tag", "-a", RELEASE_TAG, "-m", "release", "HEAD~2")
    clone = tmp_path / "clone"
    _git(tmp_path, "clone", "-q", "--depth", "1", "--no-tags", f"file://{repo}", str(clone))
    found = export_release(clone, tmp_path / "out")
    assert isinstance(found, str) and found.startswith("this shallow clone has neither"), found


def test_a_directory_outside_git_is_a_reason_to_skip(tmp_path: Path) -> None:
    found = export_release(tmp_path, tmp_path / "out")
    assert found == f"{tmp_path} is not a git checkout: no {RELEASE_TAG} to upgrade from"


def test_a_tree_without_the_packages_is_caught_running_another(tmp_path: Path) -> None:
    # Its processes would import the venv's install (or nothing): not the release.
    assert Release("empty", tmp_path, compiled=False).foreign_imports() != []
