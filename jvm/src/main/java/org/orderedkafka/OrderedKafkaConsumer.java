package org.orderedkafka;

import java.lang.management.ManagementFactory;
import java.net.InetAddress;
import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.OptionalLong;
import java.util.Properties;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.function.LongSupplier;
import java.util.regex.Pattern;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.TopicDescription;
import org.apache.kafka.clients.consumer.CloseOptions;
import org.apache.kafka.clients.consumer.Consumer;
import org.apache.kafka.clients.consumer.ConsumerGroupMetadata;
import org.apache.kafka.clients.consumer.ConsumerRebalanceListener;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.ConsumerRecords;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.consumer.OffsetAndTimestamp;
import org.apache.kafka.clients.consumer.OffsetCommitCallback;
import org.apache.kafka.clients.consumer.SubscriptionPattern;
import org.apache.kafka.common.KafkaException;
import org.apache.kafka.common.Metric;
import org.apache.kafka.common.MetricName;
import org.apache.kafka.common.PartitionInfo;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.Uuid;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.errors.InterruptException;
import org.apache.kafka.common.header.Header;
import org.apache.kafka.common.metrics.KafkaMetric;
import org.apache.kafka.common.serialization.Deserializer;
import org.orderedkafka.gate.CommittedView;
import org.orderedkafka.gate.EpochInfo;
import org.orderedkafka.gate.GateEvaluator;
import org.orderedkafka.gate.OffsetView;
import org.slf4j.Logger;
import org.slf4j.LoggerFactory;

/**
 * A drop-in {@link Consumer} that keeps each key's order across the expansions and shrinks of
 * ordered topics: a real {@link KafkaConsumer} inside, following the consumer protocol of
 * {@code docs/consumer-protocol.md} (the fetch check, the gate rule, the boundary announcement
 * and commit, rewinds, interest and progress).
 *
 * <p>Where the Python consumer keeps held records in a stash, this one seeks a held partition
 * back to its first held record and pauses it: the inner consumer's position is never past a
 * record not returned, so whatever commits positions (auto-commit, {@code commitSync()}, a
 * framework committing {@link ConsumerRecords#nextOffsets()}) never commits an undelivered
 * record. The wrapper owns auto-commit: the inner consumer runs with {@code
 * enable.auto.commit=false} (under {@code group.protocol=consumer} its auto-commit runs on a
 * background thread, out of the wrapper's reach).
 *
 * <p>Not thread-safe, as {@link KafkaConsumer}; {@link #wakeup()} may be called from any thread.
 */
public class OrderedKafkaConsumer<K, V> implements Consumer<K, V> {
  private static final Logger LOG = LoggerFactory.getLogger(OrderedKafkaConsumer.class);
  private static final String TOMBSTONE_HEADER = "ordered.tombstone";
  private static final Duration COMMITTED_TIMEOUT = Duration.ofSeconds(10);
  private static volatile boolean twoArgRecords = true;

  /** What this consumer knows of one topic. */
  private static final class TopicGates {
    final String topic;
    /** null: never read, or the last read failed. */
    LayoutHistories.History history;

    GateEvaluator gates;
    long mzxid = Long.MIN_VALUE;
    /** The group's rewind marker's mzxid as last seen; MIN_VALUE: not seen yet. */
    long marker = Long.MIN_VALUE;

    Set<Integer> pendingGivers = Set.of();
    /** Why the topic is refused (C-COPY-3: bound to another topic id), or null. */
    RuntimeException refusal;
    /** When the refusal was decided (clock nanos): it is looked at again once a second. */
    long refusedAt;
    /** The recorded topic id Kafka confirmed (asked again only when the record's changes). */
    String confirmedId;
    /** The first read, under way in the background since {@code subscribe()}; null: none. */
    java.util.concurrent.CompletableFuture<Prefetched> prefetch;

    TopicGates(String topic) {
      this.topic = topic;
    }

    boolean ordered() {
      return history != null && history.adopted;
    }

    /** The layout of epoch {@code e} as the audit routes by it, or null when unknown. */
    Layout layout(long e) {
      return layouts.get(e);
    }

    private final Map<Long, Layout> layouts = new HashMap<>();

    /**
     * The audit's lookups (C-AUDIT-1), per epoch of the history in order: its number, and per
     * partition its boundary ({@link Long#MIN_VALUE}: none) and whether it gives and receives
     * keys there. Built once per read instead of per sampled record.
     */
    long[] auditEpochs = new long[0];

    long[][] auditBounds = new long[0][];
    boolean[][] auditGives = new boolean[0][];
    boolean[][] auditReceives = new boolean[0][];

    void set(LayoutHistories.History h) {
      history = h;
      mzxid = h.mzxid;
      if (gates == null) {
        gates = new GateEvaluator(h.epochs);
      } else {
        gates.update(h.epochs);
      }
      layouts.clear();
      for (EpochInfo e : h.epochs) {
        if (h.initial >= 1 && e.toActive >= h.initial) {
          layouts.put(e.epoch, new Layout(h.initial, e.toActive, e.epoch));
        }
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
      int n = h.epochs.size();
      auditEpochs = new long[n];
      auditBounds = new long[n][];
      auditGives = new boolean[n][];
      auditReceives = new boolean[n][];
      for (int i = 0; i < n; i++) {
        EpochInfo e = h.epochs.get(i);
        int width = 0;
        for (int partition : e.boundaries.keySet()) {
          width = Math.max(width, partition + 1);
        }
        long[] bounds = new long[width];
        Arrays.fill(bounds, Long.MIN_VALUE);
        e.boundaries.forEach((partition, bound) -> bounds[partition] = bound);
        boolean[] gives = new boolean[width];
        boolean[] receives = new boolean[width];
        for (int[] edge : e.edges) {
          if (edge[0] < width) {
            gives[edge[0]] = true;
          }
          if (edge[1] < width) {
            receives[edge[1]] = true;
          }
        }
        auditEpochs[i] = e.epoch;
        auditBounds[i] = bounds;
        auditGives[i] = gives;
        auditReceives[i] = receives;
      }
    }
  }

  /** A first read done in the background: the history (null when it failed) and the id's answer. */
  private record Prefetched(
      LayoutHistories.History history, java.util.function.Supplier<String> asked) {}

  private final Consumer<K, V> inner;
  private final ConsumerStore store;
  private final OrderedSettings settings;
  private final String group;
  private final String member;
  /** {@code client.id} as configured; null: the inner consumer's generated one. */
  private final String clientIdConfig;
  private final boolean autoCommit;
  private final long autoCommitIntervalMs;
  private final boolean applicationMode;
  private final LongSupplier clock;
  /**
   * Asks Kafka for a topic's id (C-COPY-3): the answer's getter waits for it (null: Kafka keeps
   * no id) and throws when Kafka does not answer. Tests set a fake.
   */
  java.util.function.Function<String, java.util.function.Supplier<String>> topicIds =
      this::describeTopicId;
  private final Map<String, Object> adminConfig = new HashMap<>();
  private final Object adminLock = new Object();
  private Admin admin;
  private boolean adminClosed;

  private final Map<String, TopicGates> topics = new HashMap<>();
  private boolean trusted = true;
  /** Partition -> the offset of its first held record (sought back there, paused). */
  private final Map<TopicPartition, Long> held = new HashMap<>();
  private final Set<TopicPartition> appPaused = new HashSet<>();
  private final Map<TopicPartition, Long> covered = new HashMap<>();
  /** The first offset taken in this assignment or since the last placement. */
  private final Map<TopicPartition, Long> start = new HashMap<>();
  /** The offset after the last record given (or a placement): what commits may write. */
  private final Map<TopicPartition, Long> given = new HashMap<>();
  /** The highest receiving boundary whose onPartitionKeyAssigned ran. */
  private final Map<TopicPartition, Long> crossed = new HashMap<>();
  /** Announcements due: partition -> the offset to commit. */
  private final Map<TopicPartition, Long> due = new LinkedHashMap<>();

  /** The unannounced boundary of each partition in {@link #due}: its stored offset stays below. */
  private final Map<TopicPartition, Long> dueMark = new HashMap<>();
  /** Due announcements whose maybe-revoked callback already ran for that offset. */
  private final Map<TopicPartition, Long> told = new HashMap<>();
  /** The highest offset an announcement of this assignment committed (or released). */
  private final Map<TopicPartition, Long> announced = new HashMap<>();
  /** Offsets this consumer committed and Kafka acknowledged (C-GATE-5 may raise to them). */
  private final Map<TopicPartition, Long> ownCommitted = new HashMap<>();
  private final Map<String, Map<Integer, Long>> declared = new HashMap<>();
  /** What each held partition's gate waits on, as last decided (C-POS-2). */
  private final Map<TopicPartition, List<GateEvaluator.Wait>> waits = new HashMap<>();
  /** Application-mode rewinds of sources: partition -> its committed offset at the rewind. */
  private final Map<TopicPartition, Long> rewound = new HashMap<>();
  private long nextRewindRead;

  private ConsumerRebalanceListener userListener;
  private boolean rebalanced;
  private long nextAutoCommit;
  private long nextRecheck;
  /** The next re-check reads Kafka even when {@link #futile} says no read could open a gate. */
  private boolean recheckFull;
  private double tokens = 2;
  private long tokensAt;
  private long lastCheck = Long.MIN_VALUE / 2;
  private boolean closed;

  /** As {@link KafkaConsumer#KafkaConsumer(Properties)}, with the {@code ordered.*} keys. */
  public OrderedKafkaConsumer(Properties properties) {
    this(properties, null, null);
  }

  /** As {@link KafkaConsumer#KafkaConsumer(Properties, Deserializer, Deserializer)}. */
  public OrderedKafkaConsumer(
      Properties properties, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    this(propsToMap(properties), keyDeserializer, valueDeserializer);
  }

  /** As {@link KafkaConsumer#KafkaConsumer(Map)}, with the {@code ordered.*} keys. */
  public OrderedKafkaConsumer(Map<String, Object> configs) {
    this(configs, null, null);
  }

