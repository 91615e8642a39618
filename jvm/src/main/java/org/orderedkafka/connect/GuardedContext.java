package org.orderedkafka.connect;

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.connect.sink.ErrantRecordReporter;
import org.apache.kafka.connect.sink.SinkTaskContext;

/**
 * The {@link SinkTaskContext} the wrapped task is given: the worker's, except that the
 * wrapped task cannot resume a partition the gates hold (it stays paused until its gate
 * opens, then resumes only if the wrapped task did not pause it itself), and that a rewind
 * it asks for is told to the gates (what follows is a replay).
 */
final class GuardedContext implements SinkTaskContext {
  private final SinkTaskContext worker;
  private final SinkGates gates;
  /** What the wrapped task paused and did not resume. */
  private final Set<TopicPartition> paused = new HashSet<>();

  GuardedContext(SinkTaskContext worker, SinkGates gates) {
    this.worker = worker;
    this.gates = gates;
  }

  /** Whether the wrapped task paused {@code tp} (the gates then leave it paused when they open). */
  boolean pausedByTask(TopicPartition tp) {
    return paused.contains(tp);
  }

  /** Partitions leave the assignment: the wrapped task's pauses of them go with them. */
  void forget(java.util.Collection<TopicPartition> partitions) {
    paused.removeAll(partitions);
  }

  @Override
  public Map<String, String> configs() {
    return worker.configs();
  }

  @Override
  public void offset(Map<TopicPartition, Long> offsets) {
    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
      if (e.getValue() != null) {
        gates.rewound(e.getKey(), e.getValue());
      }
    }
    worker.offset(offsets);
  }

  @Override
  public void offset(TopicPartition tp, long offset) {
    gates.rewound(tp, offset);
    worker.offset(tp, offset);
  }

  @Override
  public void timeout(long timeoutMs) {
    worker.timeout(timeoutMs);
  }

  @Override
  public Set<TopicPartition> assignment() {
    return worker.assignment();
  }

  @Override
  public void pause(TopicPartition... partitions) {
    paused.addAll(List.of(partitions));
    worker.pause(partitions);
  }

  @Override
  public void resume(TopicPartition... partitions) {
    List<TopicPartition> go = new ArrayList<>();
    for (TopicPartition tp : partitions) {
      paused.remove(tp);
      if (!gates.isHeld(tp)) {
        go.add(tp);
      }
    }
    if (!go.isEmpty()) {
      worker.resume(go.toArray(new TopicPartition[0]));
    }
  }

  @Override
  public void requestCommit() {
    worker.requestCommit();
  }

  @Override
  public ErrantRecordReporter errantRecordReporter() {
    return worker.errantRecordReporter();
  }

  @Override
  public org.apache.kafka.common.metrics.PluginMetrics pluginMetrics() {
    return worker.pluginMetrics();
  }
}
