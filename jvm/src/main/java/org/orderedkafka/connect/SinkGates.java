package org.orderedkafka.connect;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeSet;
import java.util.concurrent.TimeUnit;
import java.util.function.LongConsumer;
import java.util.function.LongSupplier;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.orderedkafka.ConsumerStore;
import org.orderedkafka.LayoutHistories;
import org.orderedkafka.OrderedSettings;
import org.orderedkafka.gate.CommittedView;
import org.orderedkafka.gate.EpochInfo;
import org.orderedkafka.gate.GateEvaluator;
import org.orderedkafka.gate.OffsetView;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * The consumer protocol of {@code docs/consumer-protocol.md} as a sink task needs it, with no
 * Connect type in sight: which records of a batch may be given to the wrapped task, which
 * partitions are held and where, when a held partition may go on, which offsets a commit may
 * write, and when a commit is due because a source crossed its boundary.
 *
 * <p>Where the rules come from: the gate rule is {@link GateEvaluator}'s; the layouts, the
 * fetch check (a {@code sync} and an {@code exists} of every topic node, C-CHECK-2) and the
 * group registration are {@link ConsumerStore}'s, as for {@code OrderedKafkaConsumer}. What
 * this class adds is the sink's side of them:
 *
 * <ul>
 *   <li>the fetch check's marks are the partitions' end offsets read through {@link
 *       SinkProgress} <em>after</em> the batch was taken and <em>before</em> the check: every
 *       record of the batch lies below them, so the check that follows has seen every epoch
 *       those records may carry (C-CHECK-1), and later batches below them need no check;
 *   <li>a held partition's first held record is where the task rewinds it; {@link #given}
 *       never passes it, so a commit never covers a record the wrapped task was not given;
 *   <li>a source partition that reached a sealed giving boundary makes a commit due (the
 *       boundary commit of C-ANN-1; the wrapped task's flush in {@code preCommit} plays the
 *       part of {@code on_partition_key_maybe_revoked});
 *   <li>a pending giver's offset is left out of commits until its epoch is sealed (C-COMMIT-4).
 * </ul>
 *
 * <p>Not done here (the Connect runtime owns these): rewind markers of the group are read,
 * but none is written (a sink task does not seek back on its own), and no interest or
 * progress is published. Not thread-safe: a sink task is called from one thread.
 */
final class SinkGates {
  private static final Logger LOG = LoggerFactory.getLogger(SinkGates.class);
  /** How often the gates look at the layouts when no batch asks (a seal seen without records). */
  private static final long IDLE_CHECK_MS = 1000;

  /** What the gates know of one topic. */
  private static final class Topic {
    final String name;
    LayoutHistories.History history;
    GateEvaluator gates;
    long mzxid = Long.MIN_VALUE;
    long marker = Long.MIN_VALUE;
    Set<Integer> pendingGivers = Set.of();

    Topic(String name) {
      this.name = name;
    }

    boolean ordered() {
      return history != null && history.adopted;
    }

    boolean pending() {
      return !pendingGivers.isEmpty();
    }

    void set(LayoutHistories.History h) {
      history = h;
      mzxid = h.mzxid;
      if (gates == null) {
        gates = new GateEvaluator(h.epochs);
      } else {
        gates.update(h.epochs);
      }
      Set<Integer> pending = new HashSet<>();
      for (EpochInfo e : h.epochs) {
        if (!e.sealed) {
          for (int[] edge : e.edges) {
            pending.add(edge[0]);
          }
        }
      }
      pendingGivers = pending;
    }
  }

  private final ConsumerStore store;
  private final SinkProgress progress;
  private final String group;
  private final OrderedSettings settings;
  private final LongSupplier clock;

