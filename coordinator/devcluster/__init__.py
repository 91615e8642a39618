"""The local development cluster behind ``ordered cluster``: real Kafka and ZooKeeper.

Jars come from Maven Central (:mod:`coordinator.devcluster.jars`), processes are
started and stopped by pid (:mod:`coordinator.devcluster.process`), and the cluster's
state lives in a directory (:mod:`coordinator.devcluster.cluster`).
"""

from coordinator.devcluster.cluster import (
    ClusterState,
    default_dir,
    down,
    fetch,
    load_state,
    status,
    up,
)

__all__ = ["ClusterState", "default_dir", "down", "fetch", "load_state", "status", "up"]
