package org.orderedkafka.connect;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.Config;
import org.apache.kafka.common.config.ConfigException;
import org.apache.kafka.common.config.ConfigValue;
import org.apache.kafka.common.metrics.PluginMetrics;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.apache.kafka.connect.sink.SinkTaskContext;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.Test;
import org.orderedkafka.ConsumerStore;
import org.orderedkafka.LayoutHistories;
import org.orderedkafka.gate.EpochInfo;

/**
 * The sink task's part of the consumer protocol, without a worker, ZooKeeper or Kafka: a fake
 * store serves the layout of one topic expanded 2 -> 3 (epoch 2: partition 0 gives keys to
 * partition 2 from its offset 10 on; partition 2 receives from its offset 0), a fake progress
 * serves the group's committed offsets, a fake context records what the task asks of the
 * worker, and a recording task stands for the wrapped sink.
 */
class OrderedSinkTaskTest {
  private static final String TOPIC = "t";
  private static final String FILE_SINK_FOR_TYPO = "org.apache.kafka.connect.file.FileStreamSinkConnector";
  private static final TopicPartition P0 = new TopicPartition(TOPIC, 0);
  private static final TopicPartition P2 = new TopicPartition(TOPIC, 2);

  private static final EpochInfo FIRST = new EpochInfo(1, true, List.of(), Map.of(), 2);
  private static final EpochInfo SPLIT = new EpochInfo(2, true, List.of(new int[] {0, 2}), Map.of(0, 10L, 2, 0L), 3);

  /** The layout store: the history in force and its topic node's mzxid. */
  static final class FakeStore implements ConsumerStore {
    List<EpochInfo> epochs = new ArrayList<>(List.of(FIRST, SPLIT));
    long mzxid = 1;
    boolean fail;
    int reads;
    final Set<String> registered = new HashSet<>();

    @Override
    public boolean connected() {
      return !fail;
    }

    @Override
    public LayoutHistories.History read(String topic) {
      if (fail) {
        throw new IllegalStateException("ZooKeeper away");
      }
      reads++;
      return new LayoutHistories.History(topic, true, List.copyOf(epochs), mzxid, false);
    }

    @Override
    public Check check(Collection<String> topics, String group, Collection<String> markers, long timeoutMs) {
      if (fail) {
        throw new IllegalStateException("ZooKeeper away");
      }
      Map<String, Long> zxids = new HashMap<>();
      for (String t : topics) {
        zxids.put(t, mzxid);
      }
      return new Check(zxids, Map.of());
    }

    @Override
    public long markRewound(String group, String topic) {
      return 0;
    }

    @Override
    public void registerGroup(String group, String topic) {
      registered.add(group + "/" + topic);
    }

    @Override
    public void declareInterest(String group, String topic, String member, Map<Integer, Long> waits) {}

    @Override
    public void publishProgress(String group, String topic, int partition, long offset) {}

    @Override
    public void close() {}
  }

  /** The group's committed offsets and the partitions' end offsets. */
  static final class FakeProgress implements SinkProgress {
    final Map<Integer, Long> committed = new HashMap<>();
    final Map<TopicPartition, Long> ends = new HashMap<>();
    final List<String> groups = new ArrayList<>();

    @Override
    public Map<Integer, Long> committed(String group, String topic, Set<Integer> partitions) {
      groups.add(group);
      return new HashMap<>(committed);
    }

    @Override
    public Map<Integer, Long> logStarts(String topic, Set<Integer> partitions) {
      return Map.of();
    }

    @Override
    public Map<TopicPartition, Long> endOffsets(Collection<TopicPartition> partitions) {
      Map<TopicPartition, Long> out = new HashMap<>();
      for (TopicPartition tp : partitions) {
        out.put(tp, ends.getOrDefault(tp, 0L));
      }
      return out;
    }

    @Override
    public void close() {}
  }

  /** What the task asked of the worker. */
  static final class FakeContext implements SinkTaskContext {
    final Map<TopicPartition, Long> rewinds = new HashMap<>();
    final Set<TopicPartition> paused = new HashSet<>();
    final Set<TopicPartition> assigned = new HashSet<>(List.of(P0, P2));
    long timeout = -1;
    int commitRequests;

