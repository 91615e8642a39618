"""The start-up hook of the source's Python processes: installed pyspark over Spark's zip.

Spark starts every Python process with ``$SPARK_HOME/python/lib/pyspark.zip`` (and
py4j's zip) first on ``PYTHONPATH``; Python compiles whatever it imports from a zip in
every new process. With :data:`spark_source.workers.STARTUP` on the path (as
``register()`` gives the source's processes), the same pyspark comes from its installed,
compiled copy. Each case runs a fresh interpreter with the path Spark would give it.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from spark_source.workers import STARTUP, startup_environment

pytest.importorskip("pyspark")

_SHOW = (
    "import json, sys, pyspark, py4j\n"
    "print(json.dumps({'pyspark': pyspark.__file__, 'py4j': py4j.__file__, 'path': sys.path}))\n"
)


def _spark_zips() -> list[str]:
    import pyspark

    lib = Path(pyspark.__file__).parent / "python" / "lib"
    zips = sorted(str(p) for p in lib.glob("*.zip"))
    if not any(z.endswith("pyspark.zip") for z in zips):
        pytest.skip(f"this pyspark has no {lib}/pyspark.zip")
    return [z for z in zips if z.endswith("pyspark.zip")] + [
        z for z in zips if not z.endswith("pyspark.zip")
    ]


def _run(path: list[str], **env: str) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", _SHOW],
        env=dict(os.environ, PYTHONPATH=os.pathsep.join(path), **env),
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    )
    result: dict[str, object] = json.loads(done.stdout.splitlines()[-1])
    return result


def test_without_the_hook_pyspark_comes_from_sparks_zip() -> None:
    # What Spark's processes do on their own: the premise of the hook.
    zips = _spark_zips()
    shown = _run(zips)
    assert ".zip" in str(shown["pyspark"]), shown["pyspark"]


def test_the_hook_drops_sparks_zips_when_the_same_version_is_installed() -> None:
    zips = _spark_zips()
    shown = _run([*zips, STARTUP])
    assert ".zip" not in str(shown["pyspark"]), shown["pyspark"]
    assert ".zip" not in str(shown["py4j"]), shown["py4j"]
    path = shown["path"]
    assert isinstance(path, list)
    assert [z for z in zips if z in path] == []


def test_a_zip_of_another_version_is_kept(tmp_path: Path) -> None:
    other = tmp_path / "pyspark.zip"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("pyspark/__init__.py", "")
        z.writestr("pyspark/version.py", "__version__: str = '0.0.1'\n")
    shown = _run([str(other), STARTUP])
    assert shown["pyspark"] == f"{other}/pyspark/__init__.py"


def test_the_sitecustomize_it_shadows_still_runs(tmp_path: Path) -> None:
    zips = _spark_zips()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    marker = tmp_path / "ran"
    (theirs / "sitecustomize.py").write_text(
        "import os\nopen(os.environ['MARKER'], 'w').write('yes')\n"
    )
    shown = _run([*zips, STARTUP, str(theirs)], MARKER=str(marker))
    assert marker.read_text() == "yes"
    assert ".zip" not in str(shown["pyspark"])


def test_startup_environment_puts_the_hook_first_once() -> None:
    env = startup_environment({"PYTHONHASHSEED": "0", "PYTHONPATH": f"/a{os.pathsep}/b"})
    assert env == {
        "PYTHONHASHSEED": "0",
        "PYTHONPATH": os.pathsep.join([STARTUP, "/a", "/b"]),
    }
    assert startup_environment(env) == env
    assert startup_environment({}) == {"PYTHONPATH": STARTUP}
