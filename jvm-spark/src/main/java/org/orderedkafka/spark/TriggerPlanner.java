package org.orderedkafka.spark;

import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import org.apache.kafka.common.TopicPartition;
import org.orderedkafka.gate.EpochInfo;
import org.orderedkafka.gate.GatePlanner;

/**
 * Where a trigger's batch may end before the read limit: the gates' part of {@link
 * OrderedMicroBatchStream#latestOffset}. Its reads of Kafka and ZooKeeper go through {@link
 * Reads}, so that which of them a trigger makes is decided here, where it can be tested.
 * Not thread-safe (Spark calls a stream from its query's thread).
 */
final class TriggerPlanner {
  /** What a trigger may read; every call is a round trip to Kafka or ZooKeeper. */
  interface Reads {
    /** Kafka's end offsets of the query's partitions. */
    Map<TopicPartition, Long> ends();

    /**
     * The topic's epochs, read after a ZooKeeper {@code sync} (so after {@link #ends}), or
     * null when the topic is not adopted.
     */
    List<EpochInfo> epochs(String topic);

    /** Kafka's log start offsets of the query's partitions. */
    Map<TopicPartition, Long> logStarts();
  }

  /** One trigger's ends, before the read limit. */
  static final class Plan {
    /** Partition -> where the batch may end (the start itself where nothing is to be read). */
    final Map<TopicPartition, Long> capped;

    /** The log starts if this trigger read them, else empty. */
    final Map<TopicPartition, Long> logStarts;

    final long heldRecords;
    final int heldPartitions;

    /** Answered from the AvailableNow target alone: nothing was read, nothing is left. */
    final boolean fromTarget;

    Plan(
        Map<TopicPartition, Long> capped,
        Map<TopicPartition, Long> logStarts,
        long heldRecords,
        int heldPartitions,
        boolean fromTarget) {
      this.capped = capped;
      this.logStarts = logStarts;
      this.heldRecords = heldRecords;
      this.heldPartitions = heldPartitions;
      this.fromTarget = fromTarget;
    }
  }

  private final boolean gated;
  private boolean availableNow;

  /** The AvailableNow target (frozen at the first trigger, raised where a gate needs it). */
  private Map<TopicPartition, Long> target;

  /** @param gated whether the query reads layouts ({@code ordered.zookeeper.connect} set) */
  TriggerPlanner(boolean gated) {
    this.gated = gated;
  }

  void prepareForTriggerAvailableNow() {
    availableNow = true;
    target = null;
  }

  boolean availableNow() {
    return availableNow;
  }

