"""Every znode path of the ordering layer (schema in ``docs/protocol.md``).

Every function takes the store root (``/ordered`` by default) first. The layout store
lives under ``{root}/topics``, the position service under ``{root}/groups`` (group ids
and member ids are percent-encoded, ``urllib.parse.quote(name, safe="")``, so any id
is one znode name), the daemons' election under ``{root}/coordinator``.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Final

__all__ = [
    "AUTOSCALE_NODE",
    "DEFAULT_ROOT",
    "ack_path",
    "acks_path",
    "acl_policy_path",
    "autoscale_path",
    "autoscale_status_path",
    "barrier_ack_path",
    "barrier_acks_path",
    "barrier_announcement_path",
    "barrier_consumer_path",
    "barrier_consumers_path",
    "barrier_member_path",
    "barrier_members_path",
    "barrier_rewind_ack_path",
    "barrier_rewind_acks_path",
    "barrier_topic_path",
    "barrier_topics_path",
    "check_root",
    "check_topic",
    "election_path",
    "epoch_node",
    "epoch_path",
    "epochs_path",
    "feature_path",
    "features_path",
    "group_member_path",
    "group_members_path",
    "group_node",
    "group_path",
    "group_registration_path",
    "group_seen_path",
    "groups_path",
    "interest_member_path",
    "interest_path",
    "interest_topics_path",
    "lock_path",
    "producer_path",
    "producers_path",
    "progress_partition_path",
    "progress_path",
    "retention_path",
    "retired_partition_path",
    "retired_path",
    "rewind_path",
    "topic_path",
    "topics_path",
]

DEFAULT_ROOT: Final = "/ordered"
"""The default store root (``ordered.zookeeper.root``, ``--root``)."""

# Kafka's own rule for topic names; it also keeps them safe as znode names.
_TOPIC = re.compile(r"[A-Za-z0-9._-]{1,249}")
_ID = re.compile(r"[A-Za-z0-9._:@-]{1,200}")


def check_root(root: str) -> str:
    """Return ``root`` without a trailing slash.

    Raises:
        ValueError: ``root`` is not an absolute ZooKeeper path.
    """
    if not root.startswith("/") or "//" in root:
        raise ValueError(f"store root must be an absolute ZooKeeper path, got {root!r}")
    return root.rstrip("/") or "/"


def check_topic(topic: str) -> str:
    """Return ``topic`` if it is a legal Kafka topic name.

    Raises:
        ValueError: It is not.
    """
    if not _TOPIC.fullmatch(topic) or topic in (".", ".."):
        raise ValueError(f"not a valid Kafka topic name: {topic!r}")
    return topic


def _check_id(producer_id: str) -> str:
    if not _ID.fullmatch(producer_id) or producer_id in (".", ".."):
        raise ValueError(f"not a valid producer id: {producer_id!r}")
    return producer_id


def _join(root: str, *parts: str) -> str:
    base = check_root(root)
    return (base if base != "/" else "") + "/" + "/".join(parts)


def topics_path(root: str) -> str:
    """``{root}/topics``."""
    return _join(root, "topics")


def topic_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}``: the :class:`TopicRecord`."""
    return _join(root, "topics", check_topic(topic))


def epochs_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/epochs``."""
    return topic_path(root, topic) + "/epochs"


def epoch_node(epoch: int) -> str:
    """The znode name of ``epoch``: ten digits, so names sort like numbers."""
    if epoch < 0:
        raise ValueError(f"epoch must be >= 0, got {epoch}")
    return f"{epoch:010d}"


def epoch_path(root: str, topic: str, epoch: int) -> str:
    """``{root}/topics/{topic}/epochs/{epoch:010d}``: the :class:`EpochRecord`."""
    return epochs_path(root, topic) + "/" + epoch_node(epoch)


def acks_path(root: str, topic: str, epoch: int) -> str:
    """``.../epochs/{epoch:010d}/acks``."""
    return epoch_path(root, topic, epoch) + "/acks"


def ack_path(root: str, topic: str, epoch: int, producer_id: str) -> str:
    """``.../epochs/{epoch:010d}/acks/{id}``: an :class:`AckRecord`."""
    return acks_path(root, topic, epoch) + "/" + _check_id(producer_id)


def producers_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/producers``."""
    return topic_path(root, topic) + "/producers"