    @Override
    public Map<String, String> configs() {
      return Map.of();
    }

    @Override
    public void offset(Map<TopicPartition, Long> offsets) {
      rewinds.putAll(offsets);
    }

    @Override
    public void offset(TopicPartition tp, long offset) {
      rewinds.put(tp, offset);
    }

    @Override
    public void timeout(long timeoutMs) {
      timeout = timeoutMs;
    }

    @Override
    public Set<TopicPartition> assignment() {
      return assigned;
    }

    @Override
    public void pause(TopicPartition... partitions) {
      paused.addAll(List.of(partitions));
    }

    @Override
    public void resume(TopicPartition... partitions) {
      paused.removeAll(List.of(partitions));
    }

    @Override
    public void requestCommit() {
      commitRequests++;
    }

    @Override
    public PluginMetrics pluginMetrics() {
      return null;
    }
  }

  /** The wrapped sink: what it was given, in order; its preCommit answer may be lowered. */
  static final class RecordingTask extends SinkTask {
    final List<SinkRecord> got = new ArrayList<>();
    Map<TopicPartition, OffsetAndMetadata> answer;
    Map<TopicPartition, OffsetAndMetadata> flushed;

    @Override
    public String version() {
      return "test";
    }

    @Override
    public void start(Map<String, String> props) {}

    @Override
    public void put(Collection<SinkRecord> records) {
      got.addAll(records);
    }

    @Override
    public Map<TopicPartition, OffsetAndMetadata> preCommit(Map<TopicPartition, OffsetAndMetadata> offsets) {
      flushed = offsets;
      return answer != null ? answer : offsets;
    }

    @Override
    public void stop() {}

    SinkTaskContext context() {
      return context;
    }
  }

  private FakeStore store;
  private FakeProgress progress;
  private FakeContext context;
  private RecordingTask sink;
  private OrderedSinkTask task;

  static Map<String, String> settings() {
    Map<String, String> props = new HashMap<>();
    props.put("name", "files");
    props.put("topics", TOPIC);
    props.put("file", "/dev/null");
    props.put(SinkSettings.CONNECTOR_CLASS, "org.example.Unused");
    props.put(SinkSettings.ADMIN_PREFIX + "bootstrap.servers", "localhost:1");
    props.put("ordered.zookeeper.connect", "localhost:2");
    props.put("ordered.gate.poll.interval.ms", "1");
    return props;
  }

  @BeforeEach
  void start() {
    store = new FakeStore();
    progress = new FakeProgress();
    context = new FakeContext();
    sink = new RecordingTask();
    task = new OrderedSinkTask(store, progress, sink);
    task.initialize(context);
    task.start(settings());
    task.open(List.of(P0, P2));
  }

  private static List<SinkRecord> records(TopicPartition tp, long from, long to) {
    List<SinkRecord> out = new ArrayList<>();
    for (long o = from; o < to; o++) {
      out.add(new SinkRecord(tp.topic(), tp.partition(), null, "k", null, "v" + o, o));
    }
    return out;
  }

  private static List<Long> offsets(List<SinkRecord> records, TopicPartition tp) {
    List<Long> out = new ArrayList<>();
    for (SinkRecord r : records) {
      if (r.kafkaPartition() == tp.partition()) {
        out.add(r.kafkaOffset());
      }
    }
    return out;
  }

  private void putLater(List<SinkRecord> records) throws InterruptedException {
    Thread.sleep(3); // past ordered.gate.poll.interval.ms: the held partitions are decided again
    task.put(records);
  }