  private final Map<String, Topic> topics = new HashMap<>();
  private final Set<TopicPartition> owned = new HashSet<>();
  /** Partition -> its first held record: the task rewound it there and paused it. */
  private final Map<TopicPartition, Long> held = new LinkedHashMap<>();
  /** Partition -> the offset after the last record given (or its first held record). */
  private final Map<TopicPartition, Long> given = new HashMap<>();
  /** Partition -> the first offset taken in this assignment. */
  private final Map<TopicPartition, Long> start = new HashMap<>();
  /** Partition -> every record below was written before a check that answered (C-CHECK-4). */
  private final Map<TopicPartition, Long> covered = new HashMap<>();
  /** Partition -> the highest offset a commit answer of this assignment carried. */
  private final Map<TopicPartition, Long> committing = new HashMap<>();
  private boolean trusted = true;
  private long lastCheck = Long.MIN_VALUE / 2;
  /** The checks' pacing ({@code ordered.layout.check.max.requests.per.s}), as the consumer's. */
  private double tokens = 2;
  private long tokensAt;
  /** How the pacing waits (tests: a fake clock that the wait advances). */
  private final LongConsumer sleeper;
  private long nextRecheck;

  SinkGates(
      ConsumerStore store, SinkProgress progress, String group, OrderedSettings settings, LongSupplier clock) {
    this(store, progress, group, settings, clock, SinkGates::sleepNanos);
  }

  SinkGates(
      ConsumerStore store,
      SinkProgress progress,
      String group,
      OrderedSettings settings,
      LongSupplier clock,
      LongConsumer sleeper) {
    this.store = store;
    this.progress = progress;
    this.group = group;
    this.settings = settings;
    this.clock = clock;
    this.sleeper = sleeper;
    this.tokensAt = clock.getAsLong();
  }

