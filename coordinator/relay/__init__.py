"""The position relay: the leader relays group positions (waits, commit tail)."""