  /** As {@link KafkaConsumer#KafkaConsumer(Map, Deserializer, Deserializer)}. */
  public OrderedKafkaConsumer(
      Map<String, Object> configs, Deserializer<K> keyDeserializer, Deserializer<V> valueDeserializer) {
    this(configs, split(configs), keyDeserializer, valueDeserializer);
  }

  private OrderedKafkaConsumer(
      Map<String, Object> configs,
      OrderedSettings settings,
      Deserializer<K> keyDeserializer,
      Deserializer<V> valueDeserializer) {
    this(
        configs,
        settings,
        new KafkaConsumer<>(kafkaConfig(configs), keyDeserializer, valueDeserializer),
        null,
        System::nanoTime);
  }

  /**
   * Wrap {@code inner} with {@code store} (tests: the conformance scenarios run a fake client and
   * a fake store); {@code store} null opens ZooKeeper from the settings.
   */
  OrderedKafkaConsumer(
      Map<String, Object> configs,
      OrderedSettings settings,
      Consumer<K, V> inner,
      ConsumerStore store,
      LongSupplier clock) {
    this.settings = settings;
    this.inner = inner;
    this.clock = clock;
    for (Map.Entry<String, Object> e : configs.entrySet()) {
      if (AdminClientConfig.configNames().contains(e.getKey())) {
        adminConfig.put(e.getKey(), e.getValue());
      }
    }
    Object groupId = configs.get("group.id");
    group = groupId == null || String.valueOf(groupId).isEmpty() ? null : String.valueOf(groupId);
    autoCommit = group != null && autoCommitOf(configs);
    Object interval = configs.get("auto.commit.interval.ms");
    autoCommitIntervalMs =
        interval == null ? 5000 : OrderedSettings.parseInt("auto.commit.interval.ms", interval, 0);
    applicationMode = settings.commitMode.equals("application");
    member = memberId();
    Object clientId = configs.get("client.id");
    clientIdConfig = clientId == null || String.valueOf(clientId).isEmpty() ? null : String.valueOf(clientId);
    try {
      this.store = store != null ? store : new ZkConsumerStore(settings);
      if (store == null) {
        prefetcher =
            task -> {
              Thread thread = new Thread(task, "ordered-layout-prefetch");
              thread.setDaemon(true);
              thread.start();
            };
      }
    } catch (RuntimeException e) {
      inner.close(Duration.ZERO);
      throw e;
    }
    long now = clock.getAsLong();
    tokensAt = now;
    nextAutoCommit = now + TimeUnit.MILLISECONDS.toNanos(autoCommitIntervalMs);
  }

  // --- configuration ---------------------------------------------------------------------

  private static Map<String, Object> propsToMap(Properties properties) {
    Map<String, Object> out = new HashMap<>();
    for (String name : properties.stringPropertyNames()) {
      out.put(name, properties.getProperty(name));
    }
    for (Map.Entry<Object, Object> e : properties.entrySet()) {
      out.put(String.valueOf(e.getKey()), e.getValue());
    }
    return out;
  }

  private static boolean autoCommitOf(Map<String, Object> configs) {
    Object value = configs.get("enable.auto.commit");
    return value == null || OrderedSettings.parseBool("enable.auto.commit", value);
  }

  /** The {@code ordered.*} half, checked; a misconfiguration fails here with one line. */
  static OrderedSettings split(Map<String, Object> configs) {
    Map<String, Object> ordered = new HashMap<>();
    for (Map.Entry<String, Object> e : configs.entrySet()) {
      if (e.getKey().startsWith("ordered.")) {
        ordered.put(e.getKey(), e.getValue());
      }
    }
    OrderedSettings settings = OrderedSettings.parseConsumer(ordered);
    if (settings.commitMode.equals("application") && autoCommitOf(configs)) {
      throw new ConfigException(
          "ordered.commit.mode=application: the consumer must never commit on its own, so "
              + "enable.auto.commit must be false (commit yourself, or send the offsets to your "
              + "transaction)");
    }
    return settings;
  }

  /** What the inner {@link KafkaConsumer} gets: no {@code ordered.*} key, no auto-commit. */
  static Map<String, Object> kafkaConfig(Map<String, Object> configs) {
    Map<String, Object> out = new HashMap<>();
    for (Map.Entry<String, Object> e : configs.entrySet()) {
      if (!e.getKey().startsWith("ordered.")) {
        out.put(e.getKey(), e.getValue());
      }
    }
    out.put("enable.auto.commit", "false");
    // A subscribed group joins new partitions only at a metadata refresh (5 min by default):
    // an expansion must be picked up within seconds, as the Python consumer's 2 s.
    out.putIfAbsent("metadata.max.age.ms", "2000");
    return out;
  }

  /** The client id Kafka reports for this member: configured, else the inner consumer's. */
  private String clientId() {
    if (clientIdConfig != null) {
      return clientIdConfig;
    }
    try {
      for (MetricName name : inner.metrics().keySet()) {
        String id = name.tags().get("client-id");
        if (id != null) {
          return id;
        }
      }
    } catch (RuntimeException e) {
      // a consumer without metrics: no id to report
    }
    return "";
  }

  private static String memberId() {
    String host;
    try {
      host = InetAddress.getLocalHost().getHostName();
    } catch (Exception e) {
      host = "localhost";
    }
    String pid = String.valueOf(ProcessHandle.current().pid());
    return host + "-" + pid + "-" + String.format("%08x", ThreadLocalRandom.current().nextInt());
  }

  // --- subscriptions and assignments -----------------------------------------------------

  @Override
  public Set<TopicPartition> assignment() {
    return inner.assignment();
  }

  @Override
  public Set<String> subscription() {
    return inner.subscription();
  }

  @Override
  public void subscribe(Collection<String> topicNames) {
    subscribe(topicNames, null);
  }

  @Override
  public void subscribe(Collection<String> topicNames, ConsumerRebalanceListener listener) {
    ensureOpen();
    for (String topic : topicNames) {
      if (prefetcher != null && !topics.containsKey(topic)) {
        prefetch(topic);
      } else {
        topic(topic);
      }
    }
    userListener = listener;
    inner.subscribe(topicNames, new Rebalance());
  }

  @Override
  public void subscribe(Pattern pattern, ConsumerRebalanceListener listener) {
    ensureOpen();
    userListener = listener;
    inner.subscribe(pattern, new Rebalance());
  }

  @Override
  public void subscribe(Pattern pattern) {
    subscribe(pattern, (ConsumerRebalanceListener) null);
  }

  @Override
  public void subscribe(SubscriptionPattern pattern, ConsumerRebalanceListener listener) {
    ensureOpen();
    userListener = listener;
    inner.subscribe(pattern, new Rebalance());
  }

  @Override
  public void subscribe(SubscriptionPattern pattern) {
    subscribe(pattern, null);
  }

  @Override
  public void assign(Collection<TopicPartition> partitions) {
    ensureOpen();
    Set<TopicPartition> next = new HashSet<>(partitions);
    Set<TopicPartition> gone = new HashSet<>(inner.assignment());
    gone.removeAll(next);
    drop(gone, true);
    inner.assign(partitions);
    Set<String> unread = newlyAssigned(next);
    Set<String> names = new HashSet<>();
    for (TopicPartition tp : next) {
      names.add(tp.topic());
    }
    RuntimeException refused = refusal(names);
    if (refused != null) {
      throw refused;
    }
    if (!unread.isEmpty()) {
      // C-COPY-1: the call that loads a topic raises when its history cannot be read; the
      // assignment stands, and its ordered partitions are held until the history is read.
      throw new LayoutUnavailableException(
          "the layout of " + unread + " cannot be read from ZooKeeper now; their records are"
              + " held until it can");
    }
  }

  @Override
  public void unsubscribe() {
    ensureOpen();
    inner.unsubscribe();
    drop(new HashSet<>(held.keySet()), true);
    dropAll();
  }

  /** The application's listener, behind the layer's own work (C-COMMIT-5, C-CB-7). */
  private final class Rebalance implements ConsumerRebalanceListener {
    @Override
    public void onPartitionsRevoked(Collection<TopicPartition> partitions) {
      rebalanced = true;
      movedWhileGathering.addAll(partitions);
      if (!partitions.isEmpty()) {
        Set<TopicPartition> revoked = new HashSet<>(partitions);
        try {
          announce(revoked);
        } catch (RuntimeException e) {
          LOG.warn("announcement at a revocation of {} failed: {}", revoked, e.toString());
        }
        if (autoCommit && !closed) {
          commitQuietly(commitable(revoked));
        }
        drop(revoked, false);
      }
      if (userListener != null) {
        userListener.onPartitionsRevoked(partitions);
      }
    }

    @Override
    public void onPartitionsLost(Collection<TopicPartition> partitions) {
      rebalanced = true;
      movedWhileGathering.addAll(partitions);
      drop(new HashSet<>(partitions), false);
      if (userListener != null) {
        userListener.onPartitionsLost(partitions);
      }
    }

    @Override
    public void onPartitionsAssigned(Collection<TopicPartition> partitions) {
      rebalanced = true;
      newlyAssigned(new HashSet<>(partitions));
      if (userListener != null) {
        userListener.onPartitionsAssigned(partitions);
      }
    }
  }

  /** Returns the topics whose history could not be read (their records are held). */
  private Set<String> newlyAssigned(Set<TopicPartition> partitions) {
    Set<String> names = new HashSet<>();
    for (TopicPartition tp : partitions) {
      names.add(tp.topic());
      covered.remove(tp);
    }
    Set<String> unread = new HashSet<>();
    for (String name : names) {
      boolean known = topics.containsKey(name);
      TopicGates t = topic(name);
      if (t.history == null && (!known || !load(t))) {
        unread.add(name);
      }
      forget(t);
    }
    return unread;
  }

