"""The local development cluster behind ``ordered cluster``: real Kafka and ZooKeeper.

Jars come from Maven Central (:mod:`ordered.devcluster.jars`), processes are
started and stopped by pid (:mod:`ordered.devcluster.process`), and the cluster's
state lives in a directory (:mod:`ordered.devcluster.cluster`).
"""

from ordered.devcluster.cluster import (
    ClusterState,
    default_dir,
    down,
    fetch,
    load_state,
    status,
    up,
)

__all__ = ["ClusterState", "default_dir", "down", "fetch", "load_state", "status", "up"]
