"""Autoscaling policies and the autoscaler's status of a topic in the layout store."""

from __future__ import annotations

from typing import Final

from coordinator.kernel.store import paths
from coordinator.kernel.store.autoscale_records import AutoscalePolicy, AutoscaleStatus
from coordinator.kernel.store.topics import TopicSetting, TopicStore

__all__ = ["AutoscaleStore"]

_POLICY: Final = TopicSetting(paths.autoscale_path, AutoscalePolicy)
_STATUS: Final = TopicSetting(paths.autoscale_status_path, AutoscaleStatus)


class AutoscaleStore(TopicStore):
    """Autoscaling policies and status (part of :class:`~coordinator.kernel.store.LayoutStore`)."""

    def autoscale_policy(self, topic: str) -> AutoscalePolicy | None:
        """Return the topic's autoscaling policy, ``None`` when none is set.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        return self._get_setting(_POLICY, topic)

    def set_autoscale_policy(self, policy: AutoscalePolicy) -> None:
        """Store the policy (idempotent; the topic must be adopted).

        Raises:
            NotAdoptedError: The topic is not adopted.
            StoreError: ZooKeeper is unreachable.
        """
        self._set_setting(_POLICY, policy)

    def clear_autoscale_policy(self, topic: str) -> bool:
        """Remove the topic's policy and its status; return whether a policy was set.

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        self._clear_setting(_STATUS, topic)
        return self._clear_setting(_POLICY, topic)

    def autoscale_status(self, topic: str) -> AutoscaleStatus | None:
        """Return the autoscaler's status of the topic, ``None`` before its first decision.

        Raises:
            StoreError: ZooKeeper is unreachable or the record fails its check.
        """
        return self._get_setting(_STATUS, topic)

    def put_autoscale_status(self, status: AutoscaleStatus) -> None:
        """Write the autoscaler's status of a topic (idempotent; no adoption check).

        Raises:
            StoreError: ZooKeeper is unreachable.
        """
        self._set_setting(_STATUS, status, adopted=False)
