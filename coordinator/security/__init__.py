"""Security set-up of a cluster: ZooKeeper ACLs by role (``ordered acl apply``)."""
