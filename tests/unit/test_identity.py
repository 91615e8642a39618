"""The one identity builder keeps the formats the ids always had."""

from __future__ import annotations

import os
import re
import socket

import pytest

from coordinator.kernel import identity
from coordinator.kernel.store import paths


def test_formats() -> None:
    host, pid = socket.gethostname(), os.getpid()
    assert identity.process_identity() == f"{host}:{pid}"
    assert re.fullmatch(rf"{re.escape(host)}-{pid}-[0-9a-f]{{8}}", identity.member_id())
    producer = identity.producer_id()
    assert re.fullmatch(rf"p-{re.escape(host)}-{pid}-[0-9a-f]{{16}}", producer)
    # A producer id is a znode name of the store.
    assert paths.producer_path("/r", "t", producer).endswith("/" + producer)
    assert identity.member_id() != identity.member_id()
    assert identity.producer_id() != identity.producer_id()
    assert identity.make_identity(prefix="x", host=False, sep="/") == f"x/{pid}"
    with pytest.raises(ValueError):
        identity.make_identity(random_hex=33)


def test_no_other_module_builds_an_identity() -> None:
    # The builder is the one place that combines the host name and process id.
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    offenders = []
    for package in ("coordinator", "ordered", "spark_source"):
        for folder, _dirs, files in os.walk(os.path.join(root, package)):
            for name in files:
                path = os.path.join(folder, name)
                if not name.endswith(".py") or path.endswith(
                    os.path.join("coordinator", "kernel", "identity.py")
                ):
                    continue
                with open(path, encoding="utf-8") as f:
                    text = f.read()
                if "gethostname" in text or re.search(r"uuid4\(\)\.hex", text):
                    offenders.append(os.path.relpath(path, root))
    assert offenders == []