  private static void sleepNanos(long nanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(Math.max(nanos, 100_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new org.apache.kafka.connect.errors.ConnectException("interrupted pacing a layout check", e);
    }
  }

  /**
   * The ZooKeeper requests of one check (a sync, each topic's exists, each ordered topic's
   * rewind marker) paced to {@code ordered.layout.check.max.requests.per.s} on average, with
   * a burst of two checks, as {@code OrderedKafkaConsumer} paces its own (0: no pacing).
   *
   * @param wait wait for a token (a batch cannot be judged without its check) or give up
   */
  private boolean takeToken(boolean wait) {
    if (settings.checkRate == 0) {
      return true;
    }
    int markers = 0;
    for (Topic t : topics.values()) {
      if (t.ordered()) {
        markers++;
      }
    }
    long slot = (long) ((1 + topics.size() + markers) * 1e9 / settings.checkRate);
    while (true) {
      long now = clock.getAsLong();
      tokens = Math.min(2, tokens + (double) (now - tokensAt) / slot);
      tokensAt = now;
      if (tokens >= 1) {
        tokens -= 1;
        return true;
      }
      if (!wait) {
        return false;
      }
      sleeper.accept((long) ((1 - tokens) * slot));
    }
  }

  // --- the assignment ------------------------------------------------------------------

  void open(Collection<TopicPartition> partitions) {
    owned.addAll(partitions);
  }

  /** Partitions leave: their hold and everything known of their records go. */
  void close(Collection<TopicPartition> partitions) {
    for (TopicPartition tp : partitions) {
      owned.remove(tp);
      Long wasHeld = held.remove(tp);
      if (wasHeld != null) {
        // So that a reader of the log knows the hold ended without its gate opening.
        LOG.debug("{} no longer held at offset {}: the partition left the task", tp, wasHeld);
      }
      given.remove(tp);
      start.remove(tp);
      covered.remove(tp);
      committing.remove(tp);
    }
  }

  /** Whether {@code tp} is held (paused by the gates). */
  boolean isHeld(TopicPartition tp) {
    return held.containsKey(tp);
  }

  /** The held partitions and their first held records. */
  Map<TopicPartition, Long> held() {
    return Map.copyOf(held);
  }

  /**
   * The wrapped task rewound {@code tp} to {@code offset} itself: what follows is a replay,
   * so nothing learned of the group's progress on that topic is trusted (C-REPLAY-1), and
   * nothing at or past {@code offset} counts as given.
   */
  void rewound(TopicPartition tp, long offset) {
    given.computeIfPresent(tp, (k, g) -> Math.min(g, offset));
    held.computeIfPresent(tp, (k, h) -> Math.min(h, offset));
    start.computeIfPresent(tp, (k, s) -> Math.min(s, offset));
    Topic t = topics.get(tp.topic());
    if (t != null && t.gates != null) {
      t.gates.forget();
    }
  }

  // --- judging a batch -----------------------------------------------------------------

  /**
   * Judge a batch: {@code batch} maps each partition to the offsets of its records, ascending.
   * A partition newly held is in {@link #held()} afterwards (at the offset of its first
   * record not to give).
   *
   * @return partition -> how many of its first records may be given to the wrapped task
   */
  Map<TopicPartition, Integer> judge(Map<TopicPartition, long[]> batch) {
    Map<TopicPartition, Integer> out = new HashMap<>();
    if (batch.isEmpty()) {
      if (clock.getAsLong() - lastCheck >= idleCheckNanos() && anyOrdered() && recover()
          && takeToken(false)) {
        check(List.of()); // the advisory check: a seal or a rewind marker without records
      }
      return out;
    }
    boolean needCheck = false;
    for (Map.Entry<TopicPartition, long[]> e : batch.entrySet()) {
      TopicPartition tp = e.getKey();
      long[] offsets = e.getValue();
      topic(tp.topic());
      start.putIfAbsent(tp, offsets[0]);
      if (offsets[offsets.length - 1] >= covered.getOrDefault(tp, 0L)) {
        needCheck = true;
      }
    }
    if (needCheck) {
      takeToken(true); // the batch waits for its check's turn
    }
    if (!recover() || (needCheck && !check(batch.keySet()))) {
      // Layouts not trusted (C-SESSION-2): every partition of a topic that is, or may be,
      // ordered is held; a topic known to be plain goes on.
      for (Map.Entry<TopicPartition, long[]> e : batch.entrySet()) {
        Topic t = topics.get(e.getKey().topic());
        long[] offsets = e.getValue();
        if (t.history == null || t.ordered()) {
          hold(e.getKey(), offsets[0]);
          out.put(e.getKey(), 0);
        } else {
          given.put(e.getKey(), offsets[offsets.length - 1] + 1);
          out.put(e.getKey(), offsets.length);
        }
      }
      return out;
    }
    Map<String, View> views = new HashMap<>();
    for (Map.Entry<TopicPartition, long[]> e : batch.entrySet()) {
      TopicPartition tp = e.getKey();
      long[] offsets = e.getValue();
      Topic t = topics.get(tp.topic());
      int n = offsets.length;
      int upto = n;
      if (t.ordered()) {
        int p = tp.partition();
        long limit = t.gates.limit(p);
        if (offsets[n - 1] >= limit) {
          for (int i = 0; i < n; i++) {
            if (offsets[i] < limit) {
              continue;
            }
            if (mayDeliver(t, p, offsets[i], views)) {
              limit = t.gates.limit(p);
            } else {
              upto = i;
              break;
            }
          }
        }
      }
      if (upto < n) {
        hold(tp, offsets[upto]);
      } else {
        given.put(tp, offsets[n - 1] + 1);
      }
      out.put(tp, upto);
    }
    return out;
  }

  private void hold(TopicPartition tp, long offset) {
    if (!held.containsKey(tp)) {
      LOG.debug("{} held at offset {}", tp, offset);
    }
    held.merge(tp, offset, Math::min);
    given.put(tp, held.get(tp));
    covered.remove(tp); // what comes again after the rewind is checked again
    if (nextRecheck == 0) {
      nextRecheck = clock.getAsLong() + TimeUnit.MILLISECONDS.toNanos(settings.gatePollIntervalMs);
    }
  }

  /**
   * Decide the held partitions again, every {@code ordered.gate.poll.interval.ms} (C-HOLD-3).
   *
   * @return the partitions whose gate opened: no longer held, to be resumed
   */
  List<TopicPartition> recheck() {
    if (held.isEmpty()) {
      nextRecheck = 0;
      return List.of();
    }
    long now = clock.getAsLong();
    if (now < nextRecheck) {
      return List.of();
    }
    nextRecheck = now + TimeUnit.MILLISECONDS.toNanos(settings.gatePollIntervalMs);
    if (!recover()) {
      return List.of();
    }
    if (now - lastCheck >= idleCheckNanos() && takeToken(false)) {
      check(List.of()); // a held gate may wait on a seal
    }
    Map<String, View> views = new HashMap<>();
    List<TopicPartition> open = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> h : held.entrySet()) {
      Topic t = topics.get(h.getKey().topic());
      if (t != null && trusted && (!t.ordered() || mayDeliver(t, h.getKey().partition(), h.getValue(), views))) {
        open.add(h.getKey());
      }
    }
    for (TopicPartition tp : open) {
      LOG.debug("{} goes on at offset {}: its gate opened", tp, held.remove(tp));
    }
    return open;
  }

