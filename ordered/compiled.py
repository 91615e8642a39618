"""The compiled helpers (``ordered._fastproduce``) when they were built, else ``None``.

Built by ``setup.py`` when a C compiler and the Python headers are there; every user
has a pure-Python path for a checkout without them.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

__all__ = ["compiled_module"]


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
