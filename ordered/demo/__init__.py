"""``ordered demo``: the whole layer at work on the local cluster, checked end to end.

:func:`~ordered.demo.runner.run_demo` starts (when needed) the dev cluster, a
coordinator daemon, producer and consumer processes, runs a scripted sequence of
layout changes while records flow, checks every key's order and that nothing was lost,
and draws a timeline PNG. The parts: :mod:`~ordered.demo.worker` (the client
processes, around the verifiable clients of :mod:`ordered.verify`, whose checker
checks the order), :mod:`~ordered.demo.monitor`
(what the view and the picture show), :mod:`~ordered.demo.view` (live view),
:mod:`~ordered.demo.timeline` (the PNG), :mod:`~ordered.demo.runner` (the run).
"""

from __future__ import annotations

from ordered.demo.runner import DemoOptions, run_demo

__all__ = ["DemoOptions", "run_demo"]
