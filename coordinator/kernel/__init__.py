"""The kernel: only what the clients (producer, consumer, Spark source and sink) import.

Errors, the layout store, hooks, the ZooKeeper client factory and its session and ACLs,
topic histories, identities, topic ids, positions, Kafka client security and the Kafka
retry policy. It imports nothing of the coordinator service beside it (an import-linter
contract in pyproject.toml)."""
