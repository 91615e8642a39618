package org.orderedkafka.gate;

import static org.orderedkafka.VectorFile.asList;
import static org.orderedkafka.VectorFile.asMap;
import static org.orderedkafka.VectorFile.num;
import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.HashMap;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.orderedkafka.VectorFile;

/**
 * The gate entries of the golden vectors ({@code vectors/linear_hash.json}, {@code gates}, read
 * relative to {@code jvm/}; {@code $ORDERED_VECTORS} names another file), decided by the JVM's
 * {@link GateEvaluator}: every check's {@code may_deliver}, {@code waiting_on} and {@code
 * required_partitions} must be what Python's {@code linear_hash.gating} wrote. The tampering
 * tests show the checker finds a changed decision, wait and partition list.
 */
class GateVectorsTest {
  static Map<String, Object> vectors;

  @BeforeAll
  static void load() throws Exception {
    vectors = VectorFile.load();
  }

  static Map<Integer, Long> offsets(Object o) {
    Map<Integer, Long> out = new HashMap<>();
    if (o != null) {
      for (Map.Entry<String, Object> e : asMap(o).entrySet()) {
        out.put(Integer.parseInt(e.getKey()), num(e.getValue()));
      }
    }
    return out;
  }

  static List<Object> waits(List<GateEvaluator.Wait> waits) {
    List<Object> out = new ArrayList<>();
    for (GateEvaluator.Wait w : waits) {
      out.add(List.of((long) w.partition(), w.offset(), w.epoch()));
    }
    return out;
  }

  static List<Object> longs(Object o) {
    List<Object> out = new ArrayList<>();
    for (Object x : asList(o)) {
      out.add(num(x));
    }
    return out;
  }

  /** Every gate check the JVM decides differently, described (empty: all agree). */
  static List<String> differences(List<Object> entries) {
    List<String> out = new ArrayList<>();
    for (int i = 0; i < entries.size(); i++) {
      Map<String, Object> e = asMap(entries.get(i));
      String where = "gates[" + i + "] (" + e.get("name") + ")";
      List<EpochInfo> history = new ArrayList<>();
      List<Object> actives = new ArrayList<>();
      for (Object x : asList(e.get("epochs"))) {
        EpochInfo info = EpochInfo.fromJson(asMap(x));
        history.add(info);
        actives.add((long) info.toActive);
      }
      if (!actives.equals(longs(e.get("actives")))) {
        out.add(where + " actives: vectors " + e.get("actives") + ", JVM " + actives);
      }
      OffsetView view = OffsetView.of(offsets(e.get("committed")), offsets(e.get("log_start")));
      // One evaluator across the entry's checks too: its cache of open gates must not
      // change a decision (the view is the same for every check).
      GateEvaluator shared = new GateEvaluator(history);
      for (Object c : asList(e.get("checks"))) {
        Map<String, Object> check = asMap(c);
        int p = (int) num(check.get("partition"));
        long o = num(check.get("offset"));
        String at = where + " at (" + p + ", " + o + ")";
        boolean may = new GateEvaluator(history).mayDeliver(p, o, view);
        if (may != (Boolean) check.get("may_deliver")) {
          out.add(at + " may_deliver: vectors " + check.get("may_deliver") + ", JVM " + may);
        }
        if (shared.mayDeliver(p, o, view) != may) {
          out.add(at + " may_deliver differs with a cache of open gates");
        }
        List<Object> waiting = waits(new GateEvaluator(history).waitingOn(p, o, view));
        List<Object> wantWaiting = new ArrayList<>();
        for (Object w : asList(check.get("waiting_on"))) {
          wantWaiting.add(longs(w));
        }
        if (!waiting.equals(wantWaiting)) {
          out.add(at + " waiting_on: vectors " + wantWaiting + ", JVM " + waiting);
        }
        List<Object> required = new ArrayList<>();
        for (int x : new GateEvaluator(history).requiredPartitions(p, o)) {
          required.add((long) x);
        }
        if (!required.equals(longs(check.get("required_partitions")))) {
          out.add(
              at + " required_partitions: vectors " + check.get("required_partitions") + ", JVM "
                  + required);
        }
      }
    }
    return out;
  }

  static List<Object> gates() {
    return asList(vectors.get("gates"));
  }

  @Test
  void everyGateCheckAgrees() {
    assertTrue(gates().size() >= 20, "too few gate vectors");
    int checks = 0;
    boolean open = false;
    boolean closed = false;
    boolean pending = false;
    for (Object o : gates()) {
      for (Object c : asList(asMap(o).get("checks"))) {
        checks++;
        boolean may = (Boolean) asMap(c).get("may_deliver");
        open |= may;
        closed |= !may;
      }
      for (Object x : asList(asMap(o).get("epochs"))) {
        pending |= !Boolean.TRUE.equals(asMap(x).get("sealed"));
      }
    }
    assertTrue(checks >= 100 && open && closed && pending, "the gate vectors cover too little");
    List<String> diff = differences(gates());
    assertEquals(List.of(), diff.size() > 20 ? diff.subList(0, 20) : diff);
  }