  /** Partitions leave: their hold, coverage and announcements go (C-HOLD-7). */
  private void drop(Set<TopicPartition> partitions, boolean resumeInner) {
    List<TopicPartition> resume = new ArrayList<>();
    for (TopicPartition tp : partitions) {
      if (held.remove(tp) != null && !appPaused.contains(tp)) {
        resume.add(tp);
      }
      covered.remove(tp);
      start.remove(tp);
      given.remove(tp);
      crossed.remove(tp);
      due.remove(tp);
      told.remove(tp);
      announced.remove(tp);
      ownCommitted.remove(tp);
      appPaused.remove(tp);
      rewound.remove(tp);
    }
    if (!resume.isEmpty()) {
      // The Kafka client keeps pauses across a reassignment.
      Set<TopicPartition> still = new HashSet<>(resume);
      still.retainAll(inner.assignment());
      if (!still.isEmpty()) {
        inner.resume(still);
      }
    }
    declareInterest();
  }

  private void dropAll() {
    held.clear();
    covered.clear();
    start.clear();
    given.clear();
    crossed.clear();
    due.clear();
    told.clear();
    announced.clear();
    rewound.clear();
  }

  // --- layouts ---------------------------------------------------------------------------

  /** The topic's gates, its history read at first use (C-COPY-1). */
  private TopicGates topic(String name) {
    TopicGates t = topics.get(name);
    if (t == null) {
      t = new TopicGates(name);
      topics.put(name, t);
      load(t);
    } else if (t.prefetch != null) {
      load(t);
    }
    return t;
  }

  /**
   * Runs a subscription's first reads in the background; null: at the call (the conformance
   * scenarios' fake store and client, whose steps are one thread's).
   */
  java.util.concurrent.Executor prefetcher;

  /**
   * Start a subscribed topic's first read in the background: ZooKeeper's history, Kafka's topic
   * id and the group's registration then overlap the group's join instead of preceding it (they
   * took about 100 ms of a fresh consumer's {@code subscribe()}). The read is used at the
   * topic's first use on the poll thread ({@link #topic}), before any of its records is judged.
   */
  private void prefetch(String name) {
    TopicGates t = new TopicGates(name);
    topics.put(name, t);
    String clientId = group == null ? null : clientId(); // the inner consumer: this thread only
    // Kafka's answer (an admin client's start is most of it) and ZooKeeper's reads each on
    // their own thread: the first use waits for the slower, not for both in turn.
    java.util.concurrent.CompletableFuture<java.util.function.Supplier<String>> asked =
        java.util.concurrent.CompletableFuture.supplyAsync(() -> askTopicId(name), prefetcher);
    t.prefetch =
        java.util.concurrent.CompletableFuture.supplyAsync(
                () -> {
                  LayoutHistories.History h;
                  try {
                    h = store.read(name);
                  } catch (RuntimeException e) {
                    return null; // read again, and reported, at first use
                  }
                  register(name, h, clientId);
                  return h;
                },
                prefetcher)
            .thenCombine(asked, Prefetched::new);
  }

  /** At a topic's first read: the group (C-TRIM-1) and this member, for an adopted topic. */
  private void register(String topic, LayoutHistories.History h, String clientId) {
    if (h.adopted && group != null) {
      store.registerGroup(group, topic);
      store.registerMember(group, member, clientId);
    }
  }

  private boolean load(TopicGates t) {
    java.util.concurrent.CompletableFuture<Prefetched> pending = t.prefetch;
    if (pending != null) {
      t.prefetch = null;
      Prefetched done;
      try {
        done = pending.join();
      } catch (java.util.concurrent.CompletionException e) {
        done = new Prefetched(null, null); // read here, where a failure is reported
      }
      if (done.history() != null) {
        t.set(done.history());
        confirmTopicId(t, done.asked());
        return true;
      }
    }
    try {
      // At a topic's first read Kafka is asked for its id while ZooKeeper gives the history
      // (two round trips at once instead of one after the other).
      java.util.function.Supplier<String> asked =
          t.history == null && t.confirmedId == null ? askTopicId(t.topic) : null;
      LayoutHistories.History h = store.read(t.topic);
      boolean first = t.history == null;
      t.set(h);
      confirmTopicId(t, asked);
      if (first) {
        register(t.topic, h, group == null ? null : clientId());
      }
      return true;
    } catch (RuntimeException e) {
      LOG.warn("cannot read the layout of {}: {}; its records are held", t.topic, e.toString());
      trusted = false;
      return false;
    }
  }

  /**
   * A history read again (a seal, say): a giver's tail may now be due for its announcement
   * (C-ANN-1), and its held partitions are decided again at once.
   */
  private void reloaded(TopicGates t) {
    if (!t.ordered()) {
      return;
    }
    for (TopicPartition tp : new ArrayList<>(given.keySet())) {
      if (tp.topic().equals(t.topic)) {
        dueAnnouncement(t, tp);
      }
    }
    for (TopicPartition tp : held.keySet()) {
      if (tp.topic().equals(t.topic)) {
        nextRecheck = clock.getAsLong();
        recheckFull = true; // the gates themselves may have changed (C-COPY-6)
        break;
      }
    }
  }

  /**
   * C-COPY-3: a history bound to a topic id is used only for Kafka's topic of that id; one
   * bound to another (the topic deleted and created again), or whose id Kafka does not answer,
   * refuses the topic until a read of the layout finds it confirmed.
   */
  private void confirmTopicId(TopicGates t, java.util.function.Supplier<String> asked) {
    t.refusal = null;
    String recorded = t.history.adopted ? t.history.topicId : null;
    if (recorded == null || recorded.equals(t.confirmedId)) {
      return;
    }
    t.refusedAt = clock.getAsLong();
    String kafka;
    try {
      kafka = (asked != null ? asked : askTopicId(t.topic)).get();
    } catch (RuntimeException e) {
      t.refusal =
          new LayoutUnavailableException(
              "Kafka did not answer the topic id of " + t.topic + " (its layout is bound to "
                  + recorded + "): " + e,
              e);
      return;
    }
    // Kafka's Uuid prints URL-safe base64, the Python side stores the standard alphabet.
    if (kafka != null && !kafka.equals(recorded.replace('+', '-').replace('/', '_'))) {
      t.refusal = OrderedLayoutException.topicIdMismatch(t.topic, recorded, kafka);
      return;
    }
    t.confirmedId = recorded;
  }

  private java.util.function.Supplier<String> askTopicId(String topic) {
    try {
      return topicIds.apply(topic);
    } catch (RuntimeException e) {
      return () -> {
        throw e;
      };
    }
  }

  private java.util.function.Supplier<String> describeTopicId(String topic) {
    org.apache.kafka.common.KafkaFuture<Map<String, TopicDescription>> answer;
    synchronized (adminLock) { // a prefetch asks from its own thread
      if (adminClosed) {
        throw new IllegalStateException("This consumer has already been closed.");
      }
      if (admin == null) {
        admin = Admin.create(adminConfig);
      }
      answer = admin.describeTopics(List.of(topic)).allTopicNames();
    }
    return () -> {
      try {
        TopicDescription d = answer.get(10, TimeUnit.SECONDS).get(topic);
        Uuid id = d == null ? null : d.topicId();
        return id == null || Uuid.ZERO_UUID.equals(id) ? null : id.toString();
      } catch (InterruptedException e) {
        Thread.currentThread().interrupt();
        throw new InterruptException(e);
      } catch (Exception e) {
        throw new KafkaException("describe " + topic + ": " + e, e);
      }
    };
  }

  /**
   * The refusal of a refused topic among {@code names} (C-COPY-3), looked at again once a second
   * (the layout may have been replaced); null when none.
   */
  private RuntimeException refusal(Set<String> names) {
    for (String name : names) {
      TopicGates t = topics.get(name);
      if (t == null || t.refusal == null) {
        continue;
      }
      if (clock.getAsLong() - t.refusedAt >= TimeUnit.SECONDS.toNanos(1)) {
        load(t);
      }
      if (t.refusal != null) {
        return t.refusal;
      }
    }
    return null;
  }

  private boolean anyRefused() {
    for (TopicGates t : topics.values()) {
      if (t.refusal != null) {
        return true;
      }
    }
    return false;
  }

  private Set<String> assignedTopics() {
    Set<String> out = new HashSet<>();
    for (TopicPartition tp : inner.assignment()) {
      out.add(tp.topic());
    }
    return out;
  }

  /** C-REPLAY-1: nothing learned before a rewind is trusted after it. */
  private void forget(TopicGates t) {
    if (t.gates != null) {
      t.gates.forget();
    }
    ownCommitted.keySet().removeIf(tp -> tp.topic().equals(t.topic));
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
    for (TopicGates t : topics.values()) {
      if (!load(t)) {
        return false;
      }
      covered.keySet().removeIf(tp -> tp.topic().equals(t.topic));
    }
    return true;
  }

  // --- the fetch check (C-CHECK) --------------------------------------------------------

  private long slotNanos() {
    if (settings.checkRate == 0) {
      return 0; // no pacing: a check is due at every call (C-CHECK-7)
    }
    int markers = 0;
    if (group != null) {
      for (TopicGates t : topics.values()) {
        if (t.ordered()) {
          markers++;
        }
      }
    }
    return (long) ((1 + topics.size() + markers) * 1e9 / settings.checkRate);
  }

  private boolean takeToken() {
    return tokenWait() == 0;
  }

  /** Take a check's token: 0 when one was taken, else the nanoseconds until one comes. */
  private long tokenWait() {
    if (settings.checkRate == 0) {
      return 0;
    }
    long slot = slotNanos();
    long now = clock.getAsLong();
    tokens = Math.min(2, tokens + (double) (now - tokensAt) / slot);
    tokensAt = now;
    if (tokens >= 1) {
      tokens -= 1;
      return 0;
    }
    return Math.max(1, (long) ((1 - tokens) * slot));
  }

  /** Records a deferred batch gathers at the most while it waits for its check (C-CHECK-8). */
  private static final int GATHER_LIMIT = 100_000;

  /** Partitions revoked or lost while a deferred batch gathers: their records leave it. */
  private final Set<TopicPartition> movedWhileGathering = new HashSet<>();

