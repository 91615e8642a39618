"""The coordinator: the client kernel and the coordinator service, one folder per concern.

``client/`` is the kernel the clients (``ordered.producer``, ``ordered.consumer``,
``spark_source``) import: errors, the layout store, hooks, ZooKeeper, histories, topic
ids, positions, Kafka security and the Kafka retry policy. Every other folder is the
coordinator service: ``control/`` (adopt, expand, shrink), ``daemon/``, ``relay/``
(positions), ``groups/``, ``trims/``, ``kafka/`` (admin), ``metrics/``, ``security/``,
``autoscale/`` and ``devcluster/``. Import contracts in ``pyproject.toml`` keep the
kernel and the clients off the service.
"""
