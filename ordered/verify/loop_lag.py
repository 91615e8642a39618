"""How long an asyncio event loop was held: the probe behind the asyncio clients' lag figures.

A task sleeps 10 ms at a time and records how late each wake-up came. A call that blocks
the loop (a gate wait or a barrier switch run on it instead of in the executor) shows
as one wake-up late by the whole wait.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any, Final

__all__ = ["TICK_S", "LoopLagProbe"]

TICK_S: Final = 0.01
"""The probe's sleep."""


class LoopLagProbe:
    """Records each wake-up's lateness (seconds) from :meth:`start` to :meth:`stop`."""

    def __init__(self) -> None:
        self.lags: list[float] = []
        self._task: asyncio.Task[None] | None = None

    @property
    def worst(self) -> float:
        """The latest wake-up's lateness (0.0 before the first)."""
        return max(self.lags, default=0.0)

    @property
    def samples(self) -> int:
        """Wake-ups recorded."""
        return len(self.lags)

    def start(self) -> None:
        """Start probing the running loop."""
        self._task = asyncio.get_running_loop().create_task(self._run())

    async def _run(self) -> None:
        while True:
            began = time.perf_counter()
            await asyncio.sleep(TICK_S)
            self.lags.append(time.perf_counter() - began - TICK_S)

    async def stop(self) -> None:
        """Stop probing."""
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)

    def summary(self) -> dict[str, Any]:
        """``max_ms``, ``p99_ms`` and ``samples`` of what was recorded."""
        ordered = sorted(self.lags) or [0.0]
        return {
            "max_ms": round(ordered[-1] * 1000, 1),
            "p99_ms": round(ordered[int(len(ordered) * 0.99)] * 1000, 1),
            "samples": len(self.lags),
        }
