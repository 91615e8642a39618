"""Automatic resharding: a per-topic policy, a decision rule, and the daemon's runner.

See ``docs/autoscale.md``. :mod:`coordinator.autoscale.decide` is the pure rule,
:mod:`coordinator.autoscale.runner` samples Kafka and acts, and the policy records
live in :mod:`coordinator.kernel.store.autoscale`.
"""

from coordinator.autoscale.decide import Action, Decision, RateSample, Thresholds, decide
from coordinator.autoscale.runner import DEFAULT_AUTOSCALE_INTERVAL_S, Autoscaler

__all__ = [
    "DEFAULT_AUTOSCALE_INTERVAL_S",
    "Action",
    "Autoscaler",
    "Decision",
    "RateSample",
    "Thresholds",
    "decide",
]
