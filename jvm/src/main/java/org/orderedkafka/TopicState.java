package org.orderedkafka;

import java.util.EnumSet;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ThreadLocalRandom;
import org.apache.kafka.common.Cluster;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.errors.TimeoutException;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * One topic inside one producer: its state machine, its route, and the counts the
 * barrier's drain is judged by. Every field is guarded by this object's monitor; the send
 * path ({@code partition()}), the acks (the producer's I/O thread) and the ZooKeeper worker
 * all take it, and nothing that waits for ZooKeeper or Kafka runs while holding it (only
 * {@link Object#wait} in the pause, which releases it).
 *
 * <p>States (one checked writer, {@link #setState}, against {@link #TRANSITIONS}), as
 * Python's {@code ordered/producer_routes.py}:
 *
 * <pre>
 *   UNKNOWN   -> PLAIN | ROUTING | SWITCHING | SUSPENDED   first use: register, read the record
 *   PLAIN     -> PLAIN | ROUTING | SWITCHING               adopted (or made ordered)
 *   ROUTING   -> ROUTING | SWITCHING | PLAIN | SUSPENDED   a pending epoch; un-adopted; session down
 *   SWITCHING -> SWITCHING | ROUTING | PLAIN | SUSPENDED   drained and acked; ...
 *   SUSPENDED -> SUSPENDED | PLAIN | ROUTING | SWITCHING   the session is back and the record re-read
 * </pre>
 *
 * <p><b>The drain (pause mode, the only one on the JVM).</b> kafka-clients gives a
 * partitioner no way to tell which acknowledgement belongs to which record before 4.1, and
 * {@code onSend} cannot refuse one, so records are not tracked across a switch: while a
 * switch is open ({@code SWITCHING}), {@code partition()} blocks the sending thread (up to
 * {@code max.block.ms}, then a {@code TimeoutException} fails the send) until every record
 * of the topic that passed the interceptor's {@code onSend} is acknowledged (success or
 * failure) or is itself one of the blocked sends: {@code inflight == blocked}. Those blocked
 * sends have not been routed, so at that instant no record routed by an older layout is
 * left undelivered; the ack is queued for the worker (no ZooKeeper round trip on the send
 * path) and the blocked sends go on by the new route. A send from the producer's own I/O
 * thread (a callback that sends) is refused instead of blocked: it would wait for acks only
 * that thread can deliver.
 */
final class TopicState {
  private static final Logger LOG = LoggerFactory.getLogger(TopicState.class);

  enum State {
    UNKNOWN,
    PLAIN,
    ROUTING,
    SWITCHING,
    SUSPENDED
  }

  static final Map<State, EnumSet<State>> TRANSITIONS =
      Map.of(
          State.UNKNOWN, EnumSet.of(State.PLAIN, State.ROUTING, State.SWITCHING, State.SUSPENDED),
          State.PLAIN, EnumSet.of(State.PLAIN, State.ROUTING, State.SWITCHING),
          State.ROUTING, EnumSet.of(State.ROUTING, State.SWITCHING, State.PLAIN, State.SUSPENDED),
          State.SWITCHING, EnumSet.of(State.SWITCHING, State.ROUTING, State.PLAIN, State.SUSPENDED),
          State.SUSPENDED, EnumSet.of(State.SUSPENDED, State.PLAIN, State.ROUTING, State.SWITCHING));

  /** An ack the worker must write. */
  static final class AckDue {
    final String topic;
    final long epoch;
    final Map<Integer, Long> lastOffsets;

    AckDue(String topic, long epoch, Map<Integer, Long> lastOffsets) {
      this.topic = topic;
      this.epoch = epoch;
      this.lastOffsets = lastOffsets;
    }
  }

  final String topic;
  final boolean valid;
  private volatile State state = State.UNKNOWN;
  private Records.TopicRecord record;
  private Layout layout;
  private String algorithm = Hashing.MURMUR3;
  /** Records of this topic that passed onSend and are not acknowledged yet. */
  private long inflight;
  /** Sends waiting in partition() for the open switch to drain. */
  private int blocked;
  /** The pending epoch of the open switch, or -1. */
  private long switchEpoch = -1;
  private final Set<Long> acked = new HashSet<>();
  /** Partition -> the highest offset acknowledged since the last ack (all older-epoch records). */
  private Map<Integer, Long> lastOffsets = new HashMap<>();
  /** A record failed in a way that does not prove it was never written (a forced close). */
  private boolean uncertain;
  /** Registered under ZooKeeper (false: ACLs kept the producer from creating the topic's node). */
  boolean registered;

  private boolean warnedCompacted;
  private int sticky = -1;
  private long stickyBytes;

  /** Where acks that became due go (the producer queues them for the worker; never blocks). */
  private final java.util.function.Consumer<AckDue> ackSink;

  TopicState(String topic, java.util.function.Consumer<AckDue> ackSink) {
    this.topic = topic;
    this.valid = Records.validTopic(topic);
    this.ackSink = ackSink;
  }

  /** The state (a volatile read: the send path checks it for every record). */
  State state() {
    return state;
  }

  synchronized Records.TopicRecord record() {
    return record;
  }

  synchronized Layout layout() {
    return layout;
  }

  synchronized long inflight() {
    return inflight;
  }

  /** The one checked writer of the state. */
  private void setState(State next) {
    if (!TRANSITIONS.get(state).contains(next)) {
      throw new IllegalStateException("illegal topic state transition " + state + " -> " + next);
    }
    if (state != next) {
      LOG.debug("{}: {} -> {}", topic, state, next);
    }
    state = next;
    notifyAll();
  }

  // --- counts -------------------------------------------------------------------------

  synchronized void sent() {
    inflight++;
  }

  /** An acknowledgement (success or failure); may drain an open switch. */
  synchronized void acked(int partition, long offset, Exception exception) {
    inflight--;
    if (exception == null) {
      if (partition >= 0 && offset >= 0) {
        Long before = lastOffsets.get(partition);
        if (before == null || before < offset) {
          lastOffsets.put(partition, offset);
        }
      }
    } else if (exception.getClass() == KafkaException.class
        && String.valueOf(exception.getMessage()).contains("closed forcefully")) {
      // close(Duration.ZERO) aborts batches that may already be on a broker.
      uncertain = true;
    }
    if (switchEpoch >= 0) {
      drainIfDone();
    }
  }

  /** Close the open switch if nothing routed before it is unacknowledged; report its ack. */
  private boolean drainIfDone() {
    if (switchEpoch < 0 || inflight != blocked) {
      return false;
    }
    long epoch = switchEpoch;
    switchEpoch = -1;
    acked.add(epoch);
    Map<Integer, Long> offsets = lastOffsets;
    lastOffsets = new HashMap<>();
    if (state == State.SWITCHING) {
      setState(State.ROUTING);
    }
    notifyAll();
    ackSink.accept(new AckDue(topic, epoch, offsets));
    return true;
  }

  // --- records -> state -----------------------------------------------------------------

  /**
   * Move to the state {@code next} calls for (the worker, or the first use).
   *
   * @param next the topic record (null: not adopted)
   * @param usable whether the ZooKeeper session is usable (else an ordered topic is
   *     suspended); read under this monitor, so a suspension racing with it wins
   */
  synchronized void apply(Records.TopicRecord next, java.util.function.BooleanSupplier usable) {
    if (next != null && record != null && next.olderThan(record)) {
      return; // delivered late: a newer record was applied already
    }
    Records.TopicRecord previous = record;
    record = next;
    if (next == null || !next.ordered) {
      if (next != null && next.pending >= 0 && acked.add(next.pending)) {
        ackSink.accept(new AckDue(topic, next.pending, Map.of())); // unordered: nothing to drain
      }
      switchEpoch = -1;
      layout = null;
      setState(State.PLAIN);
      return;
    }
    if (next.compacted && next.active > next.initial && !warnedCompacted) {
      warnedCompacted = true;
      LOG.warn(
          "{}: compacted and grown: the JVM plugins route by the layout but send no tombstone "
              + "copies to ancestor partitions (KIP-253 section 9); a key's older values may stay "
              + "in its former partition after compaction",
          topic);
    }
    layout = new Layout(next.initial, next.active, next.epoch);
    algorithm = next.algorithm;
    if (previous == null || previous.active != next.active) {
      sticky = -1;
    }
    State target = State.ROUTING;
    if (next.pending >= 0 && !acked.contains(next.pending)) {
      if (switchEpoch == next.pending) {
        target = State.SWITCHING;
      } else if (state == State.UNKNOWN) {
        // Nothing was ever routed to this topic: nothing to drain.
        acked.add(next.pending);
        ackSink.accept(new AckDue(topic, next.pending, Map.of()));
      } else {
        switchEpoch = next.pending;
        target = State.SWITCHING;
      }
    } else {
      switchEpoch = -1; // sealed (or acked): no switch waits
    }
    if (!usable.getAsBoolean()) {
      target = State.SUSPENDED;
    }
    setState(target);
    drainIfDone();
  }

  /** The session is suspended or lost: routed topics refuse keyed records. */
  synchronized void suspend() {
    if (state == State.ROUTING || state == State.SWITCHING) {
      setState(State.SUSPENDED);
    }
  }

  /** For close: the open switch's ack and any pending epoch's, if everything was acknowledged. */
  synchronized boolean clean() {
    return inflight <= 0 && !uncertain;
  }

  synchronized AckDue closeSwitch() {
    if (switchEpoch < 0) {
      return null;
    }
    long epoch = switchEpoch;
    switchEpoch = -1;
    acked.add(epoch);
    return new AckDue(topic, epoch, lastOffsets);
  }

  // --- routing ----------------------------------------------------------------------------

  /**
   * The partition of a record (the send path).
   *
   * @param key the serialized key, or null
   * @param size the serialized value's size (for the sticky partition of unkeyed records)
   * @param deadlineMs when a paused send gives up ({@code max.block.ms} from its start)
   * @param ioThread the caller is the producer's I/O thread (never block it)
   */
  synchronized int partition(byte[] key, int size, Cluster cluster, long deadlineMs, boolean ioThread)
      throws InterruptedException {
    while (true) {
      switch (state) {
        case PLAIN:
          return plain(key, size, cluster);
        case UNKNOWN:
          throw new LayoutUnavailableException("the layout of " + topic + " was not read yet; retry");
        case ROUTING:
          return key == null ? unkeyed(size, cluster, layout.active()) : layout.partitionFor(key, algorithm);
        case SUSPENDED:
          if (key == null && layout != null) {
            return unkeyed(size, cluster, layout.active()); // no order to keep
          }
          throw new LayoutUnavailableException(
              "cannot route a keyed record to " + topic + ": the ZooKeeper session is suspended or"
                  + " lost, so its layout may be stale; retry once the session is back");
        case SWITCHING:
          if (ioThread) {
            throw new LayoutUnavailableException(
                "cannot route a record to " + topic + " from the producer's I/O thread while the"
                    + " route switch to epoch " + switchEpoch + " drains; retry");
          }
          long left = deadlineMs - System.currentTimeMillis();
          if (left <= 0) {
            throw new TimeoutException(
                "the route switch of " + topic + " to epoch " + switchEpoch + " did not drain within"
                    + " max.block.ms (records sent before it are not yet acknowledged)");
          }
          blocked++;
          try {
            if (!drainIfDone()) {
              wait(Math.min(left, 100));
            }
          } finally {
            blocked--;
          }
          break;
        default:
          throw new IllegalStateException(String.valueOf(state));
      }
    }
  }

  /** Kafka's own routing for a topic with no layout: murmur2 for keys, sticky without. */
  private int plain(byte[] key, int size, Cluster cluster) {
    int count = cluster.partitionsForTopic(topic).size();
    if (count <= 0) {
      count = 1;
    }
    if (key != null) {
      return (Hashing.murmur2(key) & 0x7fffffff) % count;
    }
    return unkeyed(size, cluster, count);
  }

  /**
   * A sticky partition among the first {@code bound} partitions (never a retired one):
   * kept for {@code batch.size} bytes, then another available one, as Kafka's built-in
   * partitioner does; {@link #newBatch} moves it on kafka-clients 3.x.
   */
  private int unkeyed(int size, Cluster cluster, int bound) {
    if (sticky < 0 || sticky >= bound || stickyBytes >= batchSize) {
      sticky = pick(cluster, bound, sticky);
      stickyBytes = 0;
    }
    stickyBytes += Math.max(size, 1);
    return sticky;
  }

  int batchSize = 16_384;

  synchronized void newBatch(int previous) {
    if (previous == sticky) {
      stickyBytes = Long.MAX_VALUE / 2;
    }
  }

  private int pick(Cluster cluster, int bound, int avoid) {
    List<PartitionInfo> available = cluster.availablePartitionsForTopic(topic);
    int[] choices = available.stream().mapToInt(PartitionInfo::partition).filter(p -> p < bound).toArray();
    ThreadLocalRandom random = ThreadLocalRandom.current();
    if (choices.length == 0) {
      return random.nextInt(bound);
    }
    if (choices.length == 1) {
      return choices[0];
    }
    int pick = choices[random.nextInt(choices.length)];
    return pick == avoid ? choices[(indexOf(choices, pick) + 1) % choices.length] : pick;
  }

  private static int indexOf(int[] values, int value) {
    for (int i = 0; i < values.length; i++) {
      if (values[i] == value) {
        return i;
      }
    }
    return 0;
  }
}
