"""Kafka admin access of the coordinator service: admin helpers and group probes."""