  /**
   * C-CHECK-8: a batch that needs a check before a token is available waits for the token
   * within the call, taking into {@code into} what the client returns meanwhile (so that one
   * check covers all of it, instead of the batch being cut and the rest fetched again).
   *
   * @return true when a token was taken; false when the deadline comes first ({@code into}
   *     then holds all that was taken)
   */
  private boolean gather(Map<TopicPartition, List<ConsumerRecord<K, V>>> into, long deadline) {
    int count = 0;
    for (List<ConsumerRecord<K, V>> records : into.values()) {
      count += records.size();
    }
    movedWhileGathering.clear();
    while (true) {
      long need = tokenWait();
      if (need == 0) {
        return true;
      }
      if (clock.getAsLong() + need > deadline) {
        return false;
      }
      if (count >= GATHER_LIMIT) {
        sleeper.accept(need);
        continue;
      }
      ConsumerRecords<K, V> more = inner.poll(Duration.ofNanos(need));
      if (!movedWhileGathering.isEmpty()) {
        into.keySet().removeAll(movedWhileGathering); // no longer ours (C-CHECK-6)
        movedWhileGathering.clear();
      }
      for (TopicPartition tp : more.partitions()) {
        List<ConsumerRecord<K, V>> records = more.records(tp);
        into.computeIfAbsent(tp, k -> new ArrayList<>()).addAll(records);
        count += records.size();
      }
    }
  }

  /** How the check's pacing waits (tests: a fake clock that the wait advances). */
  java.util.function.LongConsumer sleeper = OrderedKafkaConsumer::sleepNanos;

  private static void sleepNanos(long nanos) {
    try {
      TimeUnit.NANOSECONDS.sleep(Math.max(nanos, 100_000));
    } catch (InterruptedException e) {
      Thread.currentThread().interrupt();
      throw new InterruptException(e);
    }
  }

  /**
   * Send a check and act on it: topics whose node changed are read again (and lose their
   * coverage), a changed rewind marker drops the topic's open gates, and each assigned
   * partition's mark (its high watermark, noted before the sync) becomes covered.
   *
   * @return false when the check failed (the layouts are then held)
   */
  private boolean check() {
    if (topics.isEmpty()) {
      return true;
    }
    Map<TopicPartition, Long> marks = new HashMap<>();
    List<TopicPartition> unknown = new ArrayList<>();
    for (TopicPartition tp : inner.assignment()) {
      TopicGates t = topics.get(tp.topic());
      if (t == null || !t.ordered()) {
        continue;
      }
      try {
        OptionalLong lag = inner.currentLag(tp);
        if (lag.isPresent()) {
          marks.put(tp, inner.position(tp, Duration.ZERO) + lag.getAsLong());
        } else {
          unknown.add(tp);
        }
      } catch (RuntimeException noPosition) {
        unknown.add(tp); // no fetch yet
      }
    }
    if (!unknown.isEmpty()) {
      unknown.removeAll(inner.paused()); // a paused partition brings no batch to cover
    }
    if (!unknown.isEmpty()) {
      // No fetch has told the client these partitions' end yet (the first batches of a
      // read): ask for it, read before the check as the lag is, so that one check covers
      // every partition's backlog instead of one check per partition as its first batch comes.
      try {
        marks.putAll(inner.endOffsets(unknown, Duration.ofMillis(500)));
      } catch (RuntimeException e) {
        LOG.debug("end offsets of {} not read: {}", unknown, e.toString());
      }
    }
    List<String> markers = new ArrayList<>();
    for (TopicGates t : topics.values()) {
      if (t.ordered()) {
        markers.add(t.topic);
      }
    }
    lastCheck = clock.getAsLong();
    ConsumerStore.Check answer;
    try {
      answer =
          store.check(
              topics.keySet(), group, markers, Math.min(settings.sessionTimeoutMs, 5000));
    } catch (RuntimeException e) {
      LOG.warn("layout check failed ({}): records of ordered topics are held", e.toString());
      trusted = false;
      return false;
    }
    for (TopicGates t : topics.values()) {
      Long zxid = answer.topics().get(t.topic);
      if (zxid != null && zxid != t.mzxid) {
        covered.keySet().removeIf(tp -> tp.topic().equals(t.topic));
        marks.keySet().removeIf(tp -> tp.topic().equals(t.topic));
        if (!load(t)) {
          return false;
        }
        reloaded(t);
      }
      Long marker = answer.markers().get(t.topic);
      if (marker != null) {
        if (t.marker != Long.MIN_VALUE && marker != t.marker) {
          forget(t);
        }
        t.marker = marker;
      }
    }
    for (Map.Entry<TopicPartition, Long> m : marks.entrySet()) {
      covered.merge(m.getKey(), m.getValue(), Math::max);
    }
    return true;
  }

  // --- poll ------------------------------------------------------------------------------

  @Override
  public ConsumerRecords<K, V> poll(Duration timeout) {
    ensureOpen();
    RuntimeException refused = anyRefused() ? refusal(assignedTopics()) : null;
    if (refused != null) {
      throw refused; // C-COPY-3: at every call, until the layout is replaced
    }
    long deadline = clock.getAsLong() + Math.max(0, timeout.toNanos());
    announce(null);
    maybeAutoCommit();
    readRewound();
    while (true) {
      if (awaitsSeal()) {
        sealCheck();
      }
      recheck(false);
      long remaining = Math.max(0, deadline - clock.getAsLong());
      if (!held.isEmpty()) {
        // Come back for the re-check of held partitions (C-HOLD-3).
        remaining = Math.min(remaining, TimeUnit.MILLISECONDS.toNanos(settings.gatePollIntervalMs));
      }
      rebalanced = false;
      ConsumerRecords<K, V> batch = inner.poll(Duration.ofNanos(remaining));
      if (rebalanced && !batch.isEmpty() && anyRefused()) {
        // A rebalance inside the fetch may have loaded a refused topic: none of it is given.
        refused = refusal(batch.partitions().stream().map(TopicPartition::topic).collect(java.util.stream.Collectors.toSet()));
        if (refused != null) {
          for (TopicPartition tp : batch.partitions()) {
            inner.seek(tp, batch.records(tp).get(0).offset());
          }
          throw refused;
        }
      }
      ConsumerRecords<K, V> out = judge(batch, deadline);
      if (!out.isEmpty() || clock.getAsLong() >= deadline) {
        return out;
      }
    }
  }

  /** Deprecated in 3.x, gone in 4.0: here for applications on kafka-clients 3.9. */
  @Deprecated
  public ConsumerRecords<K, V> poll(long timeoutMs) {
    return poll(Duration.ofMillis(timeoutMs));
  }

  private ConsumerRecords<K, V> judge(ConsumerRecords<K, V> batch, long deadline) {
    if (batch.isEmpty()) {
      if (group != null && clock.getAsLong() - lastCheck >= slotNanos() && anyOrdered()
          && takeToken()) {
        check(); // the advisory check: it reads the rewind markers (C-CHECK-9)
      }
      return batch;
    }
    boolean needCheck = rebalanced;
    boolean anyOrdered = false;
    for (TopicPartition tp : batch.partitions()) {
      TopicGates t = topic(tp.topic());
      if (t.history == null || t.ordered()) {
        anyOrdered = true;
        List<ConsumerRecord<K, V>> records = batch.records(tp);
        long last = records.get(records.size() - 1).offset();
        if (last >= covered.getOrDefault(tp, 0L)) {
          needCheck = true;
        }
      }
    }
    if (!anyOrdered) {
      for (TopicPartition tp : batch.partitions()) {
        List<ConsumerRecord<K, V>> records = batch.records(tp);
        given.put(tp, records.get(records.size() - 1).offset() + 1);
      }
      return batch;
    }
    if (!recover()) {
      return holdAllOrdered(batch);
    }
    boolean gathered = false;
    if (needCheck) {
      if (!takeToken()) {
        gathered = true;
        Map<TopicPartition, List<ConsumerRecord<K, V>>> into = new LinkedHashMap<>();
        for (TopicPartition tp : batch.partitions()) {
          into.put(tp, new ArrayList<>(batch.records(tp)));
        }
        boolean token = gather(into, deadline);
        into.values().removeIf(List::isEmpty);
        batch = records(into, Map.of());
        if (!token) {
          return deferUncovered(batch);
        }
        if (batch.isEmpty()) {
          return batch;
        }
      }
      if (!check()) {
        return holdAllOrdered(batch);
      }
    } else if (group != null && clock.getAsLong() - lastCheck >= slotNanos() && takeToken()) {
      if (!check()) {
        return holdAllOrdered(batch);
      }
    }
    return decide(batch, gathered);
  }

  /**
   * Whether a seal is awaited: a held partition waits on a pending epoch, or an assigned
   * partition gives keys away in one (its stored offset stays put until the seal).
   */
  private boolean awaitsSeal() {
    if (group == null || !trusted || clock.getAsLong() - lastCheck < slotNanos()) {
      return false;
    }
    for (Map.Entry<TopicPartition, List<GateEvaluator.Wait>> w : waits.entrySet()) {
      if (held.containsKey(w.getKey())) {
        for (GateEvaluator.Wait wait : w.getValue()) {
          if (wait.partition() < 0) {
            return true;
          }
        }
      }
    }
    for (TopicPartition tp : given.keySet()) {
      TopicGates t = topics.get(tp.topic());
      if (t != null && t.ordered() && t.pendingGivers.contains(tp.partition())) {
        return true;
      }
    }
    return false;
  }

  /**
   * C-COPY-4 without a watch: while a seal is awaited, a check at the start of a call, at most
   * once per slot, reads it even when nothing new is fetched; what it changes (a due
   * announcement, a held gate to decide again) is acted on in the same call.
   */
  private void sealCheck() {
    if (takeToken() && check()) {
      announce(null);
    }
  }

  private boolean anyOrdered() {
    for (TopicGates t : topics.values()) {
      if (t.ordered()) {
        return true;
      }
    }
    return false;
  }

