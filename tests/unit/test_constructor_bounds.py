"""A client constructor with ZooKeeper unreachable: bounded, then ``StoreUnavailableError``.

Decided (docs/clients.md, "ZooKeeper unreachable at construction"): unlike confluent's,
the constructors wait for ZooKeeper, the one server the layer's guarantee needs, and fail
clearly. These tests pin the bound (the producer: max(``ordered.zookeeper.session.timeout.ms``,
10 s); the consumer: 15 s), and the error type and words, from a child process each (the
three run at once).
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

_CHILD = textwrap.dedent(
    """
    import json, sys, time
    from ordered import OrderedConsumer, OrderedProducer, StoreUnavailableError

    kind, extra = sys.argv[1], json.loads(sys.argv[2])
    config = {"bootstrap.servers": "127.0.0.1:1", "ordered.zookeeper.connect": "127.0.0.1:1"}
    config.update(extra)
    started = time.monotonic()
    try:
        if kind == "producer":
            OrderedProducer(config)
        else:
            OrderedConsumer({**config, "group.id": "g"})
    except StoreUnavailableError as exc:
        print(json.dumps({"seconds": time.monotonic() - started, "error": str(exc)}))
    """
)

# (kind, extra settings, the documented bound in seconds)
_CASES: list[tuple[str, dict[str, Any], float]] = [
    ("producer", {}, 10.0),
    ("producer", {"ordered.zookeeper.session.timeout.ms": 12000}, 12.0),
    ("consumer", {}, 15.0),
]


@pytest.mark.timeout(120)
def test_constructors_wait_for_zookeeper_within_their_documented_bound() -> None:
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, kind, json.dumps(extra)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for kind, extra, _bound in _CASES
    ]
    for (kind, extra, bound), child in zip(_CASES, children, strict=True):
        out, err = child.communicate(timeout=90)
        assert child.returncode == 0, err
        assert out.strip(), f"{kind} {extra}: no StoreUnavailableError: {err}"
        got = json.loads(out)
        # Not sooner than the bound (the constructor waits it out, as documented) and not
        # much later (3 s of slack for a loaded machine).
        assert bound - 0.5 <= got["seconds"] < bound + 3.0, (kind, extra, got)
        assert "cannot connect to ZooKeeper at 127.0.0.1:1" in got["error"]
        assert "(ordered.zookeeper.connect)" in got["error"]
        assert f"within {bound:g} s" in got["error"]
