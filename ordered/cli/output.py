"""How the CLI speaks: JSON on stdout with ``--json``, plain text otherwise.

Progress and errors always go to stderr, so ``--json`` output stays parseable.
"""

from __future__ import annotations

import json
import sys
from typing import Any

__all__ = ["emit", "error", "progress"]


def emit(payload: dict[str, Any], text: str, as_json: bool) -> None:
    """Print ``payload`` as one JSON document (sorted keys) or ``text`` as it is."""
    if as_json:
        print(json.dumps(payload, sort_keys=True))
    else:
        print(text)
    sys.stdout.flush()


def progress(message: str) -> None:
    """Print one line of progress on stderr."""
    print(f"ordered: {message}", file=sys.stderr, flush=True)


def error(message: str, as_json: bool, kind: str) -> None:
    """Print an error on stderr (and as JSON on stdout with ``--json``)."""
    print(f"ordered: error: {message}", file=sys.stderr, flush=True)
    if as_json:
        print(json.dumps({"error": {"kind": kind, "message": message}}, sort_keys=True))
