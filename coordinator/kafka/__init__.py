"""Kafka admin access of the coordinator service: admin helpers, group probes and
each partition's replicas."""