  /** A copy of the gate entries with one field of one check of entry {@code index} changed. */
  static List<Object> tampered(int index, int check, String field, Object value) {
    List<Object> entries = new ArrayList<>(gates());
    Map<String, Object> entry = new LinkedHashMap<>(asMap(entries.get(index)));
    List<Object> checks = new ArrayList<>(asList(entry.get("checks")));
    Map<String, Object> changed = new LinkedHashMap<>(asMap(checks.get(check)));
    changed.put(field, value);
    checks.set(check, changed);
    entry.put("checks", checks);
    entries.set(index, entry);
    return entries;
  }

  /** The first (entry, check) whose check has a non-empty {@code field} list. */
  static int[] firstWith(String field) {
    for (int i = 0; i < gates().size(); i++) {
      List<Object> checks = asList(asMap(gates().get(i)).get("checks"));
      for (int j = 0; j < checks.size(); j++) {
        if (!asList(asMap(checks.get(j)).get(field)).isEmpty()) {
          return new int[] {i, j};
        }
      }
    }
    throw new AssertionError("no check with a non-empty " + field);
  }

  @Test
  void aChangedDecisionWaitOrPartitionListIsFound() {
    int[] at = firstWith("waiting_on");
    Map<String, Object> check =
        asMap(asList(asMap(gates().get(at[0])).get("checks")).get(at[1]));
    boolean may = (Boolean) check.get("may_deliver");
    List<String> diff = differences(tampered(at[0], at[1], "may_deliver", !may));
    assertEquals(1, diff.size(), diff.toString());
    assertTrue(diff.get(0).startsWith("gates[" + at[0] + "]"), diff.get(0));
    assertTrue(diff.get(0).contains("may_deliver"), diff.get(0));
    assertEquals(1, differences(tampered(at[0], at[1], "waiting_on", List.of())).size());
    int[] req = firstWith("required_partitions");
    assertFalse(differences(tampered(req[0], req[1], "required_partitions", List.of())).isEmpty());
  }

  @Test
  void limitsAndCapsFollowTheRule() {
    // Epoch 1: 0 -> 1 sealed at B_0 = 10, B_1 = 4; epoch 2 (pending): 0 -> 2 from B_2 = 0.
    List<EpochInfo> history =
        List.of(
            new EpochInfo(0, true, List.of(), Map.of(), 1),
            new EpochInfo(1, true, List.of(new int[] {0, 1}), Map.of(0, 10L, 1, 4L), 2),
            new EpochInfo(2, false, List.of(new int[] {0, 2}), Map.of(2, 0L), 3));
    GateEvaluator gates = new GateEvaluator(history);
    assertEquals(4L, gates.limit(1));
    assertEquals(List.of(10L), gates.sourceMarks(0));
    assertTrue(gates.isSource(0));
    assertFalse(gates.isSource(1));
    Map<Integer, Long> end = Map.of(0, 20L, 1, 9L, 2, 5L);
    // Partition 0 read up to 6: 1 waits at its boundary 4, 2 at the pending epoch's 0.
    assertEquals(
        Map.of(0, 20L, 1, 4L, 2, 0L),
        GatePlanner.gateCaps(history, Map.of(0, 6L, 1, 0L, 2, 0L), end, Map.of()));
    // Read up to 10: 1's gate opens; the cache makes it the limit no more.
    assertEquals(
        Map.of(0, 20L, 1, 9L, 2, 0L),
        GatePlanner.gateCaps(history, Map.of(0, 10L, 1, 4L), end, Map.of()));
    // Trimmed past the boundary counts as read.
    assertEquals(
        9L, (long) GatePlanner.gateCaps(history, Map.of(0, 3L), end, Map.of(0, 10L)).get(1));
    assertTrue(gates.mayDeliver(1, 5, OffsetView.of(Map.of(0, 10L), Map.of())));
    assertEquals(GateEvaluator.NO_LIMIT, gates.limit(1));
    // An AvailableNow target of 0 below B_0 is raised to it (never past Kafka's end).
    assertEquals(
        Map.of(0, 10L, 1, 9L),
        GatePlanner.availableNowTarget(history, Map.of(0, 6L, 1, 9L), Map.of(0, 20L)));
    assertEquals(
        Map.of(0, 8L, 1, 9L),
        GatePlanner.availableNowTarget(history, Map.of(0, 6L, 1, 9L), Map.of(0, 8L)));
  }
}
