"""Autoscaling policies and the autoscaler's status of a topic in the layout store."""

from __future__ import annotations

from coordinator.client.store import paths
from coordinator.client.store.autoscale_records import AutoscalePolicy, AutoscaleStatus
from coordinator.client.store.topics import TopicStore

__all__ = ["AutoscaleStore"]


class AutoscaleStore(TopicStore):
    """Autoscaling policies and status (part of :class:`~coordinator.client.store.LayoutStore`)."""

    def autoscale_policy(self, topic: str) -> AutoscalePolicy | None:
        """Return the topic's autoscaling policy, ``None`` when none is set.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.autoscale_path(self._root, topic)
        policy: AutoscalePolicy | None = self._topic_record(path, AutoscalePolicy, topic)
        return policy

    def set_autoscale_policy(self, policy: AutoscalePolicy) -> None:
        """Store the policy (idempotent; the topic must be adopted).

        Raises:
            NotAdoptedError: The topic is not adopted.
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.autoscale_path(self._root, policy.topic)
        self._put_setting(policy.topic, path, policy.to_json())

    def clear_autoscale_policy(self, topic: str) -> bool:
        """Remove the topic's policy and its status; return whether a policy was set.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        status = paths.autoscale_status_path(self._root, topic)
        self._run(f"delete {status}", self._delete, status)
        path = paths.autoscale_path(self._root, topic)
        removed: bool = self._run(f"delete {path}", self._delete, path)
        return removed

    def autoscale_status(self, topic: str) -> AutoscaleStatus | None:
        """Return the autoscaler's status of the topic, ``None`` before its first decision.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        path = paths.autoscale_status_path(self._root, topic)
        status: AutoscaleStatus | None = self._topic_record(path, AutoscaleStatus, topic)
        return status

    def put_autoscale_status(self, status: AutoscaleStatus) -> None:
        """Write the autoscaler's status of a topic (idempotent).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        path = paths.autoscale_status_path(self._root, status.topic)
        self._run(f"write {path}", self._put, path, status.to_json())
