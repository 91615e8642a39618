"""The demo's live view: a ``rich`` table on a terminal, plain progress lines otherwise.

Both show the same things: the step of the script, the epoch and the producer barrier,
and per partition its state (see :mod:`ordered.demo.monitor`) and rates. Everything
goes to stderr, so stdout holds only the summary (or its JSON).
"""

from __future__ import annotations

import sys
import threading
import time
from typing import IO, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from ordered.demo.monitor import PartSample, Sample

__all__ = ["COLOURS", "LiveView", "PlainView", "View", "make_view", "state_text"]

COLOURS = {
    "active": "green",
    "gated": "yellow",
    "blocked": "red",
    "retiring": "magenta",
    "draining": "blue",
    "trimmed": "bright_black",
}
"""The colour of each partition state (the timeline uses the same hues)."""


def state_text(part: PartSample) -> str:
    """``blocked on 0,1``, ``blocked on seal`` or the plain state name."""
    if part.state != "blocked" or not part.blocked_on:
        return part.state
    on = ",".join("seal" if p < 0 else str(p) for p in part.blocked_on)
    return f"blocked on {on}"


def _barrier(sample: Sample) -> str:
    if sample.pending is None:
        return "none pending"
    return f"epoch {sample.pending} pending, {sample.acks}/{sample.producers} producers acked"


class View:
    """Base of the views: :meth:`step` for the script, :meth:`update` for samples."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.steps: list[str] = []
        self.last: Sample | None = None

    def step(self, text: str) -> None:
        """Record (and show) a step of the script."""
        with self.lock:
            self.steps.append(text)

    def update(self, sample: Sample) -> None:
        """Show a new sample."""
        with self.lock:
            self.last = sample

    def close(self) -> None:
        """Stop showing."""


class PlainView(View):
    """One line per step and a status line every ``every`` seconds, on ``stream``."""

    def __init__(self, stream: IO[str], every: float = 2.0) -> None:
        super().__init__()
        self._stream = stream
        self._every = every
        self._next = 0.0

    def _say(self, text: str) -> None:
        print(f"ordered demo: {text}", file=self._stream, flush=True)

    def step(self, text: str) -> None:
        super().step(text)
        self._say(text)

    def update(self, sample: Sample) -> None:
        super().update(sample)
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self._every
        parts = "; ".join(
            f"{p} {state_text(s)} {s.rate_in:.0f}/s" for p, s in sorted(sample.parts.items())
        )
        self._say(
            f"t={sample.t:5.1f}s epoch {sample.epoch} active {sample.active}, "
            f"barrier {_barrier(sample)} | {parts}"
        )


class LiveView(View):
    """A ``rich`` live table, redrawn with every sample."""

    def __init__(self, console: Console, title: str) -> None:
        super().__init__()
        self._title = title
        self._live = Live(self._render(), console=console, refresh_per_second=4, transient=False)
        self._live.start()

    def _render(self) -> Any:
        sample = self.last
        head = Text(self._title, style="bold")
        if sample is None:
            return Group(head, Text("starting ..."))
        info = Text(
            f"t={sample.t:.1f} s   epoch {sample.epoch}   active partitions {sample.active}   "
            f"barrier: {_barrier(sample)}"
        )
        table = Table(show_header=True, header_style="bold", expand=False)
        for name, justify in (
            ("partition", "right"),
            ("state", "left"),
            ("in/s", "right"),
            ("committed/s", "right"),
            ("end", "right"),
            ("committed", "right"),
        ):
            table.add_column(name, justify=justify)  # type: ignore[arg-type]
        for p, s in sorted(sample.parts.items()):
            table.add_row(
                str(p),
                Text(state_text(s), style=COLOURS.get(s.state, "")),
                f"{s.rate_in:.0f}",
                f"{s.rate_out:.0f}",
                str(s.end),
                "-" if s.committed is None else str(s.committed),
            )
        steps = Text("\n".join(self.steps[-6:]), style="cyan")
        return Group(head, info, table, steps)

    def step(self, text: str) -> None:
        super().step(text)
        self._live.update(self._render())

    def update(self, sample: Sample) -> None:
        super().update(sample)
        self._live.update(self._render())

    def close(self) -> None:
        self._live.update(self._render())
        self._live.stop()


class _Quiet(View):
    """Shows nothing (``--json``: stderr stays free of human-readable lines)."""


def make_view(as_json: bool, title: str, stream: IO[str] | None = None) -> View:
    """The view for this run: quiet with ``--json``, live on a terminal, else plain lines."""
    stream = stream or sys.stderr
    if as_json:
        return _Quiet()
    if stream.isatty():
        return LiveView(Console(file=stream), title)
    return PlainView(stream)
