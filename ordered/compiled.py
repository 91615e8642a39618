"""The compiled helpers (``ordered._fastproduce``, ``_fastconsume``) when built, else ``None``.

Built by ``setup.py`` when a C compiler and the Python headers are there; every user
has a pure-Python path for a checkout without them.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

from linear_hash import DEFAULT_ALGORITHM, KeyRouter, Router

__all__ = ["compiled_consume_module", "compiled_module", "compiled_router"]


def compiled_module() -> Any | None:
    """``ordered._fastproduce``, or ``None`` when not built or ``ORDERED_PURE_PYTHON`` is set."""
    if os.environ.get("ORDERED_PURE_PYTHON"):
        return None  # asked for (tests of the fallback, debugging)
    try:
        # By name: the import graph (lint-imports) cannot see a compiled module and
        # would count this import as one of the whole ``ordered`` package.
        return importlib.import_module("ordered._fastproduce")
    except ImportError:  # built without a compiler: the pure-Python paths
        return None


def compiled_consume_module() -> Any | None:
    """``ordered._fastconsume`` (the consumer's batch scan), or ``None`` as above."""
    if os.environ.get("ORDERED_PURE_PYTHON"):
        return None
    try:
        return importlib.import_module("ordered._fastconsume")
    except ImportError:
        return None


_MODULE = compiled_module()


def compiled_router(router: Router) -> KeyRouter:
    """The fastest router equal to ``router``: its compiled twin when there is one.

    The compiled twin (``ordered._fastproduce.Router``) routes ``bytes`` and ASCII
    ``str`` keys of a murmur3 router in C, with the formula's one C copy, and every
    other key through ``router`` itself; a router of another algorithm, or any router
    without the extension (or with ``ORDERED_PURE_PYTHON`` set), is returned as is.
    """
    if _MODULE is None or router.algorithm != DEFAULT_ALGORITHM:
        return router
    compiled: KeyRouter = _MODULE.Router(router)
    return compiled
