"""Two releases side by side: an older release exported from git, and a mixed fleet.

A rolling upgrade runs processes of two releases against one cluster. The older
release is exported from the repository's own git directory (``git archive``, so the
repository's worktrees and branches are untouched) and gets its compiled helpers built
as ``setup.py`` would; each process runs with the same interpreter and ``PYTHONPATH``
naming its release's tree, in that tree (``python -m`` puts the working directory
first on ``sys.path``, which must not be the other release).

The fleet's producers and readers are the chaos harness's workers
(``python -m ordered.chaos.worker SPEC``: numbered records, every ack and delivery in
a history file), so whatever releases wrote the histories, the checker of the release
under test judges them all together.
"""

from __future__ import annotations

import contextlib
import ctypes
import io
import json
import os
import shlex
import signal
import subprocess
import sys
import sysconfig
import tarfile
import time
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = [
    "RELEASE_COMMIT",
    "RELEASE_TAG",
    "ROOT",
    "Fleet",
    "Member",
    "Release",
    "export_release",
    "wait_exit",
]

ROOT = Path(__file__).resolve().parents[1]
"""The checkout under test."""

RELEASE_TAG = "v0.5.0"
"""The release the fleet upgrades from: the last one before the consumer protocol change."""

RELEASE_COMMIT = "233d709"
"""The commit ``RELEASE_TAG`` points at, for a clone that has the commit but not the tag."""

_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: a test killed outright leaves no fleet behind.
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