  // --- commits -------------------------------------------------------------------------

  /**
   * The offsets the wrapped task may be asked to flush and commit: the worker's offsets
   * lowered to {@link #given} (the worker counts every record it passed to {@code put}, held
   * ones too, until its rewind).
   */
  Map<TopicPartition, OffsetAndMetadata> clamp(Map<TopicPartition, OffsetAndMetadata> current) {
    Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : current.entrySet()) {
      Long g = given.get(e.getKey());
      OffsetAndMetadata om = e.getValue();
      out.put(
          e.getKey(),
          g == null || g >= om.offset() ? om : new OffsetAndMetadata(g, om.leaderEpoch(), om.metadata()));
    }
    return out;
  }

  /**
   * What the commit may write of the wrapped task's answer: never past {@code clamped} (so
   * never past a record not given), never a pending giver's offset (C-COMMIT-4).
   */
  Map<TopicPartition, OffsetAndMetadata> commitable(
      Map<TopicPartition, OffsetAndMetadata> answer, Map<TopicPartition, OffsetAndMetadata> clamped) {
    Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
    if (answer == null) {
      return out;
    }
    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : answer.entrySet()) {
      TopicPartition tp = e.getKey();
      OffsetAndMetadata om = e.getValue();
      if (om == null) {
        continue;
      }
      OffsetAndMetadata cap = clamped.get(tp);
      if (cap != null && cap.offset() < om.offset()) {
        om = cap;
      }
      Long g = given.get(tp);
      if (g != null && g < om.offset()) {
        om = new OffsetAndMetadata(g, om.leaderEpoch(), om.metadata());
      }
      Topic t = topics.get(tp.topic());
      if (t != null && t.ordered() && t.pendingGivers.contains(tp.partition())) {
        continue;
      }
      out.put(tp, om);
      committing.merge(tp, om.offset(), Math::max);
    }
    return out;
  }

  /**
   * Whether a source partition's given records reached a sealed giving boundary {@code m}
   * ({@code start < m <= given}) that no commit answer carried yet: the destinations' gates
   * wait for that commit, so it is asked for at once (C-ANN-1).
   */
  boolean commitDue() {
    for (Map.Entry<TopicPartition, Long> g : given.entrySet()) {
      TopicPartition tp = g.getKey();
      Topic t = topics.get(tp.topic());
      if (t == null || !t.ordered() || !owned.contains(tp)) {
        continue;
      }
      long from = start.getOrDefault(tp, 0L);
      long done = committing.getOrDefault(tp, -1L);
      for (long m : t.gates.sourceMarks(tp.partition())) {
        if (m > from && m <= g.getValue() && m > done) {
          return true;
        }
      }
    }
    return false;
  }

  /**
   * Whether the task should come back soon even without records: a held partition, a due
   * commit, or a pending epoch whose seal must be seen.
   */
  boolean busy() {
    if (!held.isEmpty() || commitDue()) {
      return true;
    }
    for (Topic t : topics.values()) {
      if (t.ordered() && t.pending()) {
        return true;
      }
    }
    return false;
  }

  /** Whether some topic read is ordered (an idle task still looks at its layouts now and then). */
  boolean anyOrdered() {
    for (Topic t : topics.values()) {
      if (t.ordered()) {
        return true;
      }
    }
    return false;
  }

  // --- layouts -------------------------------------------------------------------------

  private Topic topic(String name) {
    Topic t = topics.get(name);
    if (t == null) {
      t = new Topic(name);
      topics.put(name, t);
      load(t);
    }
    return t;
  }

  private boolean load(Topic t) {
    try {
      LayoutHistories.History h = store.read(t.name);
      boolean first = t.history == null;
      t.set(h);
      if (first && h.adopted) {
        store.registerGroup(group, t.name); // C-TRIM-1
      }
      return true;
    } catch (RuntimeException e) {
      LOG.warn("cannot read the layout of {}: {}; its records are held", t.name, e.toString());
      trusted = false;
      return false;
    }
  }

  /** Trusted again only once every history was read again on a connected session (C-SESSION-3). */
  private boolean recover() {
    if (trusted) {
      return true;
    }
    if (!store.connected()) {
      return false;
    }
    trusted = true;
    covered.clear();
    for (Topic t : topics.values()) {
      if (!load(t)) {
        return false;
      }
    }
    return true;
  }

  private long idleCheckNanos() {
    return TimeUnit.MILLISECONDS.toNanos(Math.max(IDLE_CHECK_MS, settings.gatePollIntervalMs));
  }

  /**
   * The fetch check: the end offsets of {@code marks} first, then the store's check; topics
   * whose node changed are read again, a changed rewind marker drops the topic's open gates,
   * and each mark becomes its partition's covered offset.
   *
   * @return false when the check failed (the layouts are then untrusted)
   */
  private boolean check(Collection<TopicPartition> marks) {
    Map<TopicPartition, Long> ends = Map.of();
    if (!marks.isEmpty()) {
      try {
        ends = progress.endOffsets(marks);
      } catch (RuntimeException e) {
        LOG.debug("end offsets of {} not read: {}", marks, e.toString());
      }
    }
    List<String> markers = new ArrayList<>();
    for (Topic t : topics.values()) {
      if (t.ordered()) {
        markers.add(t.name);
      }
    }
    lastCheck = clock.getAsLong();
    ConsumerStore.Check answer;
    try {
      answer = store.check(new TreeSet<>(topics.keySet()), group, markers, Math.min(settings.sessionTimeoutMs, 5000));
    } catch (RuntimeException e) {
      LOG.warn("layout check failed ({}): records of the sink's topics are held", e.toString());
      trusted = false;
      return false;
    }
    Map<TopicPartition, Long> marked = new HashMap<>(ends);
    for (Topic t : topics.values()) {
      Long zxid = answer.topics().get(t.name);
      if (zxid != null && zxid != t.mzxid) {
        covered.keySet().removeIf(tp -> tp.topic().equals(t.name));
        if (!load(t)) {
          return false;
        }
      }
      Long marker = answer.markers().get(t.name);
      if (marker != null) {
        if (t.marker != Long.MIN_VALUE && marker != t.marker && t.gates != null) {
          t.gates.forget(); // another member rewound: its commits are not progress (C-REPLAY-1)
        }
        t.marker = marker;
      }
    }
    for (Map.Entry<TopicPartition, Long> m : marked.entrySet()) {
      covered.merge(m.getKey(), m.getValue(), Math::max);
    }
    return true;
  }

  // --- the group's progress ------------------------------------------------------------

  /** The group's progress as the Connect worker's group committed it, per decision round. */
  private final class View extends CommittedView {
    View(String topic) {
      super(topic);
    }

    @Override
    protected Map<Integer, Long> readCommitted(Set<Integer> partitions) {
      return progress.committed(group, topic, partitions);
    }

    @Override
    protected Map<Integer, Long> readLogStarts(Set<Integer> partitions) {
      return progress.logStarts(topic, partitions);
    }

    @Override
    protected Long progress(int partition, Long c) {
      TopicPartition tp = new TopicPartition(topic, partition);
      if (c != null && owned.contains(tp)) {
        // C-REPLAY-2: a commit made before a rewind is not progress of the replay.
        Long mine = given.containsKey(tp) ? given.get(tp) : start.get(tp);
        if (mine != null && mine < c) {
          return mine;
        }
      }
      return c;
    }
  }

  private boolean mayDeliver(Topic t, int partition, long offset, Map<String, View> views) {
    View view = views.computeIfAbsent(t.name, View::new);
    view.need(t.gates.requiredPartitions(partition, offset));
    return !view.failed() && t.gates.mayDeliver(partition, offset, view);
  }
}