  /** The check could not be sent within the call: uncovered partitions are fetched again. */
  private ConsumerRecords<K, V> deferUncovered(ConsumerRecords<K, V> batch) {
    Map<TopicPartition, List<ConsumerRecord<K, V>>> out = new HashMap<>();
    for (TopicPartition tp : batch.partitions()) {
      TopicGates t = topics.get(tp.topic());
      List<ConsumerRecord<K, V>> records = batch.records(tp);
      if (t.ordered()) {
        long cover = covered.getOrDefault(tp, 0L);
        int keep = 0;
        while (keep < records.size() && records.get(keep).offset() < cover) {
          keep++;
        }
        if (keep < records.size()) {
          inner.seek(tp, records.get(keep).offset());
        }
        records = records.subList(0, keep);
        if (records.isEmpty()) {
          continue;
        }
      }
      out.put(tp, records);
    }
    return decide(records(out, Map.of()), true);
  }

  /** Layouts not trusted (C-SESSION-2): every ordered partition of the batch is held. */
  private ConsumerRecords<K, V> holdAllOrdered(ConsumerRecords<K, V> batch) {
    Map<TopicPartition, List<ConsumerRecord<K, V>>> out = new HashMap<>();
    for (TopicPartition tp : batch.partitions()) {
      TopicGates t = topics.get(tp.topic());
      List<ConsumerRecord<K, V>> records = batch.records(tp);
      if (t.history == null || t.ordered()) {
        hold(tp, records.get(0).offset());
      } else {
        out.put(tp, records);
        given.put(tp, records.get(records.size() - 1).offset() + 1);
      }
    }
    declareInterest();
    return records(out, Map.of());
  }

  private void hold(TopicPartition tp, long offset) {
    inner.seek(tp, offset);
    if (held.put(tp, offset) == null) {
      inner.pause(List.of(tp));
    }
    covered.remove(tp);
    if (nextRecheck == 0) {
      nextRecheck = clock.getAsLong() + TimeUnit.MILLISECONDS.toNanos(settings.gatePollIntervalMs);
    }
  }

  /** Where the gates read the group's progress from: one read of Kafka per decision. */
  private final class View extends CommittedView {
    View(String topic) {
      super(topic);
    }

    @Override
    protected Map<Integer, Long> readCommitted(Set<Integer> partitions) {
      if (group == null) {
        return Map.of();
      }
      Map<Integer, Long> out = new HashMap<>();
      inner.committed(partitionsOf(partitions), COMMITTED_TIMEOUT)
          .forEach((tp, om) -> {
            if (om != null) {
              out.put(tp.partition(), om.offset());
            }
          });
      return out;
    }

    @Override
    protected Map<Integer, Long> readLogStarts(Set<Integer> partitions) {
      Map<Integer, Long> out = new HashMap<>();
      inner.beginningOffsets(partitionsOf(partitions), COMMITTED_TIMEOUT)
          .forEach((tp, start) -> out.put(tp.partition(), start));
      return out;
    }

    @Override
    protected Long progress(int partition, Long c) {
      TopicPartition tp = new TopicPartition(topic, partition);
      // C-GATE-5: raised to what this consumer committed and Kafka acknowledged.
      Long own = ownCommitted.get(tp);
      if (own != null && (c == null || own > c)) {
        c = own;
      }
      if (c != null && inner.assignment().contains(tp)) {
        // C-REPLAY-2: a commit made before a rewind is not progress of the replay.
        Long mine = given.containsKey(tp) ? given.get(tp) : start.get(tp);
        if (mine != null && mine < c) {
          c = mine;
        }
      }
      return c;
    }

    private Set<TopicPartition> partitionsOf(Set<Integer> partitions) {
      Set<TopicPartition> out = new HashSet<>();
      for (int p : partitions) {
        out.add(new TopicPartition(topic, p));
      }
      return out;
    }
  }

  private boolean mayDeliver(TopicGates t, int partition, long offset, Map<String, View> views) {
    View view = views.computeIfAbsent(t.topic, View::new);
    view.need(t.gates.requiredPartitions(partition, offset));
    return !view.failed() && t.gates.mayDeliver(partition, offset, view);
  }

  private void noteWaits(TopicGates t, TopicPartition tp, long offset, Map<String, View> views) {
    View view = views.get(t.topic);
    if (view == null || view.failed()) {
      waits.remove(tp);
    } else {
      waits.put(tp, t.gates.waitingOn(tp.partition(), offset, view));
    }
  }

  /** {@code rebuilt}: {@code batch} is not the client's (its next offsets are to be set). */
  private ConsumerRecords<K, V> decide(ConsumerRecords<K, V> batch, boolean rebuilt) {
    if (settings.keyAudit || settings.headerAudit) {
      audit(batch);
    }
    Map<TopicPartition, List<ConsumerRecord<K, V>>> out = null;
    Map<String, View> views = new HashMap<>();
    Map<TopicPartition, List<Long>> assigned = new TreeMap<>(BY_NAME);
    Map<TopicPartition, List<ConsumerRecord<K, V>>> kept = new HashMap<>();
    boolean changed = false;
    for (TopicPartition tp : batch.partitions()) {
      List<ConsumerRecord<K, V>> records = batch.records(tp);
      TopicGates t = topics.get(tp.topic());
      long first = records.get(0).offset();
      start.putIfAbsent(tp, first);
      if (!t.ordered()) {
        given.put(tp, records.get(records.size() - 1).offset() + 1);
        kept.put(tp, records);
        continue;
      }
      int p = tp.partition();
      long limit = t.gates.limit(p);
      int n = records.size();
      int upto = n;
      if (records.get(n - 1).offset() >= limit) {
        for (int i = 0; i < n; i++) {
          long o = records.get(i).offset();
          if (o < limit) {
            continue;
          }
          if (mayDeliver(t, p, o, views)) {
            limit = t.gates.limit(p);
          } else {
            upto = i;
            noteWaits(t, tp, o, views);
            break;
          }
        }
      }
      if (upto < n) {
        changed = true;
        hold(tp, records.get(upto).offset());
        records = records.subList(0, upto);
      }
      if (records.isEmpty()) {
        continue;
      }
      long last = records.get(records.size() - 1).offset();
      crossings(t, tp, last, assigned);
      given.put(tp, last + 1);
      if (t.history.compacted) {
        List<ConsumerRecord<K, V>> live = new ArrayList<>(records.size());
        for (ConsumerRecord<K, V> r : records) {
          if (!isTombstoneCopy(r)) {
            live.add(r);
          }
        }
        changed |= live.size() != records.size();
        records = live;
      }
      dueAnnouncement(t, tp);
      if (!records.isEmpty()) {
        kept.put(tp, records);
      }
    }
    if (!assigned.isEmpty()) {
      try {
        runAssigned(assigned);
      } catch (RuntimeException e) {
        // C-CB-5: nothing judged with it is given; it all comes again, the callback first.
        takeBack(batch);
        throw e;
      }
    }
    declareInterest();
    if (!changed && !rebuilt) {
      return batch;
    }
    out = kept;
    return records(out, nextOffsets(out));
  }

  /** Nothing of {@code batch} is given: every partition of it is sought back to its first record. */
  private void takeBack(ConsumerRecords<K, V> batch) {
    for (TopicPartition tp : batch.partitions()) {
      long first = batch.records(tp).get(0).offset();
      unhold(tp);
      inner.seek(tp, first);
      given.put(tp, first);
      due.remove(tp);
    }
    declareInterest();
  }

  // --- audits (C-AUDIT) -------------------------------------------------------------------

  private long violations;

  /** Records the audits found misplaced (C-AUDIT-1), under either policy. */
  public long violations() {
    return violations;
  }

  /**
   * The audit of a batch's ordered records, one record in {@code ordered.audit.every} of each
   * partition's: an epoch header newer than the copy has the history read again first
   * (C-AUDIT-2; the gates then judge by it); a keyed record (byte[] keys: a deserialized key
   * cannot be hashed as it was sent) whose key routes elsewhere under every layout that may have
   * placed it, or an epoch header that contradicts its offset, is a violation: logged and given,
   * or with {@code ordered.violation.policy=raise} the batch is taken back and the call raises.
   * The audit gives nothing the gates hold and stands in for no check (C-AUDIT-3).
   */
  private void audit(ConsumerRecords<K, V> batch) {
    Set<String> reread = null;
    for (TopicPartition tp : batch.partitions()) {
      TopicGates t = topics.get(tp.topic());
      if (t == null || !t.ordered()) {
        continue;
      }
      List<ConsumerRecord<K, V>> records = batch.records(tp);
      for (int i = 0; i < records.size(); i += settings.auditEvery) {
        ConsumerRecord<K, V> r = records.get(i);
        String problem = null;
        Long header = null;
        if (settings.headerAudit) {
          Header h = r.headers().lastHeader(settings.epochHeaderName);
          if (h != null) {
            String v = new String(h.value(), java.nio.charset.StandardCharsets.UTF_8);
            try {
              header = Long.parseLong(v.trim());
            } catch (NumberFormatException e) {
              problem = "epoch header '" + v + "' is not an epoch number";
            }
          }
          if (header != null && header > t.gates.latestEpoch()
              && (reread == null || !reread.contains(t.topic))) {
            // A record written under an epoch the copy lacks: read the history before judging.
            if (reread == null) {
              reread = new HashSet<>();
            }
            reread.add(t.topic);
            covered.keySet().removeIf(p -> p.topic().equals(t.topic));
            if (load(t)) {
              reloaded(t);
            }
          }
        }
        if (problem == null) {
          problem = misplaced(t, tp.partition(), r, header);
        }
        if (problem != null) {
          violations++;
          String what = "order violation in " + tp + "@" + r.offset() + ": " + problem;
          if (settings.violationPolicy.equals("raise")) {
            takeBack(batch);
            throw new OrderViolationException(what);
          }
          LOG.warn(what);
        }
      }
    }
  }

