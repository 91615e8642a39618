"""With --json every stderr line is one JSON record, even when threads log at once."""

from __future__ import annotations

import json
import logging
import sys
import threading
import time

import pytest

from ordered.cli import output


class SlowStream:
    """A stream whose writes yield the GIL, as a pipe's may: pieces of lines interleave."""

    def __init__(self) -> None:
        self.parts: list[str] = []

    def write(self, text: str) -> int:
        time.sleep(0.0005)
        self.parts.append(text)
        return len(text)

    def flush(self) -> None:
        pass


def test_json_lines_from_many_threads_stay_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    stream = SlowStream()
    monkeypatch.setattr(sys, "stderr", stream)
    output.configure(True, logging.INFO)
    log = logging.getLogger("ordered.test.lines")

    def speak(n: int) -> None:
        for i in range(20):
            output.progress(f"progress {n} {i}")
            log.info("log %d %d", n, i)

    threads = [threading.Thread(target=speak, args=(n,)) for n in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    output.configure(False)
    lines = "".join(stream.parts).splitlines()
    assert len(lines) == 6 * 20 * 2
    for line in lines:
        json.loads(line)