def producer_path(root: str, topic: str, producer_id: str) -> str:
    """``{root}/topics/{topic}/producers/{id}``: an ephemeral :class:`ProducerRecord`."""
    return producers_path(root, topic) + "/" + _check_id(producer_id)


def lock_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/lock``: the kazoo ``Lock`` of transitions."""
    return topic_path(root, topic) + "/lock"


def election_path(root: str) -> str:
    """``{root}/coordinator/election``: the kazoo ``Election`` of daemons."""
    return _join(root, "coordinator", "election")


def groups_path(root: str) -> str:
    """``{root}/groups``: the position service, one child per consumer group."""
    return _join(root, "groups")


def group_path(root: str, group: str) -> str:
    """``{root}/groups/{g}``, ``{g}`` the percent-encoded group id."""
    if not group:
        raise ValueError("a consumer group id must not be empty")
    return groups_path(root) + "/" + urllib.parse.quote(group, safe="")


def interest_topics_path(root: str, group: str) -> str:
    """``{root}/groups/{g}/interest``: one child per topic some member waits in."""
    return group_path(root, group) + "/interest"


def interest_path(root: str, group: str, topic: str) -> str:
    """``{root}/groups/{g}/interest/{topic}``: one child per waiting member."""
    return interest_topics_path(root, group) + "/" + check_topic(topic)


def interest_member_path(root: str, group: str, topic: str, member: str) -> str:
    """``.../interest/{topic}/{member}`` (member percent-encoded): an ``Interest``."""
    if not member:
        raise ValueError("a member id must not be empty")
    return interest_path(root, group, topic) + "/" + urllib.parse.quote(member, safe="")


def group_members_path(root: str, group: str) -> str:
    """``{root}/groups/{g}/members``: one child per live consumer of the group."""
    return group_path(root, group) + "/members"


def group_member_path(root: str, group: str, member: str) -> str:
    """``.../members/{member}`` (member percent-encoded): a ``GroupMemberRecord``."""
    if not member:
        raise ValueError("a member id must not be empty")
    return group_members_path(root, group) + "/" + urllib.parse.quote(member, safe="")


def progress_path(root: str, group: str, topic: str) -> str:
    """``{root}/groups/{g}/progress/{topic}``: one child per partition."""
    return group_path(root, group) + "/progress/" + check_topic(topic)


def progress_partition_path(root: str, group: str, topic: str, partition: int) -> str:
    """``.../progress/{topic}/{partition}``: a ``Progress`` record."""
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    return progress_path(root, group, topic) + f"/{partition}"


def retired_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/retired``."""
    return topic_path(root, topic) + "/retired"


def retired_partition_path(root: str, topic: str, partition: int) -> str:
    """``{root}/topics/{topic}/retired/{partition}``: a :class:`RetiredRecord`."""
    if partition < 0:
        raise ValueError(f"partition must be >= 0, got {partition}")
    return retired_path(root, topic) + f"/{partition}"


def retention_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/retention``: the :class:`RetentionRecord`, if set."""
    return topic_path(root, topic) + "/retention"


AUTOSCALE_NODE: Final = "autoscale"
"""The name of a topic node's child that holds its autoscaling policy."""