  /** The ends of the batch that starts at {@code begin}. */
  Plan plan(Map<TopicPartition, Long> begin, Reads reads) {
    if (availableNow && target != null && reachedTarget(begin)) {
      // Every partition is at its target, so none is held below a gate (a held partition's
      // cap is below its goal, which is at most its target), and no gate needs a target
      // raised: a target is raised for a sealed gate below a receiver's target that the
      // receiver has not passed, and a receiver passes a gate only once its sources are at
      // their boundaries. So the run is over, answered as Spark's source answers once told
      // prepareForTriggerAvailableNow: from the target, without Kafka or ZooKeeper (on the
      // run's last, empty trigger this saves an end offsets' read, a sync and the layouts).
      return new Plan(begin, Map.of(), 0, 0, true);
    }
    // 1. Kafka's end offsets first; 2. then the layouts, after a sync: every record below
    // an end read here carries an epoch the layouts know.
    Map<TopicPartition, Long> latest = reads.ends();
    Map<String, List<EpochInfo>> adopted = new TreeMap<>();
    if (gated) {
      for (String topic : byTopic(latest).keySet()) {
        List<EpochInfo> epochs = reads.epochs(topic);
        if (epochs != null) {
          adopted.put(topic, epochs);
        }
      }
    }
    Map<TopicPartition, Long> goal = availableNow ? availableNowGoal(begin, latest, adopted) : latest;
    // 3. The caps. Records below a log start count as passed, which can only open a gate
    // (GateEvaluator: a source is passed at its progress or its log start): so the log
    // starts are read only when a partition is held without them.
    Map<TopicPartition, Long> logStarts = Map.of();
    Map<TopicPartition, Long> capped = caps(adopted, begin, goal, logStarts);
    if (heldPartitions(goal, capped) > 0) {
      logStarts = reads.logStarts();
      capped = caps(adopted, begin, goal, logStarts);
    }
    long held = 0;
    int partitions = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      long over = goal.get(e.getKey()) - e.getValue();
      if (over > 0) {
        held += over;
        partitions++;
      }
    }
    return new Plan(capped, logStarts, held, partitions, false);
  }

  private boolean reachedTarget(Map<TopicPartition, Long> begin) {
    for (Map.Entry<TopicPartition, Long> t : target.entrySet()) {
      Long at = begin.get(t.getKey());
      if (at == null || at < t.getValue()) {
        return false;
      }
    }
    return true;
  }

  private static int heldPartitions(Map<TopicPartition, Long> goal, Map<TopicPartition, Long> capped) {
    int held = 0;
    for (Map.Entry<TopicPartition, Long> e : capped.entrySet()) {
      if (goal.get(e.getKey()) > e.getValue()) {
        held++;
      }
    }
    return held;
  }

  /** Each partition of an adopted topic capped at its first closed gate. */
  private static Map<TopicPartition, Long> caps(
      Map<String, List<EpochInfo>> adopted,
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> goal,
      Map<TopicPartition, Long> logStarts) {
    Map<TopicPartition, Long> capped = new HashMap<>();
    Map<String, Map<Integer, Long>> beginByTopic = byTopic(begin);
    Map<String, Map<Integer, Long>> startsByTopic = byTopic(logStarts);
    for (Map.Entry<String, Map<Integer, Long>> t : byTopic(goal).entrySet()) {
      String topic = t.getKey();
      Map<Integer, Long> first = beginByTopic.getOrDefault(topic, Map.of());
      List<EpochInfo> epochs = adopted.get(topic);
      Map<Integer, Long> caps =
          epochs != null
              ? GatePlanner.gateCaps(
                  epochs, first, t.getValue(), startsByTopic.getOrDefault(topic, Map.of()))
              : t.getValue();
      for (Map.Entry<Integer, Long> c : caps.entrySet()) {
        int p = c.getKey();
        long last = t.getValue().get(p);
        Long from = first.get(p);
        // An end below the start (the partition's end went back): left as it is, so that
        // Spark's own planning reports the loss (failOnDataLoss).
        long cap = from != null && last < from ? last : c.getValue();
        capped.put(new TopicPartition(topic, p), cap);
      }
    }
    return capped;
  }

  /** The AvailableNow target, frozen at the first trigger and raised where a gate needs it. */
  private Map<TopicPartition, Long> availableNowGoal(
      Map<TopicPartition, Long> begin,
      Map<TopicPartition, Long> latest,
      Map<String, List<EpochInfo>> adopted) {
    if (target == null) {
      target = new HashMap<>(latest);
    }
    Map<String, Map<Integer, Long>> latestByTopic = byTopic(latest);
    Map<String, Map<Integer, Long>> targetByTopic = byTopic(target);
    for (Map.Entry<String, List<EpochInfo>> h : adopted.entrySet()) {
      String topic = h.getKey();
      Map<Integer, Long> raised =
          GatePlanner.availableNowTarget(
              h.getValue(),
              targetByTopic.getOrDefault(topic, Map.of()),
              latestByTopic.getOrDefault(topic, Map.of()));
      for (Map.Entry<Integer, Long> r : raised.entrySet()) {
        target.put(new TopicPartition(topic, r.getKey()), r.getValue());
      }
    }
    Map<TopicPartition, Long> goal = new HashMap<>();
    for (Map.Entry<TopicPartition, Long> e : latest.entrySet()) {
      Long frozen = target.get(e.getKey());
      if (frozen != null) {
        goal.put(e.getKey(), Math.min(e.getValue(), frozen));
      } else if (begin.containsKey(e.getKey())) {
        goal.put(e.getKey(), begin.get(e.getKey()));
      }
      // A partition new since the target was frozen is left for a later run.
    }
    return goal;
  }

  static Map<String, Map<Integer, Long>> byTopic(Map<TopicPartition, Long> offsets) {
    Map<String, Map<Integer, Long>> out = new TreeMap<>();
    for (Map.Entry<TopicPartition, Long> e : offsets.entrySet()) {
      out.computeIfAbsent(e.getKey().topic(), t -> new TreeMap<>())
          .put(e.getKey().partition(), e.getValue());
    }
    return out;
  }
}