  @Test
  void aDestinationIsHeldRewoundAndPausedUntilTheGroupCommitsTheSourceBoundary() throws Exception {
    progress.committed.put(0, 5L);
    List<SinkRecord> batch = new ArrayList<>(records(P0, 5, 8));
    batch.addAll(records(P2, 0, 4));
    task.put(batch);

    assertEquals(List.of(5L, 6L, 7L), offsets(sink.got, P0));
    assertEquals(List.of(), offsets(sink.got, P2), "no record of the held partition reaches the sink");
    assertEquals(Map.of(P2, 0L), context.rewinds);
    assertEquals(Set.of(P2), context.paused);
    assertEquals(1, context.timeout, "called again within ordered.gate.poll.interval.ms");
    assertEquals(Set.of("connect-files/" + TOPIC), store.registered);
    assertTrue(progress.groups.stream().allMatch("connect-files"::equals), progress.groups::toString);

    // The worker counts every record it passed to put(): the commit stays below the held one.
    Map<TopicPartition, OffsetAndMetadata> current = new HashMap<>();
    current.put(P0, new OffsetAndMetadata(8));
    current.put(P2, new OffsetAndMetadata(4));
    Map<TopicPartition, OffsetAndMetadata> commit = task.preCommit(current);
    assertEquals(8, commit.get(P0).offset());
    assertEquals(0, commit.get(P2).offset());
    assertEquals(0, sink.flushed.get(P2).offset(), "the sink is asked to flush only what it got");

    putLater(List.of());
    assertEquals(Set.of(P2), context.paused, "the gate is still closed");

    // Partition 0 reaches its boundary: a commit is asked for; the worker commits its answer.
    putLater(records(P0, 8, 12));
    assertEquals(1, context.commitRequests);
    assertEquals(Set.of(P2), context.paused, "the group has not committed offset 10 yet");
    progress.committed.put(0, task.preCommit(Map.of(P0, new OffsetAndMetadata(12))).get(P0).offset());
    putLater(List.of());
    assertEquals(Set.of(), context.paused, "resumed once the group committed partition 0 past 10");
    task.put(records(P2, 0, 4));
    assertEquals(List.of(0L, 1L, 2L, 3L), offsets(sink.got, P2));
  }

  @Test
  void recordsAfterAHeldOneInTheSameBatchAreNotGivenEither() throws Exception {
    progress.committed.put(0, 10L);
    task.put(records(P2, 0, 3));
    assertEquals(List.of(0L, 1L, 2L), offsets(sink.got, P2));
    // A third epoch: 2 gives to 3... here simply a later gate of partition 2 at offset 5.
    store.epochs.add(new EpochInfo(3, true, List.of(new int[] {1, 2}), Map.of(1, 7L, 2, 5L), 3));
    store.mzxid = 2;
    progress.committed.put(1, 3L);
    task.put(records(P2, 3, 9));
    assertEquals(List.of(0L, 1L, 2L, 3L, 4L), offsets(sink.got, P2));
    assertEquals(5L, context.rewinds.get(P2));
  }

  @Test
  void aRecordWrittenUnderAnEpochTheTaskDoesNotKnowMakesTheLayoutBeReadAgain() throws Exception {
    store.epochs = new ArrayList<>(List.of(FIRST));
    progress.ends.put(P2, 0L);
    task.put(List.of());
    task.put(records(P0, 0, 2)); // the first read: only epoch 1, partition 2 gates nothing
    int reads = store.reads;
    // The expansion is published; a record of partition 2 arrives past the covered offset.
    store.epochs.add(SPLIT);
    store.mzxid = 2;
    progress.ends.put(P2, 1L);
    task.put(records(P2, 0, 1));
    assertTrue(store.reads > reads, "the layout was read again before the record was judged");
    assertEquals(List.of(), offsets(sink.got, P2));
    assertEquals(Map.of(P2, 0L), context.rewinds);
  }

  @Test
  void aSourceThatCrossedItsBoundaryAsksForACommitAndTheSinksAnswerIsRespected() {
    task.put(records(P0, 8, 12));
    assertEquals(1, context.commitRequests, "partition 0 gave offset 10: the destination waits");
    sink.answer = Map.of(P0, new OffsetAndMetadata(9));
    Map<TopicPartition, OffsetAndMetadata> commit = task.preCommit(Map.of(P0, new OffsetAndMetadata(12)));
    assertEquals(9, commit.get(P0).offset(), "never past what the sink says it has written");
    task.put(List.of());
    assertEquals(2, context.commitRequests, "still due: the boundary is not committed yet");
    sink.answer = null;
    assertEquals(12, task.preCommit(Map.of(P0, new OffsetAndMetadata(12))).get(P0).offset());
    task.put(List.of());
    assertEquals(2, context.commitRequests);
  }

