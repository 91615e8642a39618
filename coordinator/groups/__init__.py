"""Consumer groups: which groups are interested in a topic and where a group waits."""
