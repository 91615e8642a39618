"""The coordinator daemon (``ordered coordinator``): election, epochs, relay, sweeps.

``from coordinator.daemon import CoordinatorDaemon, Role`` reads as it always did.
"""

from coordinator.daemon.daemon import CoordinatorDaemon, Role

__all__ = ["CoordinatorDaemon", "Role"]