@dataclass(frozen=True)
class Release:
    """A tree of ordered-kafka that processes run from.

    Attributes:
        label: How logs and member names call it (``v0.5.0``, ``new``).
        root: The tree (its ``ordered``, ``coordinator`` and ``linear_hash`` packages).
        compiled: Whether its compiled helpers are built (else its pure-Python paths run).
    """

    label: str
    root: Path
    compiled: bool

    def env(self) -> dict[str, str]:
        """The environment of this release's processes: its tree first on the path."""
        return {**os.environ, "PYTHONPATH": str(self.root)}

    def argv(self, module: str, *args: str) -> list[str]:
        """``python -m module args`` with this test's interpreter."""
        return [sys.executable, "-m", module, *args]

    def foreign_imports(self) -> list[str]:
        """The packages a process of this release imports from another tree (none: good).

        An editable install's import hook could win over ``PYTHONPATH`` and run the
        checkout under test in place of the release, and the test would pass without
        testing anything.
        """
        code = (
            "import coordinator, linear_hash, ordered\n"
            "for m in (coordinator, linear_hash, ordered): print(m.__name__, m.__file__)"
        )
        found = subprocess.run(
            [sys.executable, "-c", code],
            cwd=self.root,
            env=self.env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
        if found.returncode != 0:
            return [found.stderr.strip()]
        lines = [line.split(" ", 1) for line in found.stdout.splitlines()]
        return [f"{n} from {f}" for n, f in lines if not Path(f).is_relative_to(self.root)]


def _git(git_dir: str, *args: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(["git", "--git-dir", git_dir, *args], capture_output=True, timeout=60)


def _build_extensions(tree: Path) -> bool:
    """Compile ``ordered/_fast*.c`` in place, as ``setup.py`` does (``-O2``, optional).

    The venv's setuptools cannot read an older ``pyproject.toml`` everywhere, so the
    compiler is called directly with the interpreter's own settings. A failure leaves
    the release on its pure-Python paths, which is what ``setup.py`` does without a
    compiler.
    """
    compiler = shlex.split(str(sysconfig.get_config_var("CC") or "cc"))
    include = sysconfig.get_paths()["include"]
    suffix = str(sysconfig.get_config_var("EXT_SUFFIX"))
    sources = sorted((tree / "ordered").glob("_fast*.c"))
    for source in sources:
        out = source.with_name(source.stem + suffix)
        argv = [*compiler, "-O2", "-shared", "-fPIC", f"-I{include}", str(source), "-o", str(out)]
        if subprocess.run(argv, capture_output=True, timeout=120).returncode != 0:
            return False
    return bool(sources)


def export_release(repo: Path, dest: Path) -> Release | str:
    """Export :data:`RELEASE_TAG` (else :data:`RELEASE_COMMIT`) of ``repo`` into ``dest``.

    Returns:
        The release, or why it cannot be had (for a skip): not a git checkout, or a
        clone (a shallow one, say) that has neither the tag nor the commit.
    """
    found = subprocess.run(
        ["git", "-C", str(repo), "rev-parse", "--git-common-dir", "--is-shallow-repository"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    if found.returncode != 0:
        return f"{repo} is not a git checkout: no {RELEASE_TAG} to upgrade from"
    git_dir, shallow = found.stdout.split()
    git_dir = str((repo / git_dir).resolve())
    commit = ""
    for ref in (RELEASE_TAG, RELEASE_COMMIT):
        verified = _git(git_dir, "rev-parse", "--verify", "--quiet", f"{ref}^{{commit}}")
        if verified.returncode == 0:
            commit = verified.stdout.decode().strip()
            break
    if not commit:
        kind = "this shallow clone" if shallow == "true" else "this clone"
        return (
            f"{kind} has neither the tag {RELEASE_TAG} nor commit {RELEASE_COMMIT}, the "
            "release a rolling upgrade starts from (git fetch --unshallow --tags)"
        )
    archive = _git(git_dir, "archive", "--format=tar", commit)
    if archive.returncode != 0:
        return f"git archive {commit} failed: {archive.stderr.decode(errors='replace')}"
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(dest, filter="data")
    return Release(RELEASE_TAG, dest, _build_extensions(dest))


@dataclass
class Member:
    """One process of the fleet.

    Attributes:
        name: Its id in the histories and logs (``reader-0@v0.5.0``).
        kind: ``producer``, ``reader`` or ``coordinator``.
        release: The release it runs.
        proc: The process.
        stats: The stats file a worker rewrites every second (none for a daemon).
        log: Its stdout and stderr.
    """

    name: str
    kind: str
    release: Release
    proc: subprocess.Popen[bytes]
    stats: Path | None
    log: Path

    def signal(self, sig: int) -> None:
        """Send ``sig`` unless it has exited."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.proc.pid, sig)

    def read_stats(self) -> dict[str, Any]:
        """Its last stats (``{}`` before the first, or for a daemon)."""
        if self.stats is None:
            return {}
        try:
            found: dict[str, Any] = json.loads(self.stats.read_text())
        except (OSError, ValueError):
            return {}
        return found

    def log_tail(self, lines: int = 15) -> str:
        """The last lines of its log, librdkafka's own lines left out."""
        try:
            text = self.log.read_text(errors="replace").splitlines()
        except OSError as exc:
            return f"--- {self.name}: {exc}"
        ours = [line[:1000] for line in text if not line.startswith("%")]
        return f"--- {self.name} (exit {self.proc.poll()})\n" + "\n".join(ours[-lines:])


class Fleet:
    """Starts, signals and stops the processes of a mixed-release fleet.

    Args:
        workdir: Where histories, stats and logs go.
        servers: The ``ordered`` CLI's server arguments (``--zookeeper``...).
        base: The spec every worker gets (``bootstrap``, ``zookeeper``, ``root``,
            ``topic``, ``keys``).
    """

    def __init__(self, workdir: Path, servers: list[str], base: dict[str, Any]) -> None:
        self.workdir = workdir
        self.servers = servers
        self.base = base
        self.members: list[Member] = []
        for sub in ("history", "stats", "logs"):
            (workdir / sub).mkdir(parents=True, exist_ok=True)

    def _spawn(
        self, release: Release, name: str, argv: list[str]
    ) -> tuple[Path, subprocess.Popen[bytes]]:
        log = self.workdir / "logs" / f"{name}.log"
        with log.open("ab") as out:
            proc = subprocess.Popen(
                argv,
                cwd=release.root,
                env=release.env(),
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,  # a Ctrl-C of the test is not a signal to the fleet
                preexec_fn=_die_with_parent,
            )
        return log, proc

    def worker(self, release: Release, slot: str, role: str, **extra: Any) -> Member:
        """Start a chaos worker (``producer`` or ``reader``) of ``release`` in ``slot``."""
        name = f"{slot}@{release.label}"
        spec = {
            **self.base,
            **extra,
            "role": role,
            "id": name,
            "seed": zlib.crc32(name.encode()),
            "history": str(self.workdir / "history" / f"{name}.jsonl"),
            "stats": str(self.workdir / "stats" / f"{name}.json"),
        }
        log, proc = self._spawn(
            release, name, release.argv("ordered.chaos.worker", json.dumps(spec))
        )
        member = Member(name, role, release, proc, Path(spec["stats"]), log)
        self.members.append(member)
        return member

    def daemon(self, release: Release, slot: str, *args: str) -> Member:
        """Start ``ordered coordinator`` of ``release`` (``args``: its options)."""
        name = f"{slot}@{release.label}"
        argv = release.argv("ordered.cli", "coordinator", *self.servers, *args)
        log, proc = self._spawn(release, name, argv)
        member = Member(name, "coordinator", release, proc, None, log)
        self.members.append(member)
        return member

    def cli(self, release: Release, *args: str) -> subprocess.Popen[bytes]:
        """Start an ``ordered`` command of ``release`` (output in ``logs/cli.log``)."""
        with (self.workdir / "logs" / "cli.log").open("a") as out:
            out.write(f"$ ordered {' '.join(args)}  ({release.label})\n")
        _log, proc = self._spawn(release, "cli", release.argv("ordered.cli", *args, *self.servers))
        popen: subprocess.Popen[bytes] = proc
        return popen

    def stop(self, member: Member, sig: int = signal.SIGTERM, timeout: float = 40.0) -> int:
        """Signal ``member`` and wait for its exit; return its exit code."""
        member.signal(sig)
        try:
            return member.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            tail = member.log_tail()
            message = f"{member.name} still runs {timeout} s after signal {sig}\n{tail}"
            raise AssertionError(message) from None

    def histories(self) -> list[Path]:
        """Every history file written so far."""
        return sorted((self.workdir / "history").glob("*.jsonl"))

    def logs(self) -> str:
        """The tail of every member's log and of the commands' log, for a failure."""
        parts = [m.log_tail() for m in self.members]
        cli = self.workdir / "logs" / "cli.log"
        if cli.exists():
            parts.append("--- commands\n" + cli.read_text(errors="replace")[-4000:])
        return "\n".join(parts)

    def kill_all(self) -> None:
        """SIGCONT then SIGKILL every member still running (a stopped one, too), and reap."""
        for member in self.members:
            member.signal(signal.SIGCONT)
            member.signal(signal.SIGKILL)
        for member in self.members:
            with contextlib.suppress(subprocess.TimeoutExpired):
                member.proc.wait(10)


def wait_exit(proc: subprocess.Popen[bytes], timeout: float) -> int:
    """Wait for ``proc`` (a command); kill it after ``timeout`` and fail."""
    started = time.monotonic()
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
        raise AssertionError(
            f"command {proc.args!r} ran longer than {time.monotonic() - started:.0f} s"
        ) from None
