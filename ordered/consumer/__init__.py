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

The parts, one concern each. Every assigned partition's state lives in one object
(:class:`~ordered.consumer.partition.PartState`, after Kafka's ``TopicPartitionState``),
pure; one shell carries out what it asks for; the stages of a call around them:

* :mod:`~ordered.consumer.wrapper`: the confluent API surface; holds the parts below;
* :mod:`~ordered.consumer.calls`: the one loop of ``poll``/``consume`` and the service
  step each slow call starts with (partition tracking, layout upkeep, stashes, what the
  fetch stage's checks found: :class:`~ordered.consumer.calls.ConsumerUpkeep`);
* :mod:`~ordered.consumer.rebalance`: ``on_assign``/``on_revoke``/``on_lost``;
* :mod:`~ordered.consumer.announce`: boundary announcements and stored offsets;
* :mod:`~ordered.consumer.fetch`: the fetch stage: batches from librdkafka, released
  once their layout check answered (it leaves a note for the loop; it calls nothing
  above it);
* :mod:`~ordered.consumer.replay`: rewinds (seeks, resets, explicit offsets);
* :mod:`~ordered.consumer.judge`: the judge stage: which records of a batch may be given
  (fast and checked paths), every gate decision
  (:class:`~ordered.consumer.judge.GateDecider`, over one view of the committed
  offsets), and when held gates are decided again;
* :mod:`~ordered.consumer.audit`: the violation audit (its routing calls in one place);
* :mod:`~ordered.consumer.state`: the shell: what the parts share, applying a
  partition's changes (``Core.fire``), and the one caller of librdkafka's
  ``pause``/``resume`` (:class:`~ordered.consumer.state.PauseArbiter`);
* :mod:`~ordered.consumer.probe`: the log-start probe;
* :mod:`~ordered.consumer.counters`: the counters behind ``metrics`` (the first hook;
  events go through :mod:`coordinator.kernel.hooks`);
* :mod:`~ordered.consumer.layouts`: histories, their watcher, the fetch check;
* :mod:`~ordered.consumer.partition`: one partition's state, pure: its gate, pause
  wishes and stash, its announcement, its replay marks;
* :mod:`~ordered.consumer.barrier`, :mod:`~ordered.consumer.checks`,
  :mod:`~ordered.consumer.pacing`, :mod:`~ordered.consumer.scan`: the consumer barrier's
  client, the fetch check's values, the pace of the checks, the compiled per-record
  pass with its reference.

They import each other in layers, in that order (an import-linter contract in
``pyproject.toml`` that names every module): ``wrapper``, ``calls``, ``rebalance``,
``announce``/``fetch``/``replay``, ``judge``, ``audit``, ``state``/``probe``,
``counters``/``layouts``, ``barrier``/``checks``/``pacing``/``partition``/``scan``; a
lower layer never imports a higher one, nor a part its neighbour in the same layer.
The one call that goes up is a wake-up: a layout change or an answered check, seen on
another thread, ends a waiting call early (``CallPath.halt``, as
``KafkaConsumer.wakeup()`` does, but it raises nothing).
"""

from __future__ import annotations

from ordered.consumer.partition import GateState, GateStatus
from ordered.consumer.wrapper import OrderedConsumer

__all__ = ["GateState", "GateStatus", "OrderedConsumer"]
