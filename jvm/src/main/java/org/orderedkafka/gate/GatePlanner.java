package org.orderedkafka.gate;

import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;

/**
 * Where a micro-batch of one adopted topic may end: the JVM port of {@code gate_caps} and
 * {@code available_now_target} of Python's {@code spark_source/planner.py}, deciding with
 * {@link GateEvaluator}. Pure logic, no I/O.
 */
public final class GatePlanner {
  private GatePlanner() {}

  /** The query's progress as the gates see it: {@code start} and Kafka's log starts. */
  static OffsetView startView(Map<Integer, Long> start, Map<Integer, Long> logStarts) {
    return OffsetView.of(start, logStarts);
  }

  /**
   * Cap each partition's end at its first closed gate.
   *
   * @param epochs the topic's epochs, read <em>after</em> {@code end}
   * @param start partition -> where the batch starts (absent: 0, a partition never read)
   * @param end partition -> Kafka's end offset (or the AvailableNow target)
   * @param logStarts partition -> Kafka's log start offset
   * @return partition -> the batch's end: {@code end} lowered to the first boundary below it
   *     whose gate is closed, never below the partition's start
   */
  public static Map<Integer, Long> gateCaps(
      Collection<EpochInfo> epochs,
      Map<Integer, Long> start,
      Map<Integer, Long> end,
      Map<Integer, Long> logStarts) {
    GateEvaluator evaluator = new GateEvaluator(epochs);
    OffsetView view = startView(start, logStarts);
    Map<Integer, Long> caps = new TreeMap<>();
    for (Map.Entry<Integer, Long> e : end.entrySet()) {
      int partition = e.getKey();
      long last = e.getValue();
      long first = start.getOrDefault(partition, 0L);
      long cap = last;
      for (long[] gate : evaluator.gatesOf(partition)) {
        long boundary = gate[0];
        if (boundary >= last) {
          break;
        }
        // mayDeliver checks every gate at or below the boundary: the first failure is the
        // lowest closed gate.
        if (!evaluator.mayDeliver(partition, boundary, view)) {
          cap = boundary;
          break;
        }
      }
      caps.put(partition, Math.max(first, Math.min(cap, last)));
    }
    return caps;
  }

  /**
   * Raise an AvailableNow target where a sealed gate below it needs more of a source: the
   * source's target goes up to {@code B_a(e)} (never past Kafka's end {@code end}),
   * transitively.
   */
  public static Map<Integer, Long> availableNowTarget(
      Collection<EpochInfo> epochs, Map<Integer, Long> target, Map<Integer, Long> end) {
    Map<Long, EpochInfo> infos = new HashMap<>();
    for (EpochInfo e : epochs) {
      infos.put(e.epoch, e);
    }
    GateEvaluator evaluator = new GateEvaluator(infos.values());
    Map<Integer, Long> out = new TreeMap<>(target);
    boolean changed = true;
    while (changed) {
      changed = false;
      for (Map.Entry<Integer, Long> t : List.copyOf(out.entrySet())) {
        int b = t.getKey();
        long last = t.getValue();
        for (long[] gate : evaluator.gatesOf(b)) {
          if (gate[0] >= last) {
            break;
          }
          EpochInfo info = infos.get(gate[1]);
          if (!info.sealed) {
            continue;
          }
          for (int[] edge : info.edges) {
            int a = edge[0];
            if (edge[1] != b || !info.boundaries.containsKey(a)) {
              continue;
            }
            long need = Math.min(info.boundaries.get(a), end.getOrDefault(a, 0L));
            if (need > out.getOrDefault(a, 0L)) {
              out.put(a, need);
              changed = true;
            }
          }
        }
      }
    }
    return out;
  }
}