def autoscale_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/autoscale``: the :class:`AutoscalePolicy`, if set."""
    return topic_path(root, topic) + "/" + AUTOSCALE_NODE


def autoscale_status_path(root: str, topic: str) -> str:
    """``{root}/topics/{topic}/autoscale-status``: the :class:`AutoscaleStatus`, if any."""
    return topic_path(root, topic) + "/autoscale-status"


def group_node(group: str) -> str:
    """The znode name of a consumer group: the id percent-encoded (as in :func:`group_path`)."""
    return group_path("/", group).rsplit("/", 1)[1]


def group_registration_path(root: str, group: str, topic: str) -> str:
    """``{root}/groups/{g}/topics/{topic}``: a :class:`GroupRegistration`."""
    return group_path(root, group) + f"/topics/{check_topic(topic)}"


def group_seen_path(root: str, group: str, topic: str) -> str:
    """``{root}/groups/{g}/seen/{topic}``: a :class:`GroupSeenRecord`."""
    return group_path(root, group) + f"/seen/{check_topic(topic)}"


def rewind_path(root: str, group: str, topic: str) -> str:
    """``{root}/groups/{g}/rewinds/{topic}``: a data-less marker whose writes signal rewinds.

    A member that moves the group's progress on a partition of ``topic`` back (a seek
    back, an explicit start offset) writes it; every member reads its last-write zxid in
    the fetch check and re-decides its gates when it changed.
    """
    return group_path(root, group) + f"/rewinds/{check_topic(topic)}"


def acl_policy_path(root: str) -> str:
    """``{root}/acl``: the ``AclPolicyRecord`` of ``ordered acl apply``."""
    return _join(root, "acl")


# --- the consumer barrier (docs/consumer-barrier.md) -----------------------------------
# Everything under {root}/features and {root}/barrier is new: code of v0.5.0 and before
# never reads it, so its records can be added without bumping an existing one.


def features_path(root: str) -> str:
    """``{root}/features``: the feature flags."""
    return _join(root, "features")


def feature_path(root: str, feature: str) -> str:
    """``{root}/features/{feature}``: a ``FeatureRecord`` (absent: the feature is off)."""
    return _join(root, "features", _check_id(feature))


def barrier_topics_path(root: str) -> str:
    """``{root}/barrier/topics``: the consumer barrier's nodes, by topic."""
    return _join(root, "barrier", "topics")


def barrier_members_path(root: str) -> str:
    """``{root}/barrier/members``: the consumers' member nodes."""
    return _join(root, "barrier", "members")


def barrier_topic_path(root: str, topic: str) -> str:
    """``{root}/barrier/topics/{topic}``: the consumer barrier's nodes of ``topic``."""
    return _join(root, "barrier", "topics", check_topic(topic))


def barrier_announcement_path(root: str, topic: str) -> str:
    """``{root}/barrier/topics/{topic}/announcement``: the ``AnnouncementRecord``."""
    return barrier_topic_path(root, topic) + "/announcement"


def barrier_consumers_path(root: str, topic: str) -> str:
    """``{root}/barrier/topics/{topic}/consumers``: the registrations of its consumers."""
    return barrier_topic_path(root, topic) + "/consumers"


def barrier_consumer_path(root: str, topic: str, consumer_id: str) -> str:
    """``.../consumers/{id}``: a ``BarrierRegistration`` (ephemeral)."""
    return barrier_consumers_path(root, topic) + "/" + _check_id(consumer_id)


def barrier_acks_path(root: str, topic: str) -> str:
    """``{root}/barrier/topics/{topic}/acks``: the consumers' acks of the announcement."""
    return barrier_topic_path(root, topic) + "/acks"


def barrier_ack_path(root: str, topic: str, consumer_id: str) -> str:
    """``.../acks/{id}``: a ``BarrierAck`` (ephemeral)."""
    return barrier_acks_path(root, topic) + "/" + _check_id(consumer_id)


def barrier_rewind_acks_path(root: str, topic: str) -> str:
    """``{root}/barrier/topics/{topic}/rewinds``: the consumers' acks of rewind markers."""
    return barrier_topic_path(root, topic) + "/rewinds"


def barrier_rewind_ack_path(root: str, topic: str, consumer_id: str) -> str:
    """``.../rewinds/{id}``: a ``RewindAck`` (ephemeral)."""
    return barrier_rewind_acks_path(root, topic) + "/" + _check_id(consumer_id)


def barrier_member_path(root: str, consumer_id: str) -> str:
    """``{root}/barrier/members/{id}``: a consumer's member node (ephemeral).

    A controller that gives up on a consumer deletes it (an eviction); the consumer's
    lease renewal (``sync`` + ``exists`` of this node) finds it gone.
    """
    return barrier_members_path(root) + "/" + _check_id(consumer_id)