  /** What is wrong with {@code r}'s place, or null (C-AUDIT-1). */
  private String misplaced(TopicGates t, int partition, ConsumerRecord<K, V> r, Long header) {
    long[] numbers = t.auditEpochs;
    long offset = r.offset();
    long lo = 0;
    long hi = numbers.length == 0 ? 0 : numbers[numbers.length - 1];
    for (int i = 0; i < numbers.length; i++) {
      long[] bounds = t.auditBounds[i];
      if (partition >= bounds.length || bounds[partition] == Long.MIN_VALUE) {
        continue;
      }
      long bound = bounds[partition];
      if (t.auditGives[i][partition] && offset >= bound) {
        lo = Math.max(lo, numbers[i]);
      }
      if (t.auditReceives[i][partition] && offset < bound) {
        hi = Math.min(hi, numbers[i] - 1);
      }
    }
    byte[] key = settings.keyAudit && r.key() instanceof byte[] ? (byte[]) r.key() : null;
    long hash = key == null ? -1 : Hashing.hash(key, t.history.algorithm); // once per record
    if (header != null) {
      if (header < lo || header > hi) {
        return "epoch header " + header + " outside epochs " + lo + ".." + hi + " at this offset";
      }
      Layout l = t.layout(header);
      if (key != null && l != null && l.route(hash) != partition) {
        return "key routes elsewhere under its header epoch " + header;
      }
    }
    if (key == null) {
      return null;
    }
    boolean any = false;
    for (long e = lo; e <= hi; e++) {
      Layout l = t.layout(e);
      if (l == null) {
        continue;
      }
      if (l.route(hash) == partition) {
        return null;
      }
      any = true;
    }
    return any ? "key routes elsewhere under every epoch " + lo + ".." + hi : null;
  }

  private Map<TopicPartition, OffsetAndMetadata> nextOffsets(
      Map<TopicPartition, List<ConsumerRecord<K, V>>> out) {
    Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
    for (TopicPartition tp : out.keySet()) {
      Long g = given.get(tp);
      if (g != null) {
        next.put(tp, new OffsetAndMetadata(g));
      }
    }
    return next;
  }

  static <K, V> ConsumerRecords<K, V> records(
      Map<TopicPartition, List<ConsumerRecord<K, V>>> out,
      Map<TopicPartition, OffsetAndMetadata> next) {
    if (twoArgRecords) {
      try {
        return new ConsumerRecords<>(out, next);
      } catch (NoSuchMethodError before4) {
        twoArgRecords = false;
      }
    }
    return new ConsumerRecords<>(out);
  }

  private static boolean isTombstoneCopy(ConsumerRecord<?, ?> r) {
    if (r.value() != null) {
      return false;
    }
    Header h = r.headers().lastHeader(TOMBSTONE_HEADER);
    return h != null;
  }

  private static final java.util.Comparator<TopicPartition> BY_NAME =
      java.util.Comparator.comparing(TopicPartition::topic).thenComparingInt(TopicPartition::partition);

  /** C-CB-3: every receiving boundary in [start, last] this assignment has not yet crossed. */
  private void crossings(
      TopicGates t, TopicPartition tp, long last, Map<TopicPartition, List<Long>> out) {
    long from = start.getOrDefault(tp, 0L);
    long done = crossed.getOrDefault(tp, Long.MIN_VALUE);
    for (long[] g : t.gates.gatesOf(tp.partition())) {
      long b = g[0];
      if (b > last) {
        break;
      }
      if (b >= from && b > done) {
        List<Long> list = out.computeIfAbsent(tp, k -> new ArrayList<>());
        if (list.isEmpty() || list.get(list.size() - 1) != b) {
          list.add(b);
        }
      }
    }
  }

  /** The crossings, one call per round: a partition's boundaries in ascending order. */
  private void runAssigned(Map<TopicPartition, List<Long>> crossings) {
    OrderedConsumerRebalanceListener keys = keyListener();
    for (int round = 0; ; round++) {
      Map<TopicPartition, Long> call = new TreeMap<>(BY_NAME);
      for (Map.Entry<TopicPartition, List<Long>> c : crossings.entrySet()) {
        if (round < c.getValue().size()) {
          call.put(c.getKey(), c.getValue().get(round));
        }
      }
      if (call.isEmpty()) {
        return;
      }
      if (keys != null) {
        keys.onPartitionKeyAssigned(call);
      }
      crossed.putAll(call);
    }
  }

  /** C-ANN-1: a sealed giving boundary m with start < m <= position, above what was announced. */
  private void dueAnnouncement(TopicGates t, TopicPartition tp) {
    List<Long> marks = t.gates.sourceMarks(tp.partition());
    if (marks.isEmpty()) {
      return;
    }
    long p = given.get(tp);
    long from = start.getOrDefault(tp, 0L);
    long done = Math.max(announced.getOrDefault(tp, -1L), ownCommitted.getOrDefault(tp, -1L));
    for (long m : marks) {
      if (m > from && m <= p && m > done) {
        due.put(tp, p);
        dueMark.put(tp, m);
        return;
      }
    }
  }

  private OrderedConsumerRebalanceListener keyListener() {
    if (keyListener != null) {
      return keyListener;
    }
    return userListener instanceof OrderedConsumerRebalanceListener
        ? (OrderedConsumerRebalanceListener) userListener
        : null;
  }

  private OrderedConsumerRebalanceListener keyListener;

  /**
   * The key-state callbacks for a consumer that calls {@code assign()} (no rebalance listener),
   * or to hear them apart from the listener given to {@code subscribe()}: once set, only this
   * listener's {@code onPartitionKeyMaybeRevoked} and {@code onPartitionKeyAssigned} run; null
   * goes back to the subscription's listener.
   */
  public void setKeyListener(OrderedConsumerRebalanceListener listener) {
    keyListener = listener;
  }

  // --- held partitions -------------------------------------------------------------------

  /** Decide held partitions again every {@code ordered.gate.poll.interval.ms} (C-HOLD-3). */
  private void recheck(boolean now) {
    if (held.isEmpty()) {
      nextRecheck = 0;
      return;
    }
    long t0 = clock.getAsLong();
    if (!now && t0 < nextRecheck && (trusted || !store.connected())) {
      // Not due; but a session back re-reads the layouts and decides again at once (C-SESSION-3).
      return;
    }
    nextRecheck = t0 + TimeUnit.MILLISECONDS.toNanos(settings.gatePollIntervalMs);
    boolean full = recheckFull || !trusted;
    recheckFull = false;
    if (!recover()) {
      return;
    }
    if (!full && futile()) {
      return; // decided: still closed, without two reads of Kafka every interval
    }
    Map<String, View> views = new HashMap<>();
    // One read of Kafka per topic for all its held gates (one per gate cost a round trip each,
    // every interval, for as long as a transition holds them).
    Map<String, Set<Integer>> needs = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> h : held.entrySet()) {
      TopicGates t = topics.get(h.getKey().topic());
      if (t != null && t.ordered()) {
        needs
            .computeIfAbsent(t.topic, k -> new HashSet<>())
            .addAll(t.gates.requiredPartitions(h.getKey().partition(), h.getValue()));
      }
    }
    needs.forEach((topic, parts) -> views.computeIfAbsent(topic, View::new).need(parts));
    List<TopicPartition> open = new ArrayList<>();
    for (Map.Entry<TopicPartition, Long> h : held.entrySet()) {
      TopicGates t = topics.get(h.getKey().topic());
      if (t == null || !t.ordered() || mayDeliver(t, h.getKey().partition(), h.getValue(), views)) {
        open.add(h.getKey());
      } else {
        noteWaits(t, h.getKey(), h.getValue(), views);
      }
    }
    if (open.isEmpty()) {
      return;
    }
    List<TopicPartition> resume = new ArrayList<>();
    for (TopicPartition tp : open) {
      held.remove(tp);
      if (!appPaused.contains(tp)) {
        resume.add(tp);
      }
    }
    inner.resume(resume);
    declareInterest();
  }

  /**
   * Whether no read of Kafka could open a held gate now: every held partition waits only on
   * partitions this consumer reads (assigned, not paused), each given below the offset it
   * waits for. Such a partition's progress is capped at what this consumer gave (C-REPLAY-2),
   * so neither a commit nor a log start read can change the decision until it is read further,
   * and reading further brings its boundary commit, which re-checks at once (C-ANN-3). The
   * client's position below the wait too: a log start past it (retention) resets the position
   * there, and the next re-check reads Kafka and opens the gate by the log start (C-GATE-6).
   */
  private boolean futile() {
    Set<TopicPartition> owned = null;
    Set<TopicPartition> paused = null;
    for (TopicPartition tp : held.keySet()) {
      List<GateEvaluator.Wait> found = waits.get(tp);
      if (found == null || found.isEmpty()) {
        return false;
      }
      for (GateEvaluator.Wait wait : found) {
        if (wait.partition() < 0 || wait.offset() < 0) {
          return false; // a seal, or a boundary not known yet
        }
        TopicPartition source = new TopicPartition(tp.topic(), wait.partition());
        if (owned == null) {
          owned = inner.assignment();
          paused = inner.paused();
        }
        if (!owned.contains(source) || paused.contains(source)) {
          return false;
        }
        Long mine = given.containsKey(source) ? given.get(source) : start.get(source);
        if (mine == null || mine >= wait.offset()) {
          return false;
        }
        try {
          if (inner.position(source, Duration.ZERO) >= wait.offset()) {
            return false; // past it without giving it: a reset past a log start, a compacted gap
          }
        } catch (RuntimeException unknown) {
          return false;
        }
      }
    }
    return true;
  }

  /** C-POS-2: declare what held gates wait on, per topic, when it changed. */
  private void declareInterest() {
    if (group == null || !settings.positions || (waits.isEmpty() && declared.isEmpty())) {
      return; // nothing held, nothing declared: the call of every batch stops here
    }
    waits.keySet().retainAll(held.keySet());
    Map<String, Map<Integer, Long>> byTopic = new HashMap<>();
    for (Map.Entry<TopicPartition, List<GateEvaluator.Wait>> h : waits.entrySet()) {
      Map<Integer, Long> w = byTopic.computeIfAbsent(h.getKey().topic(), k -> new TreeMap<>());
      for (GateEvaluator.Wait wait : h.getValue()) {
        if (wait.partition() >= 0 && wait.offset() >= 0) {
          w.merge(wait.partition(), wait.offset(), Math::max);
        }
      }
    }
    Set<String> names = new HashSet<>(declared.keySet());
    names.addAll(byTopic.keySet());
    for (String topic : names) {
      Map<Integer, Long> now = byTopic.getOrDefault(topic, Map.of());
      if (!now.equals(declared.getOrDefault(topic, Map.of()))) {
        store.declareInterest(group, topic, member, now);
        if (now.isEmpty()) {
          declared.remove(topic);
        } else {
          declared.put(topic, now);
        }
      }
    }
  }

