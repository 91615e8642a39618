"""Rebalance interposition: the wrapper's ``on_assign``/``on_revoke``/``on_lost``.

librdkafka calls these on the poll thread. Each one updates the per-partition state
first (boundary commits still due for revoked partitions go out while the assignment
is still ours), then calls the application's callback with the *wrapper* as the
consumer argument, as confluent would pass its own consumer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from confluent_kafka import TopicPartition

__all__ = ["Callback", "RebalanceHooks"]

Callback = Callable[..., Any]
"""A confluent rebalance callback: ``callback(consumer, partitions)``."""


class RebalanceHooks:
    """The three callbacks the wrapper gives librdkafka, around the application's.

    Args:
        owner: What the application's callbacks get as their consumer.
        track: Starts tracking partitions (gates apply to them).
        drop: Stops tracking one partition.
        announce: Runs due announcements (``announce(only=keys)``: of those partitions).
        placed: Gets the assigned partitions after the application's ``on_assign``
            (which may have set their start offsets).
    """

    def __init__(
        self,
        owner: Any,
        track: Callable[[Iterable[TopicPartition]], None],
        drop: Callable[[tuple[str, int]], None],
        announce: Callable[..., object],
        placed: Callable[[list[TopicPartition]], None] | None = None,
    ) -> None:
        self._owner = owner
        self._track = track
        self._drop = drop
        self._announce = announce
        self._placed = placed
        self.on_assign: Callback | None = None
        self.on_revoke: Callback | None = None
        self.on_lost: Callback | None = None

    def set(
        self, on_assign: Callback | None, on_revoke: Callback | None, on_lost: Callback | None
    ) -> None:
        """Set the application's callbacks (from ``subscribe``)."""
        self.on_assign, self.on_revoke, self.on_lost = on_assign, on_revoke, on_lost

    def assigned(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """librdkafka's ``on_assign``."""
        self._track(partitions)
        if self.on_assign is not None:
            self.on_assign(self._owner, partitions)
            if self._placed is not None:
                self._placed(partitions)

    def revoked(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """librdkafka's ``on_revoke``."""
        keys = {(tp.topic, tp.partition) for tp in partitions}
        self._announce(only=keys)
        for key in keys:
            self._drop(key)
        if self.on_revoke is not None:
            self.on_revoke(self._owner, partitions)

    def lost(self, _consumer: Any, partitions: list[TopicPartition]) -> None:
        """librdkafka's ``on_lost``; without an application ``on_lost``, ``on_revoke`` runs."""
        for tp in partitions:
            self._drop((tp.topic, tp.partition))
        if self.on_lost is not None:
            self.on_lost(self._owner, partitions)
        elif self.on_revoke is not None:
            self.on_revoke(self._owner, partitions)
