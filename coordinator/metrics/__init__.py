"""Prometheus exporters: the client hooks' and the coordinator daemon's."""
