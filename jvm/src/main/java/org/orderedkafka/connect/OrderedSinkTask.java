package org.orderedkafka.connect;

import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.sink.SinkRecord;
import org.apache.kafka.connect.sink.SinkTask;
import org.apache.kafka.connect.sink.SinkTaskContext;
import org.orderedkafka.ConsumerStore;

/**
 * The task of {@link OrderedSinkConnector}: the wrapped connector's task, given only the
 * records the gate rule lets through, so each key reaches the sink in order across the
 * topic's expansions and shrinks.
 *
 * <p>A partition whose next record is not allowed is <em>held</em> the way Connect lets a
 * task hold one: that record and the partition's later records of the batch are not passed
 * to the wrapped task's {@code put}; the task asks the worker to rewind the partition to that
 * record ({@link SinkTaskContext#offset(TopicPartition, long)}) and pauses it, and asks to be
 * called again within {@code ordered.gate.poll.interval.ms} ({@link
 * SinkTaskContext#timeout(long)}) to decide it again; when its gate opens the partition is
 * resumed and the worker delivers it again from that record. The progress the gates read is
 * the connector's group's committed offsets, which the worker commits from {@link #preCommit}:
 * so a source partition that crossed its boundary asks for a commit at once ({@link
 * SinkTaskContext#requestCommit()}), and {@code preCommit} never answers an offset past a
 * record the wrapped task was not given, nor past the wrapped task's own answer.
 *
 * <p>The decisions are {@link SinkGates}'s; this class only translates between them and
 * Connect.
 */
public class OrderedSinkTask extends SinkTask {
  private SinkTask delegate;
  private SinkGates gates;
  private GuardedContext delegateContext;
  private ConsumerStore store;
  private SinkProgress progress;
  private long pollIntervalMs;
  /** What this task paused for a hold and has not resumed. */
  private final Set<TopicPartition> pausedForHolds = new HashSet<>();

  /** What the tests put in place of ZooKeeper, Kafka and the wrapped task (null: the real ones). */
  private final ConsumerStore givenStore;

  private final SinkProgress givenProgress;
  private final SinkTask givenDelegate;

  /** The worker creates the task by this constructor. */
  public OrderedSinkTask() {
    this(null, null, null);
  }

  /** A task on {@code store} and {@code progress}, wrapping {@code delegate} (the unit test). */
  OrderedSinkTask(ConsumerStore store, SinkProgress progress, SinkTask delegate) {
    this.givenStore = store;
    this.givenProgress = progress;
    this.givenDelegate = delegate;
  }

  @Override
  public String version() {
    return OrderedSinkConnector.VERSION;
  }

  @Override
  public void start(Map<String, String> props) {
    SinkSettings settings = SinkSettings.parse(props);
    pollIntervalMs = settings.ordered.gatePollIntervalMs;
    delegate = givenDelegate != null ? givenDelegate : settings.newTask(props.get(SinkSettings.TASK_CLASS));
    store = givenStore != null ? givenStore : ConsumerStore.open(settings.ordered);
    try {
      progress = givenProgress != null ? givenProgress : new AdminProgress(settings.admin);
    } catch (RuntimeException e) {
      store.close();
      throw e;
    }
    gates = new SinkGates(store, progress, settings.group, settings.ordered, System::nanoTime);
    delegateContext = new GuardedContext(context, gates);
    DelegateLoader.run(
        delegate,
        () -> {
          delegate.initialize(delegateContext);
          delegate.start(settings.delegateConfig);
        });
  }

  @Override
  public void open(Collection<TopicPartition> partitions) {
    gates.open(partitions);
    // The worker forgets only the pauses of partitions no longer assigned: one revoked and
    // given back to this task comes paused, while its gates start afresh (no hold), and
    // nothing would ever resume it.
    pausedForHolds.retainAll(context.assignment());
    List<TopicPartition> lift = new ArrayList<>();
    for (TopicPartition tp : partitions) {
      if (pausedForHolds.remove(tp) && !delegateContext.pausedByTask(tp)) {
        lift.add(tp);
      }
    }
    if (!lift.isEmpty()) {
      context.resume(lift.toArray(new TopicPartition[0]));
    }
    DelegateLoader.run(delegate, () -> delegate.open(partitions));
  }

