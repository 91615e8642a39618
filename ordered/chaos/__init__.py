"""``ordered chaos``: seeded faults against a local cluster, judged from recorded histories.

:mod:`~ordered.chaos.schedule` makes the fault schedule from a seed,
:mod:`~ordered.chaos.worker` is the producer or reader process,
:mod:`~ordered.chaos.processes` starts and signals them, :mod:`~ordered.chaos.faults`
injects the faults and drains the run, :mod:`~ordered.chaos.run` puts it together.
"""

from __future__ import annotations

from ordered.chaos.run import ChaosOptions, run_chaos
from ordered.chaos.schedule import FaultKind, ScheduledFault, ScheduleShape, make_schedule

__all__ = [
    "ChaosOptions",
    "FaultKind",
    "ScheduleShape",
    "ScheduledFault",
    "make_schedule",
    "run_chaos",
]
