"""The quiet service step: skipped while nothing can have given it work, run after a halt.

``CallPath._service`` runs the service step unless ``Core.quiet_until`` lies ahead and no
halt came since the step last ran; the step sets ``quiet_until`` itself, and whatever
may give it work on the poll thread ends the quiet (``Core.unquiet``).
"""

from __future__ import annotations

import time
from types import SimpleNamespace
from typing import Any

from fakes import FakeFetcher, FakeLayouts, FakeUpkeep, bare_core, gate_in, kwargs_for

from coordinator.kernel.clock import SYSTEM_CLOCK
from ordered.consumer.calls import CallPath
from ordered.consumer.judge import BatchFilter
from ordered.consumer.partition import GateEvent, GateState, PartState
from ordered.consumer.state import Core


class _QuietUpkeep(FakeUpkeep):
    """A service step that declares itself quiet for a minute each time it runs."""

    def __init__(self, core: Any) -> None:
        super().__init__(FakeFetcher([[str(i)] for i in range(20)]))
        self.core = core

    def service(self) -> None:
        super().service()
        self.core.quiet_until = time.monotonic() + 60


def _quiet_path() -> tuple[CallPath, _QuietUpkeep, Any]:
    core = SimpleNamespace(quiet_until=0.0, call_stores=None, parts={}, clock=SYSTEM_CLOCK)
    core.unquiet = lambda: setattr(core, "quiet_until", 0.0)
    upkeep = _QuietUpkeep(core)
    return CallPath(core, upkeep, lambda: None), upkeep, core  # type: ignore[arg-type]


def test_the_service_step_is_skipped_while_quiet() -> None:
    path, upkeep, _core = _quiet_path()
    path.consume(1, 1.0)
    assert upkeep.services == 1
    path.consume(1, 1.0)
    path.consume(1, 1.0)
    assert upkeep.services == 1  # without the quiet: 3


def test_a_halt_a_hand_over_or_unquiet_ends_the_quiet() -> None:
    path, upkeep, core = _quiet_path()
    path.consume(1, 1.0)
    path.halt()  # kazoo's thread: a watched topic changed, a session change, a notice
    path.consume(1, 1.0)
    assert upkeep.services == 2
    path.hand_over()  # the wrapper, before a seek, a commit, an assign...
    path.consume(1, 1.0)
    assert upkeep.services == 3
    core.unquiet()  # the poll thread: a gate changed, a partition was tracked...
    path.consume(1, 1.0)
    assert upkeep.services == 4
    core.quiet_until = time.monotonic() - 1  # its time came (a re-check is due)
    path.consume(1, 1.0)
    assert upkeep.services == 5


def _core() -> tuple[Core, PartState]:
    core = bare_core()
    part = PartState("t", 0, gate_in(GateState.BLOCKED))
    core.parts[("t", 0)] = part
    return core, part


def test_a_gate_event_or_a_recheck_scheduled_ends_the_quiet() -> None:
    core, part = _core()
    core.quiet_until = time.monotonic() + 60
    core.fire(part, GateEvent.STASHED, **kwargs_for(GateEvent.STASHED))  # type: ignore[arg-type]
    assert core.quiet_until == 0.0
    core.quiet_until = time.monotonic() + 60
    core.check_gates_at(0.0)
    assert core.quiet_until == 0.0


def test_an_announcement_scheduled_by_delivery_ends_the_quiet() -> None:
    core, part = _core()
    gates = SimpleNamespace(source_marks=lambda _p: (10,))
    core.layouts.topics["t"] = SimpleNamespace(gates=gates)
    part.start, part.position = 0, 11  # delivered past the source's boundary 10
    core.quiet_until = time.monotonic() + 60
    BatchFilter(core, None).check_marks(part)  # type: ignore[arg-type]
    assert part.ann.state is not part.ann.state.IDLE
    assert core.quiet_until == 0.0


def test_what_the_scan_and_the_slice_cache_by_moves_with_each_change() -> None:
    core, part = _core()
    before = core.version
    core.fire(part, GateEvent.STASHED, **kwargs_for(GateEvent.STASHED))  # type: ignore[arg-type]
    core.check_gates_at(0.0)
    core.unquiet()
    assert core.version == before + 3
    layouts = FakeLayouts([])
    layouts.covered[("t", 0)] = 10
    layouts.forget(("t", 0))  # a seek, a revocation: the coverage shrinks
    layouts._forget_topic("t")
    assert layouts.covered_version == 2
