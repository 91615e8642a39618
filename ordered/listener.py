"""KIP-253's ``PartitionKeyRebalanceListener`` for :class:`~ordered.consumer.OrderedConsumer`."""

from __future__ import annotations

from typing import Any

__all__ = ["PartitionKeyRebalanceListener"]


class PartitionKeyRebalanceListener:
    """Callbacks around keys that move between partitions (KIP-253, "Consumer API").

    Subclass and override either method; both do nothing by default. They run in the
    thread that calls ``poll``/``consume`` (like confluent's ``on_assign``), and an
    exception raised by either one is raised from that ``poll``/``consume`` call: the
    records the call would have returned are not delivered (the partitions are sought
    back, so the next call returns them again and re-runs the callback).
    """

    def on_partition_key_maybe_revoked(self, partitions: list[Any]) -> None:
        """Keys of ``partitions`` may now be consumed elsewhere: flush their state.

        Called when this consumer has delivered every record of a partition below a
        boundary at which some of its keys moved to another partition, before that
        position is committed and the other partition's consumer may start on them.

        Args:
            partitions: ``confluent_kafka.TopicPartition`` objects, each with the offset
                about to be committed.
        """

    def on_partition_key_assigned(self, partitions: list[Any]) -> None:
        """Keys new to ``partitions`` may arrive next: load their state.

        Called before the first record past a gate (a boundary where keys moved into
        the partition) is delivered, once every record that must precede it has been
        delivered and committed by the group.

        Args:
            partitions: ``confluent_kafka.TopicPartition`` objects, each with the offset
                of the boundary that was passed.
        """