  // --- announcements and commits ---------------------------------------------------------

  /**
   * Run the due announcements (of {@code only}, or all): the key callback once for those not
   * yet told, then the boundary commit (C-ANN-3), or the release in application mode (C-ANN-4).
   */
  private void announce(Set<TopicPartition> only) {
    if (due.isEmpty()) {
      return;
    }
    Map<TopicPartition, Long> todo = new TreeMap<>(BY_NAME);
    for (Map.Entry<TopicPartition, Long> d : due.entrySet()) {
      if (only == null || only.contains(d.getKey())) {
        todo.put(d.getKey(), d.getValue());
      }
    }
    if (todo.isEmpty()) {
      return;
    }
    Map<TopicPartition, Long> untold = new TreeMap<>(BY_NAME);
    for (Map.Entry<TopicPartition, Long> d : todo.entrySet()) {
      if (!d.getValue().equals(told.get(d.getKey()))) {
        untold.put(d.getKey(), d.getValue());
      }
    }
    OrderedConsumerRebalanceListener keys = keyListener();
    if (!untold.isEmpty() && keys != null) {
      keys.onPartitionKeyMaybeRevoked(untold);
    }
    told.putAll(untold);
    if (applicationMode || group == null) {
      for (Map.Entry<TopicPartition, Long> d : todo.entrySet()) {
        announced.merge(d.getKey(), d.getValue(), Math::max);
        due.remove(d.getKey());
        told.remove(d.getKey());
      }
      return;
    }
    Map<TopicPartition, OffsetAndMetadata> offsets = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> d : todo.entrySet()) {
      offsets.put(d.getKey(), new OffsetAndMetadata(d.getValue()));
    }
    try {
      inner.commitSync(offsets);
    } catch (RuntimeException e) {
      // Tried again at the next call, without the callback (C-ANN-3).
      LOG.warn("boundary commit of {} failed: {}", todo, e.toString());
      return;
    }
    for (Map.Entry<TopicPartition, Long> d : todo.entrySet()) {
      TopicPartition tp = d.getKey();
      announced.merge(tp, d.getValue(), Math::max);
      ownCommitted.merge(tp, d.getValue(), Math::max);
      due.remove(tp);
      told.remove(tp);
      if (settings.positions) {
        store.publishProgress(group, tp.topic(), tp.partition(), d.getValue());
      }
    }
    // Our own boundary commit may open a gate we hold: decide again at once.
    if (!held.isEmpty()) {
      nextRecheck = clock.getAsLong();
      recheckFull = true;
    }
  }

  /**
   * What a commit of positions may write: each assigned partition's offset after its last
   * given record, below the boundary of a due announcement (C-COMMIT-3), not a pending
   * giver (C-COMMIT-4).
   */
  private Map<TopicPartition, OffsetAndMetadata> commitable(Set<TopicPartition> only) {
    return storedOffsets(only, true);
  }

  private Map<TopicPartition, OffsetAndMetadata> storedOffsets(
      Set<TopicPartition> only, boolean unwritten) {
    Map<TopicPartition, OffsetAndMetadata> out = new HashMap<>();
    Set<TopicPartition> owned = inner.assignment();
    for (Map.Entry<TopicPartition, Long> g : given.entrySet()) {
      TopicPartition tp = g.getKey();
      if ((only != null && !only.contains(tp)) || !owned.contains(tp)) {
        continue;
      }
      TopicGates t = topics.get(tp.topic());
      if (t != null && t.ordered() && t.pendingGivers.contains(tp.partition())) {
        continue;
      }
      long offset = g.getValue();
      if (due.containsKey(tp)) {
        // C-COMMIT-3: at most m - 1 until the announcement of boundary m has committed it.
        offset = Math.min(offset, dueMark.getOrDefault(tp, offset + 1) - 1);
      }
      if ((unwritten && offset == ownCommitted.getOrDefault(tp, -1L))
          || offset < start.getOrDefault(tp, 0L)) {
        continue; // the boundary commit just wrote it, or nothing was given yet
      }
      out.put(tp, new OffsetAndMetadata(offset));
    }
    return out;
  }

  private void maybeAutoCommit() {
    if (!autoCommit) {
      return;
    }
    long now = clock.getAsLong();
    if (now < nextAutoCommit) {
      return;
    }
    nextAutoCommit = now + TimeUnit.MILLISECONDS.toNanos(autoCommitIntervalMs);
    autoCommitNow();
  }

  /** One auto-commit of the stored offsets (C-COMMIT-8); the scenarios' {@code auto_commit}. */
  void autoCommitNow() {
    Map<TopicPartition, OffsetAndMetadata> offsets = commitable(null);
    if (!offsets.isEmpty()) {
      inner.commitAsync(
          offsets,
          (o, e) -> {
            if (e != null) {
              LOG.debug("auto-commit of {} failed: {}", o, e.toString());
            }
          });
    }
  }

  /** After a commit of stored offsets: the progress of ordered partitions (C-POS). */
  private void committedProgress(Map<TopicPartition, OffsetAndMetadata> offsets) {
    if (!settings.positions || group == null) {
      return;
    }
    for (Map.Entry<TopicPartition, OffsetAndMetadata> e : offsets.entrySet()) {
      TopicGates t = topics.get(e.getKey().topic());
      if (t != null && t.ordered()) {
        store.publishProgress(group, e.getKey().topic(), e.getKey().partition(), e.getValue().offset());
      }
    }
  }

  private void commitQuietly(Map<TopicPartition, OffsetAndMetadata> offsets) {
    if (offsets.isEmpty()) {
      return;
    }
    try {
      inner.commitSync(offsets);
    } catch (RuntimeException e) {
      LOG.warn("commit of {} failed: {}", offsets, e.toString());
    }
  }

  @Override
  public void commitSync() {
    commit(null, null, false, null);
  }

  @Override
  public void commitSync(Duration timeout) {
    commit(null, timeout, false, null);
  }

  @Override
  public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets) {
    commit(offsets, null, false, null);
  }

  @Override
  public void commitSync(Map<TopicPartition, OffsetAndMetadata> offsets, Duration timeout) {
    commit(offsets, timeout, false, null);
  }

  @Override
  public void commitAsync() {
    commit(null, null, true, null);
  }

  @Override
  public void commitAsync(OffsetCommitCallback callback) {
    commit(null, null, true, callback);
  }

  @Override
  public void commitAsync(Map<TopicPartition, OffsetAndMetadata> offsets, OffsetCommitCallback callback) {
    commit(offsets, null, true, callback);
  }

  /**
   * The one path of the application's commits: {@code offsets} null commits the stored offsets
   * (the due announcements first, C-ANN-3; what may be written, C-COMMIT-3/4), else the
   * application's own offsets pass through (C-APP-4). Once Kafka acknowledged it: the progress of
   * stored offsets (C-POS), and the rewind markers an application-mode rewind waits for
   * (C-REPLAY-5). {@code timeout} null: the inner consumer's default.
   */
  private void commit(
      Map<TopicPartition, OffsetAndMetadata> offsets,
      Duration timeout,
      boolean async,
      OffsetCommitCallback callback) {
    ensureOpen();
    boolean stored = offsets == null;
    if (stored) {
      announce(null);
      offsets = commitable(null);
    }
    Map<TopicPartition, OffsetAndMetadata> sent = offsets;
    if (async) {
      inner.commitAsync(
          sent,
          (o, e) -> {
            if (e == null) {
              acknowledged(sent, stored);
            }
            if (callback != null) {
              callback.onComplete(o, e);
            }
          });
      return;
    }
    if (stored && sent.isEmpty()) {
      return;
    }
    if (timeout == null) {
      inner.commitSync(sent);
    } else {
      inner.commitSync(sent, timeout);
    }
    acknowledged(sent, stored);
  }

  private void acknowledged(Map<TopicPartition, OffsetAndMetadata> offsets, boolean stored) {
    if (stored) {
      committedProgress(offsets);
    }
    if (!rewound.isEmpty()) {
      Map<TopicPartition, Long> now = new HashMap<>();
      offsets.forEach((tp, om) -> now.put(tp, om.offset()));
      rewindCommitted(now);
    }
  }

  /**
   * C-REPLAY-5: an application-mode rewind's marker is written once the source's committed
   * offset differs from the one read at the rewind ({@code now}: committed offsets seen).
   */
  private void rewindCommitted(Map<TopicPartition, Long> now) {
    Set<String> marked = new HashSet<>();
    for (Map.Entry<TopicPartition, Long> c : now.entrySet()) {
      TopicPartition tp = c.getKey();
      Long then = rewound.get(tp);
      if (then == null || c.getValue() == null || c.getValue().equals(then)) {
        continue;
      }
      rewound.remove(tp);
      if (marked.add(tp.topic())) {
        try {
          topic(tp.topic()).marker = store.markRewound(group, tp.topic());
        } catch (RuntimeException e) {
          LOG.warn("rewind marker of {} not written: {}", tp.topic(), e.toString());
        }
      }
    }
  }

  /** C-REPLAY-5's other way: commits made elsewhere (a transaction), read once per interval. */
  private void readRewound() {
    long now = clock.getAsLong();
    if (rewound.isEmpty() || now < nextRewindRead) {
      return;
    }
    nextRewindRead = now + TimeUnit.MILLISECONDS.toNanos(settings.gatePollIntervalMs);
    rewound.keySet().retainAll(inner.assignment()); // it stops waiting when the partition leaves
    try {
      Map<TopicPartition, OffsetAndMetadata> found =
          inner.committed(new HashSet<>(rewound.keySet()), COMMITTED_TIMEOUT);
      Map<TopicPartition, Long> seen = new HashMap<>();
      for (TopicPartition tp : rewound.keySet()) {
        OffsetAndMetadata om = found.get(tp);
        seen.put(tp, om == null ? -1L : om.offset());
      }
      rewindCommitted(seen);
    } catch (RuntimeException e) {
      LOG.debug("committed offsets of {} not read: {}", rewound.keySet(), e.toString());
    }
  }

  // --- positions -------------------------------------------------------------------------

  @Override
  public void seek(TopicPartition partition, long offset) {
    ensureOpen();
    place(partition, offset);
    inner.seek(partition, offset);
  }

  @Override
  public void seek(TopicPartition partition, OffsetAndMetadata offsetAndMetadata) {
    ensureOpen();
    place(partition, offsetAndMetadata.offset());
    inner.seek(partition, offsetAndMetadata);
  }

  @Override
  public void seekToBeginning(Collection<TopicPartition> partitions) {
    ensureOpen();
    // The beginning is Kafka's log start as it answers now, never a cached value (C-REPLAY-3).
    Map<TopicPartition, Long> starts = inner.beginningOffsets(partitions);
    for (Map.Entry<TopicPartition, Long> e : starts.entrySet()) {
      seek(e.getKey(), e.getValue());
    }
  }

  @Override
  public void seekToEnd(Collection<TopicPartition> partitions) {
    ensureOpen();
    for (TopicPartition tp : partitions) {
      unhold(tp);
      covered.remove(tp);
    }
    inner.seekToEnd(partitions);
  }

  private void unhold(TopicPartition tp) {
    if (held.remove(tp) != null && !appPaused.contains(tp)) {
      inner.resume(List.of(tp));
    }
  }

  /**
   * The application places a partition (C-APP-3, C-REPLAY-3): its hold and coverage go; at
   * another offset than the one commits would write, a rewind: announcements end, crossings may
   * run again, the topic's open gates are forgotten, and in auto mode a source whose committed
   * offset lies past the new one is committed back, then the rewind marker written (C-REPLAY-4).
   */
  private void place(TopicPartition tp, long offset) {
    unhold(tp);
    covered.remove(tp);
    Long stored = given.get(tp);
    if (stored != null && stored == offset) {
      return;
    }
    start.put(tp, offset);
    given.put(tp, offset);
    crossed.remove(tp);
    due.remove(tp);
    told.remove(tp);
    announced.remove(tp);
    TopicGates t = topic(tp.topic());
    if (!t.ordered()) {
      return;
    }
    forget(t);
    if (group == null || !t.gates.isSource(tp.partition())) {
      return;
    }
    if (applicationMode) {
      // C-REPLAY-5: the application commits; the marker waits for its commit to move the offset.
      long then = -1;
      try {
        OffsetAndMetadata c = inner.committed(Set.of(tp), COMMITTED_TIMEOUT).get(tp);
        then = c == null ? -1 : c.offset();
      } catch (RuntimeException e) {
        LOG.warn("committed offset of {} not read at its rewind: {}", tp, e.toString());
      }
      rewound.put(tp, then);
      return;
    }
    boolean back = true;
    try {
      OffsetAndMetadata c = inner.committed(Set.of(tp), COMMITTED_TIMEOUT).get(tp);
      back = c != null && c.offset() > offset;
      if (back) {
        inner.commitSync(Map.of(tp, new OffsetAndMetadata(offset)));
      }
    } catch (RuntimeException e) {
      LOG.warn("rewind commit of {} to {} failed: {}", tp, offset, e.toString());
    }
    if (back) {
      try {
        t.marker = store.markRewound(group, tp.topic());
      } catch (RuntimeException e) {
        LOG.warn("rewind marker of {} not written: {}", tp.topic(), e.toString());
      }
    }
  }

  @Override
  public long position(TopicPartition partition) {
    return inner.position(partition);
  }

  @Override
  public long position(TopicPartition partition, Duration timeout) {
    return inner.position(partition, timeout);
  }

  @Override
  public Map<TopicPartition, OffsetAndMetadata> committed(Set<TopicPartition> partitions) {
    return inner.committed(partitions);
  }

  @Override
  public Map<TopicPartition, OffsetAndMetadata> committed(
      Set<TopicPartition> partitions, Duration timeout) {
    return inner.committed(partitions, timeout);
  }

  /** kafka-clients 3.9's single-partition form (gone in 4.0). */
  @Deprecated
  public OffsetAndMetadata committed(TopicPartition partition) {
    return inner.committed(Set.of(partition)).get(partition);
  }

  /** kafka-clients 3.9's single-partition form (gone in 4.0). */
  @Deprecated
  public OffsetAndMetadata committed(TopicPartition partition, Duration timeout) {
    return inner.committed(Set.of(partition), timeout).get(partition);
  }

  /**
   * The partitions a gate holds now, each with the offset of its first held record (where its
   * position stands): for monitoring; not part of {@link Consumer}.
   */
  public Map<TopicPartition, Long> heldPartitions() {
    return Map.copyOf(held);
  }

  /** What each held partition's gate waits on, as last decided (the conformance scenarios). */
  Map<TopicPartition, List<GateEvaluator.Wait>> waits() {
    Map<TopicPartition, List<GateEvaluator.Wait>> out = new HashMap<>(waits);
    out.keySet().retainAll(held.keySet());
    return out;
  }

  /** What a commit of positions would write now: the spec's stored offsets. */
  Map<TopicPartition, OffsetAndMetadata> stored() {
    return storedOffsets(null, false);
  }

  // --- pauses (C-APP-2, C-HOLD-5) --------------------------------------------------------

  /** What the application paused (a gate's own pause is not reported). */
  @Override
  public Set<TopicPartition> paused() {
    Set<TopicPartition> out = new HashSet<>(appPaused);
    out.retainAll(inner.assignment());
    return out;
  }

  @Override
  public void pause(Collection<TopicPartition> partitions) {
    ensureOpen();
    appPaused.addAll(partitions);
    inner.pause(partitions);
  }

  /** Resumes what the application paused; a partition a gate holds stays paused until it opens. */
  @Override
  public void resume(Collection<TopicPartition> partitions) {
    ensureOpen();
    List<TopicPartition> go = new ArrayList<>();
    for (TopicPartition tp : partitions) {
      appPaused.remove(tp);
      if (!held.containsKey(tp)) {
        go.add(tp);
      }
    }
    inner.resume(go);
  }

  // --- passed through --------------------------------------------------------------------

  @Override
  public void registerMetricForSubscription(KafkaMetric metric) {
    inner.registerMetricForSubscription(metric);
  }

  @Override
  public void unregisterMetricFromSubscription(KafkaMetric metric) {
    inner.unregisterMetricFromSubscription(metric);
  }

  @Override
  public Uuid clientInstanceId(Duration timeout) {
    return inner.clientInstanceId(timeout);
  }

  @Override
  public Map<MetricName, ? extends Metric> metrics() {
    return inner.metrics();
  }

  @Override
  public List<PartitionInfo> partitionsFor(String topic) {
    return inner.partitionsFor(topic);
  }

  @Override
  public List<PartitionInfo> partitionsFor(String topic, Duration timeout) {
    return inner.partitionsFor(topic, timeout);
  }

  @Override
  public Map<String, List<PartitionInfo>> listTopics() {
    return inner.listTopics();
  }

  @Override
  public Map<String, List<PartitionInfo>> listTopics(Duration timeout) {
    return inner.listTopics(timeout);
  }

  @Override
  public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(Map<TopicPartition, Long> times) {
    return inner.offsetsForTimes(times);
  }

  @Override
  public Map<TopicPartition, OffsetAndTimestamp> offsetsForTimes(
      Map<TopicPartition, Long> times, Duration timeout) {
    return inner.offsetsForTimes(times, timeout);
  }

  @Override
  public Map<TopicPartition, Long> beginningOffsets(Collection<TopicPartition> partitions) {
    return inner.beginningOffsets(partitions);
  }

  @Override
  public Map<TopicPartition, Long> beginningOffsets(
      Collection<TopicPartition> partitions, Duration timeout) {
    return inner.beginningOffsets(partitions, timeout);
  }

  @Override
  public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
    return inner.endOffsets(partitions);
  }

  @Override
  public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions, Duration timeout) {
    return inner.endOffsets(partitions, timeout);
  }

  @Override
  public OptionalLong currentLag(TopicPartition partition) {
    return inner.currentLag(partition);
  }

  @Override
  public ConsumerGroupMetadata groupMetadata() {
    return inner.groupMetadata();
  }

  @Override
  public void enforceRebalance() {
    inner.enforceRebalance();
  }

  @Override
  public void enforceRebalance(String reason) {
    inner.enforceRebalance(reason);
  }

  @Override
  public void wakeup() {
    inner.wakeup();
  }

  // --- close (C-COMMIT-7) ----------------------------------------------------------------

  @Override
  public void close() {
    close(Duration.ofSeconds(30));
  }

  @Override
  public void close(Duration timeout) {
    close(() -> inner.close(timeout));
  }

  @Override
  public void close(CloseOptions option) {
    close(() -> inner.close(option));
  }

  /** Leave (announce, commit), then close the inner consumer with {@code closeInner}, then the store. */
  private void close(Runnable closeInner) {
    if (closed) {
      return;
    }
    try {
      leave();
    } finally {
      closed = true;
      try {
        closeInner.run();
      } finally {
        store.close();
        synchronized (adminLock) {
          adminClosed = true;
          if (admin != null) {
            admin.close(Duration.ofSeconds(5));
          }
        }
      }
    }
  }

  /** Announce what was given and commit it, before the inner consumer leaves the group. */
  private void leave() {
    try {
      announce(null);
    } catch (RuntimeException e) {
      LOG.warn("announcement at close failed: {}", e.toString());
    }
    if (autoCommit) {
      commitQuietly(commitable(null));
    }
    held.clear();
    declareInterest();
  }

  private void ensureOpen() {
    if (closed) {
      throw new IllegalStateException("This consumer has already been closed.");
    }
  }
}
