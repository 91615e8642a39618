"""Import pyspark from its installed, compiled copy instead of Spark's zip; then chain on.

Spark puts ``$SPARK_HOME/python/lib/pyspark.zip`` and py4j's zip first on the
``PYTHONPATH`` of every Python process it starts. Python caches no bytecode for modules
imported from a zip, so every new process compiles the pyspark modules it imports from
source: about 0.5 s of CPU on an idle core before a streaming source's first call, and
Spark starts a new such process for every streaming query. With pyspark installed from
PyPI the same files sit in ``site-packages``, compiled once. For each of the two zips
whose package is installed elsewhere on ``sys.path`` with an identical ``version.py``,
this drops the zip from ``sys.path``; otherwise (another Spark build, no installed copy)
it leaves everything as Spark set it.

Python imports one ``sitecustomize``: this one runs whichever the rest of ``sys.path``
would have provided. It never raises: at worst the process starts as without it.
"""

from __future__ import annotations

import contextlib
import os
import sys

__all__: list[str] = []

_HERE = os.path.dirname(os.path.abspath(__file__))


def _package_of(entry: str) -> str | None:
    """``pyspark`` or ``py4j`` for Spark's zips of them, else ``None``."""
    name = os.path.basename(entry)
    if name == "pyspark.zip":
        return "pyspark"
    if name.startswith("py4j-") and name.endswith("-src.zip"):
        return "py4j"
    return None


def _same_installed(entry: str, package: str) -> bool:
    """Whether ``package`` is installed outside ``entry`` with the same ``version.py``."""
    import zipimport
    from importlib.machinery import PathFinder

    try:
        zipped = zipimport.zipimporter(entry).get_data(f"{package}/version.py")
    except (OSError, zipimport.ZipImportError):
        return False
    others = [p for p in sys.path if p != entry and not p.endswith(".zip")]
    spec = PathFinder.find_spec(package, others)
    if spec is None or not spec.submodule_search_locations:
        return False
    version = os.path.join(next(iter(spec.submodule_search_locations)), "version.py")
    try:
        with open(version, "rb") as handle:
            return handle.read() == zipped
    except OSError:
        return False


def _prefer_installed() -> None:
    for entry in list(sys.path):
        package = _package_of(entry)
        if package is not None and _same_installed(entry, package):
            sys.path.remove(entry)


def _chain() -> None:
    """Run the ``sitecustomize`` this module shadows (the next one on ``sys.path``)."""
    import importlib.util
    from importlib.machinery import PathFinder

    rest = [p for p in sys.path if os.path.abspath(p or os.curdir) != _HERE]
    spec = PathFinder.find_spec("sitecustomize", rest)
    if spec is None or spec.loader is None:
        return
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)


# A start-up hook must never stop the process: at worst it changes nothing.
with contextlib.suppress(Exception):
    _prefer_installed()
_chain()
