"""``OrderedConsumer``: a drop-in wrapper of ``confluent_kafka.Consumer`` that keeps key order.

It reads each subscribed topic's layout history from the layout store (ZooKeeper,
``docs/protocol.md``) and applies the gate rule of ``docs/consumer.md``
(:mod:`linear_hash.gating`): a record of partition ``b`` at or past a boundary ``B_b(e)``
is delivered only once the group has delivered and committed everything that must
precede it. A record that meets a closed gate is not returned: the partition is
paused, and that record with the rest of its partition's records from the same batch
is kept in a per-partition stash; when the gate opens, the stash goes out first and
the partition is resumed.

A consumer whose position on a partition ``a`` reaches a boundary where keys of ``a``
moved elsewhere calls ``on_partition_key_maybe_revoked([a])`` at the start of its next
``poll``/``consume``, then commits ``a`` synchronously at that position, so the
destination's consumer can proceed. Before the first record past a gate is delivered,
``on_partition_key_assigned`` runs. Both run in the thread that calls
``poll``/``consume``.

A new epoch is known before any record written under it is judged: after every fetch
the consumer checks, with one ZooKeeper round trip for the whole batch, that its
layouts are at least as new as what it fetched (:mod:`ordered.consumer.layouts`).

Commits and the guarantee:

* The group's *committed* offset is what gates read. A record counts as "delivered"
  for the rest of the group once its offset is committed.
* With ``enable.auto.commit=true`` (the default), librdkafka commits the offsets of
  records returned to the application every ``auto.commit.interval.ms``; a crash may
  lose records returned but not yet processed, exactly as with a plain consumer. Order
  is still kept: a destination never starts before its sources' tails were returned
  *and* committed.
* With ``enable.auto.commit=false`` the only commits the wrapper adds are the boundary
  commits after ``on_partition_key_maybe_revoked``, which mark everything returned from
  the source partition so far as done, and the commit of a rewound source's new
  position (``docs/consumer.md``, "Replays").
* With ``ordered.commit.mode=application`` (exactly-once pipelines) the wrapper never
  commits: a boundary passes once the application's own commit (plain, or the offsets
  of its transaction) covers it.
* A replay (a seek back, an offset reset, explicit start offsets) delivers every key
  in order: gates learned before a rewind are decided again
  (:mod:`~ordered.consumer.replay`).
* ``enable.auto.offset.store`` is handled by the wrapper (librdkafka would store
  offsets of records a gate holds back).
* Until ``on_partition_key_maybe_revoked`` has run for a source boundary, the offset
  stored for that partition stays one below it, and :meth:`OrderedConsumer.commit`
  runs due announcements before it commits. While an epoch in which a partition gives
  keys away is pending, that partition's stored offset does not advance.

The parts, one concern each:

* :mod:`~ordered.consumer.wrapper`: the confluent API surface; holds the parts below;
* :mod:`~ordered.consumer.calls`: partition tracking, layout upkeep, the layout state
  (:class:`~ordered.consumer.calls.ConsumerUpkeep`, a part the wrapper holds);
* :mod:`~ordered.consumer.rebalance`: ``on_assign``/``on_revoke``/``on_lost``;
* :mod:`~ordered.consumer.judge`: the fast and checked batch paths;
* :mod:`~ordered.consumer.audit`: the violation audit (its routing calls in one place);
* :mod:`~ordered.consumer.judge`: when held gates are re-checked; interest declarations;
* :mod:`~ordered.consumer.announce`: boundary announcements and stored offsets;
* :mod:`~ordered.consumer.fetch`: batches from librdkafka, released once checked;
* :mod:`~ordered.consumer.replay`: rewinds (seeks, resets, explicit offsets);
* :mod:`~ordered.consumer.judge`: every gate decision
  (:class:`~ordered.consumer.judge.GateDecider`), over one view of the committed
  offsets;
* :mod:`~ordered.consumer.state`: what they share;
* :mod:`~ordered.consumer.probe`: the log-start probe;
* :mod:`~ordered.consumer.partition`: one announcement's state machine (pure);
* :mod:`~ordered.consumer.counters`: the counters behind ``metrics`` (the first hook;
  events go through :mod:`coordinator.client.hooks`);
* :mod:`~ordered.consumer.partition`: the per-partition gate, pause and stash (pure);
* :mod:`~ordered.consumer.layouts`: histories, their watcher, the fetch check;
* :mod:`~ordered.consumer.ready`: checked records not yet judged;
* :mod:`~ordered.consumer.pacing`: the pace of the layout checks.

They import each other in layers, in that order (an import-linter contract in
``pyproject.toml`` that names every module): ``wrapper``, ``upkeep``,
``rebalance``/``batch``, ``audit``/``recheck``, ``announce``/``fetch``/``replay``,
``decide``, ``state``/``probe``, ``announcement``/``counters``/``gate``/``layouts``/``ready``,
``pacing``; a lower layer never imports a higher one, nor a part its neighbour in the
same layer.
"""

from __future__ import annotations

from ordered.consumer.partition import GateState, GateStatus
from ordered.consumer.wrapper import OrderedConsumer

__all__ = ["GateState", "GateStatus", "OrderedConsumer"]