  @Test
  void aPendingGiverCommitsNothingUntilTheSeal() throws Exception {
    store.epochs = new ArrayList<>(List.of(FIRST, new EpochInfo(2, false, List.of(new int[] {0, 2}), Map.of(2, 0L), 3)));
    task.put(records(P0, 0, 4));
    assertEquals(List.of(0L, 1L, 2L, 3L), offsets(sink.got, P0));
    assertFalse(task.preCommit(Map.of(P0, new OffsetAndMetadata(4))).containsKey(P0));
  }

  @Test
  void aLayoutThatCannotBeReadHoldsEverything() {
    store.fail = true;
    task.put(records(P0, 0, 3));
    assertEquals(List.of(), sink.got);
    assertEquals(Map.of(P0, 0L), context.rewinds);
    assertEquals(Set.of(P0), context.paused);
  }

  @Test
  void theWrappedTaskCannotResumeAHeldPartition() {
    task.put(records(P2, 0, 1));
    assertEquals(Set.of(P2), context.paused);
    // The wrapped task's context is the guarded one.
    sink.context().resume(P2);
    assertEquals(Set.of(P2), context.paused);
  }

  @Test
  void aPartitionTheWrappedTaskPausedStaysPausedWhenItsGateOpens() throws Exception {
    sink.context().pause(P2);
    task.put(records(P2, 0, 2));
    assertEquals(Map.of(P2, 0L), context.rewinds);
    progress.committed.put(0, 10L);
    task.close(List.of(P0)); // partition 0 is another task's now: its commit counts as is
    putLater(List.of());
    assertEquals(Set.of(P2), context.paused, "the wrapped task's own pause is kept");
    sink.context().resume(P2);
    assertEquals(Set.of(), context.paused, "and its resume goes through once the gate is open");
  }

  @Test
  void aRevokedPartitionIsNoLongerHeldNorResumed() throws Exception {
    task.put(records(P2, 0, 2));
    assertTrue(context.paused.contains(P2));
    task.close(List.of(P2));
    context.assigned.remove(P2);
    context.paused.clear(); // the worker forgets the pauses of revoked partitions
    progress.committed.put(0, 10L);
    putLater(List.of());
    assertEquals(Set.of(), context.paused);
    sink.context().resume(P2);
    assertEquals(Set.of(), context.paused);
    // Assigned again: its records are judged afresh.
    task.open(List.of(P2));
    context.assigned.add(P2);
    task.put(records(P2, 0, 2));
    assertEquals(List.of(0L, 1L), offsets(sink.got, P2));
  }

  @Test
  void aHeldPartitionGivenBackToTheSameTaskIsResumed() throws Exception {
    task.put(records(P2, 0, 2));
    assertEquals(Set.of(P2), context.paused);
    // An eager rebalance gives the task the same partitions: the worker keeps the pause of
    // each partition still assigned.
    task.close(List.of(P0, P2));
    task.open(List.of(P0, P2));
    assertEquals(Set.of(), context.paused, "no hold is left to resume it later");
    progress.committed.put(0, 10L);
    task.put(records(P2, 0, 2));
    assertEquals(List.of(0L, 1L), offsets(sink.got, P2));
  }

  @Test
  void theChecksArePacedToTheCheckRate() {
    // One topic, ordered: a check is 3 requests (sync, exists, rewind marker); at 30 requests
    // a second, one check every 100 ms on average, two at once.
    Map<String, String> props = settings();
    props.put("ordered.layout.check.max.requests.per.s", "30");
    long[] now = {0};
    List<Long> slept = new ArrayList<>();
    SinkGates gates =
        new SinkGates(
            store,
            progress,
            "g",
            SinkSettings.parse(props).ordered,
            () -> now[0],
            nanos -> {
              slept.add(nanos);
              now[0] += nanos;
            });
    gates.open(List.of(P0));
    for (long o = 0; o < 4; o++) {
      progress.ends.put(P0, o + 1); // each batch lies past the last check's end offset
      gates.judge(Map.of(P0, new long[] {o}));
    }
    assertEquals(2, slept.size(), slept.toString());
    long spent = slept.stream().mapToLong(Long::longValue).sum();
    assertTrue(Math.abs(spent - 200_000_000L) < 1_000_000L, "two checks waited 100 ms each: " + slept);
  }

