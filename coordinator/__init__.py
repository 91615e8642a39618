"""The coordinator: the kernel and the coordinator service, one folder per concern.

``client/`` is the kernel every process imports (the clients ``ordered.producer``,
``ordered.consumer``, ``spark_source``, the service and the tools): errors, the layout
store, hooks and their Prometheus implementation, ZooKeeper, histories, topic ids,
positions, Kafka security, the Kafka retry policy, the Kafka admin helper and
confluent-kafka's private parts. Every other folder is the coordinator service:
``control/`` (adopt, expand, shrink), ``daemon/``, ``relay/`` (positions), ``groups/``,
``trims/``, ``metrics/`` (the daemon's), ``security/`` and ``autoscale/``. Import
contracts in ``pyproject.toml`` keep the kernel and the clients off the service. The
local dev cluster is a tool: ``ordered/devcluster/``.
"""
