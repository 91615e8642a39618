package org.orderedkafka;

import java.util.EnumSet;
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
 * barrier's drain is judged by. State changes, the pause and the drain decision happen
 * under this object's monitor (taken by the send path, the acks on the producer's I/O
 * thread and the ZooKeeper worker; nothing that waits for ZooKeeper or Kafka runs while
 * holding it, only {@link Object#wait} in the pause, which releases it). The common case
 * takes no lock: a keyed record in {@code ROUTING} reads the volatile state and route, and
 * the counts are atomic. That is safe because a record is in {@code inflight} from its
 * {@code onSend} to its acknowledgement: a send that read the old route just before a
 * switch is still unacknowledged, and so still holds the drain back, when the switch
 * checks it.
 *
 * <p>States (one checked writer, {@link #setState}, against {@link #TRANSITIONS}), as
 * Python's {@code ordered/producer/routes.py}:
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
  /** What keyed records are routed by (null: no layout); replaced whole, before the state. */
  private volatile Route route;
  /** Records of this topic that passed onSend and are not acknowledged yet. */
  private final java.util.concurrent.atomic.AtomicLong inflight = new java.util.concurrent.atomic.AtomicLong();
  /** Sends waiting in partition() for the open switch to drain. */
  private int blocked;
  /** The pending epoch of the open switch, or -1 (volatile: an ack checks it without the lock). */
  private volatile long switchEpoch = -1;
  private final Set<Long> acked = new HashSet<>();
  /** Partition -> the highest offset acknowledged since the last ack (all older-epoch records). */
  private volatile java.util.concurrent.ConcurrentHashMap<Integer, Long> lastOffsets =
      new java.util.concurrent.ConcurrentHashMap<>();
  /** A record failed in a way that does not prove it was never written (a forced close). */
  private volatile boolean uncertain;
  /** The session this topic's registration belongs to (0: none). Written by the worker and first use. */
  volatile long registeredSession;
  /** ACLs kept the producer from creating the topic's node (not adopted): routed plain, retried on each re-read. */
  volatile boolean refused;

  private boolean warnedCompacted;
  private int sticky = -1;
  private long stickyBytes;

  /** Where acks that became due go (the producer queues them for the worker; never blocks). */
  private final java.util.function.Consumer<AckDue> ackSink;

  TopicState(String topic, int batchSize, java.util.function.Consumer<AckDue> ackSink) {
    this.topic = topic;
    this.batchSize = batchSize;
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

  /** A layout and its hash, immutable. */
  static final class Route {
    final Layout layout;
    final String algorithm;

    Route(Layout layout, String algorithm) {
      this.layout = layout;
      this.algorithm = algorithm;
    }
  }

  Layout layout() {
    Route r = route;
    return r == null ? null : r.layout;
  }

  long inflight() {
    return inflight.get();
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

  void sent() {
    inflight.incrementAndGet();
  }

  /** An acknowledgement (success or failure; the I/O thread); may drain an open switch. */
  void acked(int partition, long offset, Exception exception) {
    // The offset goes in before the count goes down: a drain that sees the count sees it.
    if (exception == null) {
      if (partition >= 0 && offset >= 0) {
        lastOffsets.merge(partition, offset, Math::max);
      }
    } else if (exception.getClass() == KafkaException.class
        && String.valueOf(exception.getMessage()).contains("closed forcefully")) {
      // close(Duration.ZERO) aborts batches that may already be on a broker.
      uncertain = true;
    }
    inflight.decrementAndGet();
    if (switchEpoch >= 0) {
      synchronized (this) {
        drainIfDone();
      }
    }
  }

  /** Close the open switch if nothing routed before it is unacknowledged; report its ack. */
  private boolean drainIfDone() {
    if (switchEpoch < 0 || inflight.get() != blocked) {
      return false;
    }
    long epoch = switchEpoch;
    switchEpoch = -1;
    acked.add(epoch);
    // Nothing unacknowledged is outside the pause now, so no ack races with this swap.
    Map<Integer, Long> offsets = new java.util.TreeMap<>(lastOffsets);
    lastOffsets = new java.util.concurrent.ConcurrentHashMap<>();
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
      route = null;
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
    route = new Route(new Layout(next.initial, next.active, next.epoch), next.algorithm);
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
  boolean clean() {
    return inflight.get() <= 0 && !uncertain;
  }

  synchronized AckDue closeSwitch() {
    if (switchEpoch < 0) {
      return null;
    }
    long epoch = switchEpoch;
    switchEpoch = -1;
    acked.add(epoch);
    return new AckDue(topic, epoch, new java.util.TreeMap<>(lastOffsets));
  }

  // --- routing ----------------------------------------------------------------------------

  /**
   * The partition of a record (the send path).
   *
   * @param key the serialized key, or null
   * @param size the serialized value's size (for the sticky partition of unkeyed records)
   * @param maxBlockMs how long a paused send may wait ({@code max.block.ms})
   */
  int partition(byte[] key, int size, Cluster cluster, long maxBlockMs) throws InterruptedException {
    if (key != null) {
      State now = state;
      if (now == State.ROUTING) {
        Route r = route; // the common case, without the lock (see the class comment)
        if (r != null) {
          return r.layout.partitionFor(key, r.algorithm);
        }
      } else if (now == State.PLAIN) {
        return plain(key, size, cluster);
      }
    }
    return partitionLocked(key, size, cluster, maxBlockMs);
  }

  private synchronized int partitionLocked(byte[] key, int size, Cluster cluster, long maxBlockMs)
      throws InterruptedException {
    long deadlineMs = -1;
    while (true) {
      Route r = route;
      switch (state) {
        case PLAIN:
          return plain(key, size, cluster);
        case UNKNOWN:
          throw new LayoutUnavailableException("the layout of " + topic + " was not read yet; retry");
        case ROUTING:
          return key == null ? unkeyed(size, cluster, r.layout.active()) : r.layout.partitionFor(key, r.algorithm);
        case SUSPENDED:
          if (key == null && r != null) {
            return unkeyed(size, cluster, r.layout.active()); // no order to keep
          }
          throw new LayoutUnavailableException(
              "cannot route a keyed record to " + topic + ": the ZooKeeper session is suspended or"
                  + " lost, so its layout may be stale; retry once the session is back");
        case SWITCHING:
          if (Thread.currentThread().getName().startsWith("kafka-producer-network-thread")) {
            throw new LayoutUnavailableException(
                "cannot route a record to " + topic + " from the producer's I/O thread while the"
                    + " route switch to epoch " + switchEpoch + " drains; retry");
          }
          if (deadlineMs < 0) {
            deadlineMs = System.currentTimeMillis() + maxBlockMs;
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

  private final int batchSize;

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