  @Override
  public void close(Collection<TopicPartition> partitions) {
    try {
      DelegateLoader.run(delegate, () -> delegate.close(partitions));
    } finally {
      gates.close(partitions);
      delegateContext.forget(partitions);
    }
  }

  @Override
  public void put(Collection<SinkRecord> records) {
    // The partition a record was read from: a transformation may have renamed its topic.
    Map<TopicPartition, List<SinkRecord>> byPartition = new LinkedHashMap<>();
    for (SinkRecord r : records) {
      byPartition
          .computeIfAbsent(new TopicPartition(r.originalTopic(), r.originalKafkaPartition()), k -> new ArrayList<>())
          .add(r);
    }
    Map<TopicPartition, long[]> batch = new LinkedHashMap<>();
    for (Map.Entry<TopicPartition, List<SinkRecord>> e : byPartition.entrySet()) {
      long[] offsets = new long[e.getValue().size()];
      for (int i = 0; i < offsets.length; i++) {
        offsets[i] = e.getValue().get(i).originalKafkaOffset();
      }
      batch.put(e.getKey(), offsets);
    }
    Map<TopicPartition, Long> heldBefore = gates.held();
    Map<TopicPartition, Integer> allowed = gates.judge(batch);
    Map<TopicPartition, Integer> taken = new HashMap<>();
    List<SinkRecord> pass = new ArrayList<>(records.size());
    for (SinkRecord r : records) {
      TopicPartition tp = new TopicPartition(r.originalTopic(), r.originalKafkaPartition());
      int seen = taken.merge(tp, 1, Integer::sum);
      if (seen <= allowed.getOrDefault(tp, 0)) {
        pass.add(r);
      }
    }
    for (Map.Entry<TopicPartition, Long> h : gates.held().entrySet()) {
      if (!h.getValue().equals(heldBefore.get(h.getKey()))) {
        // The worker seeks the partition back to its first held record before its next
        // fetch; paused, it brings nothing until the gate opens.
        context.offset(h.getKey(), h.getValue());
        context.pause(h.getKey());
        pausedForHolds.add(h.getKey());
      }
    }
    DelegateLoader.run(delegate, () -> delegate.put(pass));
    List<TopicPartition> open = new ArrayList<>();
    for (TopicPartition tp : gates.recheck()) {
      pausedForHolds.remove(tp);
      if (!delegateContext.pausedByTask(tp) && context.assignment().contains(tp)) {
        open.add(tp);
      }
    }
    if (!open.isEmpty()) {
      context.resume(open.toArray(new TopicPartition[0]));
    }
    if (gates.commitDue()) {
      context.requestCommit();
    }
    if (gates.busy()) {
      context.timeout(pollIntervalMs);
    } else if (gates.anyOrdered()) {
      context.timeout(Math.max(pollIntervalMs, TimeUnit.SECONDS.toMillis(1)));
    }
  }

  @Override
  public void flush(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    DelegateLoader.run(delegate, () -> delegate.flush(gates.clamp(currentOffsets)));
  }

  @Override
  public Map<TopicPartition, OffsetAndMetadata> preCommit(Map<TopicPartition, OffsetAndMetadata> currentOffsets) {
    Map<TopicPartition, OffsetAndMetadata> clamped = gates.clamp(currentOffsets);
    return gates.commitable(DelegateLoader.call(delegate, () -> delegate.preCommit(clamped)), clamped);
  }

  @Override
  public void stop() {
    try {
      if (delegate != null) {
        DelegateLoader.run(delegate, delegate::stop);
      }
    } finally {
      if (progress != null) {
        progress.close();
      }
      if (store != null) {
        store.close();
      }
    }
  }
}