  @Test
  void theWrappedConnectorGetsEveryKeyButTheOrderedOnesAndItsOwnClassName() {
    Map<String, String> props = settings();
    props.put("connector.class", OrderedSinkConnector.class.getName());
    SinkSettings parsed = SinkSettings.parse(props);
    assertEquals("org.example.Unused", parsed.delegateConfig.get("connector.class"));
    assertEquals("/dev/null", parsed.delegateConfig.get("file"));
    assertTrue(parsed.delegateConfig.keySet().stream().noneMatch(k -> k.startsWith("ordered.")));
    assertEquals("connect-files", parsed.group);
    props.put("consumer.override.group.id", "mine");
    assertEquals("mine", SinkSettings.parse(props).group);
  }

  @Test
  void aMisconfigurationIsOneErrorNamingTheKey() {
    Map<String, String> props = settings();
    props.remove("ordered.zookeeper.connect");
    ConfigException e = assertThrows(ConfigException.class, () -> SinkSettings.parse(props));
    assertTrue(e.getMessage().startsWith("ordered.zookeeper.connect is required"), e.getMessage());

    Map<String, String> typo = settings();
    typo.put("ordered.gate.poll.interval.ms", "soon");
    Config result = new OrderedSinkConnector().validate(typo);
    List<ConfigValue> errors = result.configValues().stream().filter(v -> !v.errorMessages().isEmpty()).toList();
    assertEquals(1, errors.size(), errors.toString());
    assertEquals("ordered.gate.poll.interval.ms", errors.get(0).name());

    Map<String, String> noZk = settings();
    noZk.remove("ordered.zookeeper.connect");
    OrderedSinkConnector connector = new OrderedSinkConnector();
    result = connector.validate(noZk);
    errors = result.configValues().stream().filter(v -> !v.errorMessages().isEmpty()).toList();
    assertEquals(List.of("ordered.zookeeper.connect is required (the layout store)"), errors.get(0).errorMessages());
    assertEquals(1, errors.size(), errors.toString());
    // The worker's report reads a value for every key the connector defines (else it fails).
    Set<String> named = new HashSet<>();
    result.configValues().forEach(v -> named.add(v.name()));
    assertTrue(named.containsAll(connector.config().configKeys().keySet()), named::toString);

    Map<String, String> misspelt = settings();
    misspelt.put("ordered.sink.conector.class", FILE_SINK_FOR_TYPO);
    errors = new OrderedSinkConnector().validate(misspelt).configValues().stream()
        .filter(v -> !v.errorMessages().isEmpty()).toList();
    assertEquals("ordered.sink.conector.class", errors.get(0).name(), errors.toString());

    Map<String, String> noClass = settings();
    noClass.remove(SinkSettings.CONNECTOR_CLASS);
    e = assertThrows(ConfigException.class, () -> SinkSettings.parse(noClass));
    assertTrue(e.getMessage().startsWith(SinkSettings.CONNECTOR_CLASS + " is required"), e.getMessage());

    Map<String, String> missing = settings();
    errors = new OrderedSinkConnector().validate(missing).configValues().stream()
        .filter(v -> !v.errorMessages().isEmpty()).toList();
    assertEquals(SinkSettings.CONNECTOR_CLASS, errors.get(0).name(), errors.toString());
    assertTrue(errors.get(0).errorMessages().get(0).contains("org.example.Unused not found"), errors.toString());

    Map<String, String> noAdmin = settings();
    noAdmin.remove(SinkSettings.ADMIN_PREFIX + "bootstrap.servers");
    e = assertThrows(ConfigException.class, () -> SinkSettings.parse(noAdmin));
    assertTrue(e.getMessage().startsWith("ordered.sink.admin.bootstrap.servers is required"), e.getMessage());
    noAdmin.put("consumer.override.bootstrap.servers", "localhost:3");
    assertEquals("localhost:3", SinkSettings.parse(noAdmin).admin.get("bootstrap.servers"));
  }
}
